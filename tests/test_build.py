"""Building a step's extension: once per source hash, imported straight from its folder by a fresh
worker (without cpp_extension's ninja and compiler probes), and Triton's autotuning kept on disk
for the next worker."""

import subprocess
import sys
import sysconfig

import pytest

from fusedkit import build


def test_a_built_extension_is_imported_without_asking_cpp_extension(tmp_path, monkeypatch):
    # Before, every fresh worker (one per candidate) called cpp_extension.load, which reruns
    # ninja and its compiler probes before importing the library it finds already built.
    from torch.utils import cpp_extension

    folder = tmp_path / "fusedkit_probe-x"
    folder.mkdir()
    src = folder / "probe.c"
    src.write_text('#include <Python.h>\nstatic struct PyModuleDef d = {PyModuleDef_HEAD_INIT, '
                   '"fusedkit_probe", 0, -1, 0};\nPyMODINIT_FUNC PyInit_fusedkit_probe(void) '
                   '{ PyObject *m = PyModule_Create(&d); PyModule_AddIntConstant(m, "answer", 42); '
                   'return m; }\n')
    library = folder / f"fusedkit_probe{cpp_extension.LIB_EXT}"
    subprocess.run(["cc", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", "-o",
                    str(library), str(src)], check=True)
    asked = []
    monkeypatch.setattr(cpp_extension, "load", lambda **kw: asked.append(kw) or pytest.fail("asked"))
    with pytest.raises(pytest.fail.Exception):   # no mark of a finished build: cpp_extension builds
        build._build("fusedkit_probe", folder, [src], [], "cc", False)
    (folder / build.BUILT_MARK).touch()
    module = build._build("fusedkit_probe", folder, [src], [], "cc", False)
    assert module.answer == 42 and len(asked) == 1


def test_the_compiler_probe_is_made_once_per_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEDKIT_BUILD_DIR", str(tmp_path))
    probes = []
    monkeypatch.setattr(build, "links_libstdcxx_shared", lambda cxx: probes.append(cxx) or True)
    for _ in range(2):
        build._cxx_links_libstdcxx_shared.cache_clear()   # as a fresh worker process starts
        assert build._cxx_links_libstdcxx_shared("cc") is True
    assert probes == ["cc"]


def test_autotuning_results_are_kept_for_the_next_worker():
    # Each candidate's fresh worker would otherwise benchmark every config of an autotuned
    # kernel again (knobs are read when a kernel is decorated, so in a fresh process).
    code = "import fusedkit, triton; print(triton.knobs.autotuning.cache)"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "True"
