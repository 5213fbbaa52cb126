"""What the measuring path spends beside a kernel's timing budget, cut where a GPU spends it: the
mechanisms, each shown on a CPU (their seconds on the H200 are in the records' ``seconds`` and
``build_s`` columns)."""

import subprocess
import sys
import sysconfig
import time

import pytest
import torch

from fusedkit import build, isolation, measure, problems, records

P12, P45 = problems.get("p12"), problems.get("p45")


def test_weights_and_inputs_are_drawn_on_the_device_itself(monkeypatch):
    # Before, nn.Linear's init ran on the host and the model was copied: KernelBench's 64M
    # weights of p12 cost a second of CPU time a model, and one measurement makes ten of them
    # (a worker's and the caller's per build), on every GPU machine too.
    drawn = []
    real = torch.nn.init.kaiming_uniform_

    def spy(*args, **kwargs):
        tensor = args[0] if args else kwargs["tensor"]
        drawn.append(tensor.device.type)
        return real(*args, **kwargs)
    monkeypatch.setattr(torch.nn.init, "kaiming_uniform_", spy)
    model = P12.make_model(P12.defaults, seed=1, device="meta")   # "meta": allocates nothing
    assert drawn and set(drawn) == {"meta"} and model.gemm.weight.device.type == "meta"
    rand, asked = torch.rand, []
    monkeypatch.setattr(torch, "rand", lambda *a, **k: asked.append(k.get("device")) or rand(*a, **k))
    P45.get_inputs(P45.sizes(batch_size=4, input_size=8, hidden_size=8, output_size=8), device="cpu")
    assert asked == [torch.device("cpu")]   # drawn there, by that device's generator
    monkeypatch.setattr(torch, "rand", rand)
    # On the CPU the draws are what they were: the same seed, the same weights and inputs.
    a, b = P12.make_model(P12.sizes(batch_size=4, in_features=8, out_features=8), seed=5), \
        P12.make_model(P12.sizes(batch_size=4, in_features=8, out_features=8), seed=5)
    assert torch.equal(a.gemm.weight, b.gemm.weight)
    x1 = P12.get_inputs(P12.sizes(batch_size=4, in_features=8, out_features=8), seed=2)[0]
    g = torch.Generator().manual_seed(2 + 1_000_003)
    assert torch.equal(x1, torch.rand(4, 8, generator=g))


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
        build._build("fusedkit_probe", folder, [src], [], "cc", "sm_90", False)
    (folder / build.BUILT_MARK).touch()
    module = build._build("fusedkit_probe", folder, [src], [], "cc", "sm_90", False)
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


def test_a_measurement_records_its_seconds_and_a_true_build_time(tmp_path):
    # Before, "build 0.0 s" was the timing's own build, which found everything the check's first
    # build had compiled or loaded in that worker; and no row said what the measurement cost.
    slow, compiled = 0.4, tmp_path / "compiled"

    def builder(model):
        if not compiled.exists():   # a compile: the first build pays, later ones find its cache
            time.sleep(slow)
            compiled.touch()
        w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
        return lambda x: torch.nn.functional.leaky_relu((x @ w.T + b) * 2.0, 0.1)

    sizes = P12.sizes(batch_size=16, in_features=32, out_features=24)
    t0 = time.perf_counter()
    m = measure.measure(P12, builder, sizes, device="cpu", seeds=1, warmup_ms=1, rep_ms=5,
                        name="sleepy")
    wall = time.perf_counter() - t0
    assert m.timed, m.summary()
    assert slow <= m.build_s < slow + 2.0, m.build_s
    assert m.build_s < m.seconds <= wall
    row = records.make_row(records.RunContext.collect(), **m.record_fields())
    assert float(row["build_s"]) == pytest.approx(m.build_s) and float(row["seconds"]) == pytest.approx(m.seconds)


def test_stage_seconds_are_read_on_the_callers_clock():
    timeline = [("the build", 10.0), ("call 1 at x", 10.5), ("the build", 11.0),
                ("call 1 at y", 13.0), ("call 2 at y", 14.5), ("done", 15.0)]
    assert isolation.seconds_between(timeline, "the build", "call 2") == 3.5
    assert isolation.seconds_between(timeline[:4], "the build", "call 2") != \
        isolation.seconds_between(timeline[:4], "the build", "call 2")   # NaN: it never came


@pytest.mark.parametrize("key", ["p12", "p45"])
def test_timed_rows_are_judged_in_one_forward_as_they_were_one_by_one(key):
    # The verified rows of every timed call were judged by a float64 forward each (thousands of
    # them for a fast kernel); a chunk of calls now shares one. The bounds are the same.
    from fusedkit.precision import error_bound, grouped_error_bounds

    p = problems.get(key)
    sizes = p.sizes(dict(zip([d.name for d in p.dims], (24, 40, 36, 20))))
    model64 = p.make_model(sizes, seed=3).double()
    x = p.get_inputs(sizes, seed=4)[0]
    groups = [x[i:i + 8] for i in range(0, 24, 8)]
    for precision in ("fp32", "tf32", "bf16", "fp16x3"):
        ref, bounds = grouped_error_bounds(model64, [x], 8, precision, p.error_model)
        for g, rows in enumerate(groups):
            one_ref, one_bound = error_bound(model64, [rows], precision, p.error_model, float64=True)
            assert torch.allclose(ref[g * 8:(g + 1) * 8], one_ref, rtol=1e-12, atol=0)
            assert bounds[g].item() == pytest.approx(one_bound.item(), rel=1e-9)
