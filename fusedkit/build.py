"""Compile fusedkit's CUDA C++ kernels, with or without a GPU.

With a GPU, :func:`load_extension` builds a problem's steps (every ``.cu`` under
``fusedkit/kernels/<problem>/`` plus its ``binding.cpp``) into one PyTorch extension with
``torch.utils.cpp_extension`` and ninja, and imports it. Without one, :func:`ptx` and
:func:`resource_usage` run ``nvcc`` alone on one source, so a reader can still see the
16-byte loads of a vectorized kernel or the registers of a tiled one.

Build products go to a gitignored folder, ``build/`` at the repository root (or
``$FUSEDKIT_BUILD_DIR``)::

    build/ext/<name>-<python tag>-<torch version>-<cuXYZ or cpu>-<sha>/   one extension build
    build/ptx/<source stem>-<arch>-<sha>.ptx                             cached PTX

The sha covers the sources, the headers beside them, the headers every binding shares
(``fusedkit/kernels/common/*.h``) and the flags, so a changed source rebuilds, and CPU and GPU,
or two torch versions, never share a folder.

Steps that use Hopper's architecture-specific instructions (wgmma, setmaxnreg: they include
``kernels/common/hopper.cuh``) need the ``sm_90a`` target, which runs on compute capability 9.x
only. They build apart, into the problem's Hopper extension (``binding_hopper.cpp`` and those
steps, ``load_extension(problem, hopper=True)``), so that a compile error there never takes down
the other steps; :func:`ptx` and :func:`resource_usage` pick ``sm_90a`` for them by default.
:func:`load_sources` builds an extension of other sources the same way (a learner's copy of a
step, a test's probe).

Flags: ``-O3`` and ``-gencode`` for the GPU's own capability (``compute_90a``/``sm_90a`` for the
Hopper extension). ``--use_fast_math`` is
deliberately absent: it flushes denormals and uses approximate division, and these steps
are compared with an fp32 reference at the 1e-5 level.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

__all__ = [
    "BuildError",
    "CudaUnavailableError",
    "KERNELS_DIR",
    "build_root",
    "extension_sources",
    "hopper_sources",
    "kernel_sources",
    "load_extension",
    "load_sources",
    "nvcc_available",
    "ptx",
    "ptx_instructions",
    "required_arch",
    "resource_usage",
]

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"
_REPO_ROOT = Path(__file__).resolve().parent.parent

CXX_FLAGS = ["-O3"]
# -lineinfo only maps SASS back to source lines for profilers; it changes no code.
NVCC_FLAGS = ["-O3", "-lineinfo"]
# Flags of the standalone nvcc runs (PTX, resource usage). -I<dir> is added per source.
NVCC_STANDALONE_FLAGS = ["-O3", "-std=c++17"]
LDFLAGS = ["-lcublas"]  # the cuBLAS steps call cublasSgemm themselves

STALE_LOCK_S = 300.0  # a build lock older than this is left over from a killed build
_ERRORS_SHOWN = 8     # error lines (with their context) kept in a BuildError message

_ARCH_RE = re.compile(r"^sm_\d{2,3}[a-z]?$")
_PROBLEM_RE = re.compile(r"^[A-Za-z0-9_]+$")


class BuildError(RuntimeError):
    """A compiler failed. The message holds its first error lines, not the whole log.

    ``log`` holds the full compiler output; ``log_path``, when set, is where it was saved.
    """

    def __init__(self, what: str, log: str, log_path: Path | None = None) -> None:
        self.log = log
        self.log_path = log_path
        excerpt = _first_errors(log)
        where = f" (full log: {log_path})" if log_path else ""
        super().__init__(f"{what}{where}:\n{excerpt}")


class CudaUnavailableError(RuntimeError):
    """The step needs a CUDA GPU (or a CUDA toolkit) that this machine does not have."""


# ---------------------------------------------------------------------------------------
# Paths and hashing


def build_root() -> Path:
    """Folder that holds every build product: ``$FUSEDKIT_BUILD_DIR`` if set, else
    ``build/`` at the repository root (``~/.cache/fusedkit`` for an installed package)."""
    env = os.environ.get("FUSEDKIT_BUILD_DIR")
    if env:
        return Path(env)
    if (_REPO_ROOT / "pyproject.toml").exists():
        return _REPO_ROOT / "build"
    return Path.home() / ".cache" / "fusedkit"


def _problem_dir(problem: str) -> Path:
    if not isinstance(problem, str) or not _PROBLEM_RE.match(problem):
        raise ValueError(f"problem must be a folder name like 'p12', got {problem!r}")
    folder = KERNELS_DIR / problem
    if not folder.is_dir():
        known = sorted(p.name for p in KERNELS_DIR.iterdir() if p.is_dir()) if KERNELS_DIR.is_dir() else []
        raise ValueError(f"problem={problem!r} has no kernels folder {folder}; "
                         f"known problems: {', '.join(known) or 'none'}")
    return folder


_HOPPER_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"(?:\.\./common/)?hopper\.cuh"', re.MULTILINE)
HOPPER_ARCH = "sm_90a"   # wgmma and setmaxnreg exist only on this architecture-specific target
HOPPER_BINDING = "binding_hopper.cpp"


def needs_hopper(source_path: str | os.PathLike[str]) -> bool:
    """True for a step that includes ``common/hopper.cuh`` (wgmma, setmaxnreg): it compiles
    only for ``sm_90a`` and belongs to the problem's Hopper extension."""
    return bool(_HOPPER_INCLUDE_RE.search(Path(source_path).read_text()))


def required_arch(source_path: str | os.PathLike[str]) -> str:
    """The target a step compiles for by default: ``sm_90a`` for the Hopper steps, else ``sm_90``."""
    return HOPPER_ARCH if needs_hopper(source_path) else "sm_90"


def kernel_sources(problem: str = "p12") -> list[Path]:
    """The problem's CUDA steps built for any GPU, ``fusedkit/kernels/<problem>/*.cu`` in step
    order (file names are zero-padded step numbers), without the Hopper-only ones
    (:func:`hopper_sources`). A new step is a new file (with its sidecar ``NN_slug.step`` for the
    registry, :func:`fusedkit.kernels.step_files`)."""
    return [p for p in sorted(_problem_dir(problem).glob("*.cu")) if not needs_hopper(p)]


def hopper_sources(problem: str = "p12") -> list[Path]:
    """The problem's ``sm_90a`` steps (those that include ``common/hopper.cuh``), in step order."""
    return [p for p in sorted(_problem_dir(problem).glob("*.cu")) if needs_hopper(p)]


def extension_sources(problem: str = "p12", hopper: bool = False) -> list[Path]:
    """Every file compiled into the problem's extension: its ``.cu`` steps and ``binding.cpp``;
    with ``hopper=True``, its Hopper steps and ``binding_hopper.cpp``."""
    folder = _problem_dir(problem)
    binding = folder / (HOPPER_BINDING if hopper else "binding.cpp")
    if not binding.is_file():
        raise ValueError(f"problem={problem!r}: {binding} is missing; it defines the Python module"
                         + (" of the Hopper steps" if hopper else ""))
    steps = hopper_sources(problem) if hopper else kernel_sources(problem)
    return steps + [binding]


def _headers_beside(folder: Path) -> list[Path]:
    return sorted([*folder.glob("*.h"), *folder.glob("*.cuh")])


def _extension_headers(problem_folder: Path) -> list[Path]:
    """Headers an extension's build depends on: those beside its sources, then the ones in
    ``kernels/common/`` that every ``binding.cpp`` includes (torch checks, the cuBLAS call),
    so an edit to a shared header rebuilds every problem."""
    return [*_headers_beside(problem_folder), *_headers_beside(KERNELS_DIR / "common")]


def _sha(paths: list[Path], extra: list[str]) -> str:
    """Hash of file names and contents plus extra strings (flags, versions)."""
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    for s in extra:
        h.update(s.encode() + b"\0")
    return h.hexdigest()


def _remove_stale_lock(build_dir: Path, max_age_s: float = STALE_LOCK_S) -> bool:
    """Delete ``build_dir/lock`` if it is older than ``max_age_s`` seconds.

    torch's cpp_extension holds that file while it builds; a build killed half-way leaves
    it behind and every later load waits on it forever. Returns True if one was removed.
    """
    lock = build_dir / "lock"
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return False
    if age <= max_age_s:
        return False
    lock.unlink(missing_ok=True)
    return True


# ---------------------------------------------------------------------------------------
# Compiler output


_ERROR_RE = re.compile(r"\berror\b|undefined reference|cannot find -l|fatal", re.IGNORECASE)


def _first_errors(log: str, limit: int = _ERRORS_SHOWN) -> str:
    """The first ``limit`` error lines of a compiler log, each with the source line and
    caret that nvcc and g++ print under it; ninja's echoed command lines are skipped."""
    lines = log.splitlines()
    picked: list[str] = []
    errors = 0
    i = 0
    while i < len(lines) and errors < limit:
        line = lines[i]
        skip = line.startswith(("[", "FAILED:", "ninja: ")) or len(line) > 400
        if not skip and _ERROR_RE.search(line):
            errors += 1
            picked.append("  " + line.strip())
            # Up to two lines of context (source line, caret) until the next error line.
            for ctx in lines[i + 1:i + 3]:
                if not ctx.strip() or _ERROR_RE.search(ctx) or ctx.startswith(("[", "FAILED:")):
                    break
                picked.append("  " + ctx.rstrip())
        i += 1
    if not picked:  # no recognisable error line: show the end of the log
        picked = ["  " + ln for ln in lines[-15:]]
    text = "\n".join(picked)
    return text.replace(str(KERNELS_DIR) + os.sep, "kernels" + os.sep)


# ---------------------------------------------------------------------------------------
# nvcc alone: PTX and resource usage (no GPU needed)


def _nvcc_path() -> str | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


_NVCC_VERSION: dict[str, str] = {}


def _nvcc_version(nvcc: str) -> str:
    if nvcc not in _NVCC_VERSION:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
        _NVCC_VERSION[nvcc] = out.stdout.strip().splitlines()[-1] if out.returncode == 0 else ""
    return _NVCC_VERSION[nvcc]


def nvcc_available() -> bool:
    """True if an ``nvcc`` that answers ``--version`` is found (CUDA_HOME, PATH, /usr/local/cuda)."""
    nvcc = _nvcc_path()
    if nvcc is None:
        return False
    try:
        return bool(_nvcc_version(nvcc))
    except (OSError, subprocess.SubprocessError):
        return False


def _require_nvcc(what: str) -> str:
    nvcc = _nvcc_path()
    if nvcc is None or not nvcc_available():
        raise CudaUnavailableError(
            f"{what} needs nvcc, the CUDA compiler, which was not found on PATH, in CUDA_HOME "
            "or in /usr/local/cuda; install the CUDA toolkit (no GPU needed for PTX)")
    return nvcc


def _check_source(source_path: str | os.PathLike[str]) -> Path:
    src = Path(source_path)
    if src.suffix != ".cu":
        raise ValueError(f"source_path must be a .cu file, got {str(source_path)!r}")
    if not src.is_file():
        raise FileNotFoundError(f"source_path {str(source_path)!r} does not exist")
    return src.resolve()


def _check_arch(arch: str) -> None:
    if not isinstance(arch, str) or not _ARCH_RE.match(arch):
        raise ValueError(f"arch must look like 'sm_90' (sm_ and the compute capability), got {arch!r}")


def _target_flags(arch: str, what: str) -> list[str]:
    """nvcc flags that compile for ``arch`` into ``what`` ("ptx" or "cubin"). An
    architecture-specific target (``sm_90a``) takes the ``-gencode`` form: with nvcc 13.0 the
    ``-arch=sm_90a`` shorthand has been seen to run a plain sm_90 pass too, which rejects wgmma."""
    if not arch.endswith("a"):
        return [f"-arch={arch}"]
    compute = "compute_" + arch[len("sm_"):]
    return [f"-gencode=arch={compute},code={compute if what == 'ptx' else arch}"]


def _run_nvcc(nvcc: str, args: list[str], what: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([nvcc, *args], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise BuildError(what, proc.stdout + proc.stderr)
    return proc


def ptx(source_path: str | os.PathLike[str], arch: str | None = None) -> str:
    """PTX text of one ``.cu`` file, from ``nvcc -arch=<arch> -ptx -O3``; ``arch`` defaults to
    :func:`required_arch` (``sm_90``, or ``sm_90a`` for the Hopper steps).

    Cached under ``build/ptx/`` by the hash of the source, the headers beside it and in
    ``kernels/common/``, the flags and nvcc's version. Raises BuildError with nvcc's first error lines if the source
    does not compile, CudaUnavailableError if nvcc is missing.
    """
    src = _check_source(source_path)
    arch = required_arch(src) if arch is None else arch
    _check_arch(arch)
    nvcc = _require_nvcc("ptx()")
    flags = [*_target_flags(arch, "ptx"), "-ptx", *NVCC_STANDALONE_FLAGS, f"-I{src.parent}"]
    key = _sha([src, *_extension_headers(src.parent)], [*flags[:-1], _nvcc_version(nvcc)])[:16]
    out = build_root() / "ptx" / f"{src.stem}-{arch}-{key}.ptx"
    if out.is_file():
        return out.read_text()
    out.parent.mkdir(parents=True, exist_ok=True)
    # Write to a temporary name first so that a killed run never leaves half a file cached.
    with tempfile.NamedTemporaryFile(dir=out.parent, suffix=".ptx.tmp", delete=False) as tmp:
        tmp_path = Path(tmp.name)
    try:
        _run_nvcc(nvcc, [*flags, "-o", str(tmp_path), str(src)], f"nvcc -ptx {src.name} ({arch}) failed")
        tmp_path.replace(out)
    finally:
        tmp_path.unlink(missing_ok=True)
    return out.read_text()


_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


def _demangle(name: str) -> str:
    """C++ names of template kernels arrive mangled (``_Z...``); extern "C" ones do not."""
    cxxfilt = shutil.which("c++filt")
    if not name.startswith("_Z") or cxxfilt is None:
        return name
    out = subprocess.run([cxxfilt, name], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or name


def _parse_ptxas(log: str) -> dict[str, dict[str, int]]:
    kernels: dict[str, dict[str, int]] = {}
    entry: str | None = None       # kernel whose "Used ..." line comes next
    props_for: str | None = None   # function whose "stack frame" line comes next
    for line in log.splitlines():
        if m := _ENTRY_RE.search(line):
            entry = m.group(1)
            kernels[entry] = {"registers": 0, "shared_bytes": 0, "spill_stores": 0,
                              "spill_loads": 0, "stack_bytes": 0}
        elif m := _PROPS_RE.search(line):
            props_for = m.group(1)
        elif (m := _FRAME_RE.search(line)) and props_for in kernels:
            k = kernels[props_for]
            k["stack_bytes"], k["spill_stores"], k["spill_loads"] = map(int, m.groups())
        elif (m := _USED_RE.search(line)) and entry is not None:
            kernels[entry]["registers"] = int(m.group(1))
            if s := _SMEM_RE.search(line):
                kernels[entry]["shared_bytes"] = int(s.group(1))
            entry = None
    return {_demangle(name): stats for name, stats in kernels.items()}


def resource_usage(source_path: str | os.PathLike[str], arch: str | None = None) -> dict[str, dict[str, int]]:
    """Per-kernel resources that ptxas assigns, from ``nvcc -cubin -Xptxas -v``; ``arch`` defaults
    to :func:`required_arch` (``sm_90``, or ``sm_90a`` for the Hopper steps).

    Returns ``{kernel_name: {"registers": per thread, "shared_bytes": static shared memory
    per block in bytes, "spill_stores": bytes, "spill_loads": bytes, "stack_bytes": stack
    frame per thread in bytes}}``. Spills mean the kernel ran out of registers and keeps
    values in (slow) local memory.
    """
    src = _check_source(source_path)
    arch = required_arch(src) if arch is None else arch
    _check_arch(arch)
    nvcc = _require_nvcc("resource_usage()")
    with tempfile.TemporaryDirectory() as tmp:
        proc = _run_nvcc(
            nvcc,
            [*_target_flags(arch, "cubin"), "-cubin", "-Xptxas", "-v", *NVCC_STANDALONE_FLAGS,
             f"-I{src.parent}", "-o", str(Path(tmp) / "out.cubin"), str(src)],
            f"nvcc -cubin {src.name} ({arch}) failed")
    return _parse_ptxas(proc.stdout + proc.stderr)


def ptx_instructions(ptx_text: str, pattern: str | re.Pattern[str]) -> list[str]:
    """Lines of ``ptx_text`` (stripped) that match the regular expression ``pattern``,
    e.g. ``r"ld\\.global(\\.nc)?\\.v4\\.f32"`` for 16-byte loads, ``r"ld\\.global(\\.nc)?\\.f32"``
    for 4-byte ones. Dots in a plain string are regex wildcards: escape them to be exact."""
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    return [ln.strip() for ln in ptx_text.splitlines() if rx.search(ln)]


# ---------------------------------------------------------------------------------------
# The PyTorch extension (needs a GPU)


_LOADED: dict[str, ModuleType] = {}
_LOADED_FAST: dict[tuple, ModuleType] = {}   # (problem, (name, size, mtime) of each source)


def put_ninja_on_path() -> bool:
    """cpp_extension runs ``ninja`` from PATH; a venv used without activation has it only
    beside its python, or in the ``ninja`` package. Adds that folder to PATH; False when no
    ninja is found. Self-contained (os, shutil, sys): :mod:`fusedkit.export` copies it."""
    if shutil.which("ninja"):
        return True
    folders = [os.path.dirname(sys.executable)]
    try:
        import ninja  # noqa: PLC0415 - optional, only to find its binary

        folders.append(ninja.BIN_DIR)
    except (ImportError, AttributeError):
        pass
    for folder in folders:
        if os.path.isfile(os.path.join(folder, "ninja")):
            os.environ["PATH"] = folder + os.pathsep + os.environ.get("PATH", "")
            return True
    return False


def _ensure_ninja_on_path() -> None:
    if not put_ninja_on_path():
        raise BuildError("ninja is required to build the extension", "error: ninja not found; pip install ninja")


def links_libstdcxx_shared(cxx: str) -> "bool | None":
    """Does ``cxx -shared`` link libstdc++ dynamically? Probed with a tiny library that formats
    a number (None: the probe could not tell, e.g. no ``readelf``). Self-contained (os, shutil,
    subprocess, tempfile): :mod:`fusedkit.export` copies it into CUDA solution files."""
    readelf = shutil.which("readelf")
    if readelf is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = os.path.join(tmp, "probe.cpp"), os.path.join(tmp, "probe.so")
        with open(src, "w") as f:
            f.write("#include <sstream>\n#include <string>\n"
                    "std::string f(long v) { std::ostringstream s; s << v; return s.str(); }\n")
        try:
            made = subprocess.run([cxx, "-shared", "-fPIC", "-o", lib, src],
                                  capture_output=True, text=True, timeout=120)
            if made.returncode != 0:
                return None
            dyn = subprocess.run([readelf, "-d", lib], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        return "libstdc++.so" in dyn.stdout


def usable_cxx(links_shared=links_libstdcxx_shared) -> "str | None":
    """The C++ compiler (and linker) of an extension: ``$CXX`` or ``c++``, as torch picks it,
    unless that one links libstdc++ statically into shared objects; then a compiler from PATH
    that links it dynamically; None when there is none.

    A static libstdc++ inside the extension is a second copy beside the libstdc++.so that
    Python and torch load; the two share some unique symbols (locale facet ids) but not their
    tables, and the extension crashes the first time it formats a number (seen on a GPU image
    whose ``CXX`` is such a compiler: a TORCH_CHECK message with an int64 in it segfaulted).
    Self-contained (os, shutil): :mod:`fusedkit.export` copies it.
    """
    wanted = os.environ.get("CXX", "c++")
    if links_shared(wanted) is not False:
        return wanted
    for candidate in ("c++", "g++", "/usr/bin/c++", "/usr/bin/g++"):
        path = shutil.which(candidate)
        if path and path != shutil.which(wanted) and links_shared(path):
            return path
    return None


@functools.lru_cache(maxsize=None)
def _cxx_links_libstdcxx_shared(cxx: str) -> "bool | None":
    """:func:`links_libstdcxx_shared`, probed once per compiler binary (its path, size and
    mtime) and remembered in the build folder: a fresh worker process per candidate would
    otherwise compile the probe again before every extension load."""
    path = shutil.which(cxx)
    if path is None:
        return links_libstdcxx_shared(cxx)
    st = os.stat(path)
    memo = build_root() / "cxx-probes" / hashlib.sha256(
        f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    try:
        return {"yes": True, "no": False, "unknown": None}[memo.read_text().strip()]
    except (OSError, KeyError):
        pass
    answer = links_libstdcxx_shared(cxx)
    with contextlib.suppress(OSError):
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text({True: "yes", False: "no", None: "unknown"}[answer])
    return answer


def _pick_cxx() -> str:
    """:func:`usable_cxx` with each compiler probed once, or a BuildError saying what to do."""
    cxx = usable_cxx(_cxx_links_libstdcxx_shared)
    if cxx is None:
        wanted = os.environ.get("CXX", "c++")
        raise BuildError(
            f"no usable C++ compiler: CXX={wanted} links libstdc++ statically",
            f"error: {wanted} -shared links libstdc++ statically, and a PyTorch extension built so "
            "crashes when it formats a number; set CXX to a compiler that links it dynamically "
            "(e.g. /usr/bin/g++)")
    return cxx


def _extension_plan(problem: str, capability: tuple[int, int], torch_version: str,
                    cuda_version: str | None, cxx: str = "c++",
                    hopper: bool = False) -> tuple[str, Path, list[Path], list[str]]:
    """Name, build folder, sources and nvcc flags of a problem's extension (no side effects).
    ``hopper=True``: the Hopper extension, always for compute_90a / sm_90a."""
    sources = extension_sources(problem, hopper)
    arch = "90a" if hopper else f"{capability[0]}{capability[1]}"
    cuda_flags = [*NVCC_FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}"]
    name = f"fusedkit_{problem}" + ("_hopper" if hopper else "")
    py_tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    dev_tag = "cu" + cuda_version.replace(".", "") if cuda_version else "cpu"
    sha = _sha([*sources, *_extension_headers(sources[0].parent)],
               [*CXX_FLAGS, *cuda_flags, *LDFLAGS, torch_version, dev_tag, cxx])[:12]
    folder = build_root() / "ext" / f"{name}-{py_tag}-{torch_version}-{dev_tag}-{sha}"
    return name, folder, sources, cuda_flags


def _source_stamp(problem: str, sources: list[Path]) -> tuple:
    """(problem, (name, size, mtime) of every source and header, shared ones included): a key
    that changes when any file of the extension is edited, computed without reading the files."""
    files = [*sources, *_extension_headers(sources[0].parent)]
    return (problem, tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files))


def load_extension(problem: str = "p12", verbose: bool = False, hopper: bool = False) -> ModuleType:
    """Build (if needed) and import the problem's CUDA extension; cached per process.

    Needs a CUDA GPU and a CUDA build of torch with its toolkit. The first build of a
    source version takes a minute or two; later loads reuse ``build/ext/...``. Raises
    CudaUnavailableError without a GPU and BuildError, with the first compiler errors,
    when a source does not compile. ``verbose=True`` streams ninja's output.

    ``hopper=True`` loads the problem's Hopper extension instead (:func:`hopper_sources` and
    ``binding_hopper.cpp``, built for sm_90a); on a GPU that is not compute capability 9.x it
    raises CudaUnavailableError("... needs a Hopper (sm_90) GPU ...").
    """
    sources = extension_sources(problem, hopper)  # validates `problem` before anything heavy
    # Fast path first: the same sources (by name, size and mtime) already imported in this
    # process. On an H200 every call used to cost ~24 s before reaching the hash-keyed cache
    # below (2026-11-29, data/logs/bench_p12_h200_slow_loads.txt); this returns at once.
    fast_key = _source_stamp(problem, sources)
    if fast_key in _LOADED_FAST:
        return _LOADED_FAST[fast_key]
    import torch  # noqa: PLC0415 - torch is heavy; only this function needs it

    capability = _require_gpu(f"load_extension({problem!r}" + (", hopper=True)" if hopper else ")"),
                              hopper)
    cxx = _pick_cxx()
    name, folder, sources, cuda_flags = _extension_plan(
        problem, capability, torch.__version__, torch.version.cuda, cxx, hopper)
    arch = "sm_90a" if hopper else f"sm_{capability[0]}{capability[1]}"
    module = _build(name, folder, sources, cuda_flags, cxx, arch, verbose)
    _LOADED_FAST[fast_key] = module
    return module


def load_sources(name: str, sources: "list[str | os.PathLike[str]]", *, hopper: bool = False,
                 verbose: bool = False) -> ModuleType:
    """Build (if needed) and import an extension made of ``sources`` rather than of a
    problem's steps: a learner's generated kernel, a test's probe. One ``.cpp`` among them
    defines the module (``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)``).

    The same flags, compiler and cache as :func:`load_extension`: the build folder,
    ``build/ext/<name>-...-<sha>/``, is keyed on the sources, the headers beside them and in
    ``kernels/common/``, and the flags, so a changed source is a new build. ``hopper=True``
    compiles for sm_90a (compute capability 9.x only), else for this GPU's own capability.
    Raises ValueError for a bad name or a missing source, CudaUnavailableError without a
    (Hopper) GPU, BuildError with the first compiler errors.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"name={name!r}: an extension name is a Python identifier")
    paths = [Path(s).resolve() for s in sources]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        raise ValueError(f"sources: {', '.join(missing) or 'none given'} (need existing files)")
    if not any(p.suffix == ".cpp" for p in paths):
        raise ValueError(f"sources={[p.name for p in paths]}: one .cpp must define the module")
    import torch  # noqa: PLC0415 - torch is heavy; only this function needs it

    capability = _require_gpu(f"load_sources({name!r})", hopper)
    cxx = _pick_cxx()
    arch = "90a" if hopper else f"{capability[0]}{capability[1]}"
    cuda_flags = [*NVCC_FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}"]
    dev_tag = "cu" + torch.version.cuda.replace(".", "")
    headers = sorted({h for p in paths for h in _headers_beside(p.parent)}
                     | set(_headers_beside(KERNELS_DIR / "common")))
    sha = _sha([*paths, *headers], [*CXX_FLAGS, *cuda_flags, *LDFLAGS, torch.__version__,
                                    dev_tag, cxx])[:12]
    py_tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    folder = build_root() / "ext" / f"{name}-{py_tag}-{torch.__version__}-{dev_tag}-{sha}"
    return _build(name, folder, paths, cuda_flags, cxx, f"sm_{arch}", verbose)


def _require_gpu(what: str, hopper: bool) -> tuple[int, int]:
    """The GPU's compute capability, or CudaUnavailableError saying why ``what`` cannot build."""
    import torch  # noqa: PLC0415
    from torch.utils import cpp_extension  # noqa: PLC0415

    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else "a CUDA build"
        raise CudaUnavailableError(
            f"{what}: this step needs a CUDA GPU (torch {torch.__version__}, "
            f"{build}, sees none); on CPU use ptx() to inspect the kernel")
    if cpp_extension.CUDA_HOME is None:
        raise CudaUnavailableError(
            f"{what}: no CUDA toolkit found (nvcc); set CUDA_HOME to the "
            "toolkit that matches torch's CUDA version")
    capability = torch.cuda.get_device_capability()
    if hopper and capability[0] != 9:
        raise CudaUnavailableError(
            f"{what}: these steps need a Hopper (sm_90) GPU "
            f"(wgmma, TMA); this one, {torch.cuda.get_device_name()}, is sm_{capability[0]}{capability[1]}")
    return capability


def _build(name: str, folder: Path, sources: list[Path], cuda_flags: list[str], cxx: str,
           arch: str, verbose: bool) -> ModuleType:
    """Compile ``sources`` in ``folder`` with torch's cpp_extension and import the module
    (once per folder and process)."""
    from torch.utils import cpp_extension  # noqa: PLC0415

    key = str(folder)
    if key in _LOADED:
        return _LOADED[key]
    built = folder / f"{name}{cpp_extension.LIB_EXT}"
    done = folder / BUILT_MARK
    if built.is_file() and done.is_file() and done.stat().st_mtime_ns >= built.stat().st_mtime_ns:
        # Built before, by this or another process (the folder's name is the hash of the sources,
        # headers and flags): import it. cpp_extension.load would rerun ninja and its compiler
        # probes first, in every fresh worker process, one per candidate.
        _LOADED[key] = _import_built(name, built)
        return _LOADED[key]
    _ensure_ninja_on_path()
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_lock(folder)
    saved_cxx = os.environ.get("CXX")
    os.environ["CXX"] = cxx  # torch reads CXX when it writes build.ninja
    try:
        module = cpp_extension.load(
            name=name,
            sources=[str(s) for s in sources],
            extra_cflags=CXX_FLAGS,
            extra_cuda_cflags=cuda_flags,  # an explicit -gencode: torch adds no arch list
            extra_ldflags=LDFLAGS,
            build_directory=str(folder),
            with_cuda=True,
            verbose=verbose,
        )
    except RuntimeError as exc:
        text = str(exc)
        if "Error building extension" not in text:
            raise
        log = text.split(":", 1)[1] if ":" in text else text
        log_path = folder / "build.log"
        log_path.write_text(log)
        # `from None`: the message already holds the errors; torch's traceback adds nothing.
        raise BuildError(f"building extension {name!r} for {arch} failed", log, log_path) from None
    finally:
        if saved_cxx is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = saved_cxx
    done.touch()   # after the link: a build killed half-way leaves no mark, so it is redone
    _LOADED[key] = module
    return module


def extensions() -> list[tuple[str, bool]]:
    """(problem folder, hopper) of every CUDA extension a step of the registry calls, sorted."""
    from fusedkit import problems  # noqa: PLC0415 - the registry imports torch

    return sorted({(v.call.problem, v.hopper) for key in problems.names() for v in problems.get(key).ladder()
                   if v.call is not None and v.call.kind != "triton"})


def build_all(jobs: int | None = None, command=None) -> dict[tuple[str, bool], tuple[float, str]]:
    """Build every extension of :func:`extensions` at once, before a measurement needs one: each
    in a process of its own (``command(problem, hopper)``, an argv; default: this Python calling
    :func:`load_extension`), at most ``jobs`` at a time (default: all), ninja sharing the cores
    among them (``MAX_JOBS``); the Hopper ones only on a Hopper GPU. Returns {(problem, hopper):
    (seconds, "" or the build's first error line)} in :func:`extensions` order."""
    todo = extensions()
    if command is None:
        hopper = _require_gpu("fusedkit build", False)[0] == 9
        todo = [e for e in todo if hopper or not e[1]]
        command = lambda problem, hopper: [  # noqa: E731
            sys.executable, "-c", f"from fusedkit.build import load_extension as f; f({problem!r}, hopper={hopper})"]
    jobs = min(jobs or len(todo), len(todo)) or 1
    env = {**os.environ, "MAX_JOBS": str(max(1, (os.cpu_count() or 1) // jobs))}
    running: dict[tuple[str, bool], tuple[subprocess.Popen, float, object]] = {}
    done: dict[tuple[str, bool], tuple[float, str]] = {}
    waiting = list(todo)
    while waiting or running:
        while waiting and len(running) < jobs:
            ext, log = waiting.pop(0), tempfile.TemporaryFile()
            running[ext] = (subprocess.Popen(command(*ext), stdout=log, stderr=subprocess.STDOUT, env=env),
                            time.monotonic(), log)
        time.sleep(0.05)
        for ext, (proc, started, log) in list(running.items()):
            if proc.poll() is not None:
                log.seek(0)
                text = log.read().decode(errors="replace")
                log.close()
                error = "" if proc.returncode == 0 else _first_errors(text, 1).strip().splitlines()[0]
                done[ext] = (time.monotonic() - started, error)
                del running[ext]
    return {ext: done[ext] for ext in todo}


BUILT_MARK = "fusedkit-built"
"""The file a finished build leaves in its folder, after its library: only a folder holding it
is imported without asking torch's cpp_extension (and so ninja) first."""


def _import_built(name: str, library: Path) -> ModuleType:
    """Import an extension module from its built library, as cpp_extension does at the end of
    a load."""
    spec = importlib.util.spec_from_file_location(name, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
