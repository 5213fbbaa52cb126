"""Compile fusedkit's CUDA C++ kernels: with a GPU into a PyTorch extension per problem
(:func:`load_extension`), without one with ``nvcc`` alone (:func:`ptx`, :func:`resource_usage`).

Products go to the ignored ``build/`` (or ``$FUSEDKIT_BUILD_DIR``), named by a sha of sources,
headers, flags and versions. Steps that include ``common/hopper.cuh`` need ``sm_90a`` and build
apart, into the problem's Hopper extension. No ``--use_fast_math``: the steps are checked at 1e-5.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import torch

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"
_REPO_ROOT = Path(__file__).resolve().parent.parent
CXX_FLAGS = ["-O3"]
NVCC_FLAGS = ["-O3", "-lineinfo"]   # -lineinfo maps SASS to source lines for profilers only
NVCC_STANDALONE_FLAGS = ["-O3", "-std=c++17"]   # the PTX and resource-usage runs (-I<dir> added)
LDFLAGS = ["-lcublas"]  # the cuBLAS steps call cublasSgemm themselves
HOPPER_ARCH = "sm_90a"   # wgmma and setmaxnreg exist only on this architecture-specific target
HOPPER_BINDING = "binding_hopper.cpp"
BUILT_MARK = "fusedkit-built"   # left after the library: only such a folder is imported without ninja
STALE_LOCK_S = 300.0  # a build lock older than this is left over from a killed build
_HOPPER_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"(?:\.\./common/)?hopper\.cuh"', re.MULTILINE)
_ERROR_RE = re.compile(r"\berror\b|undefined reference|cannot find -l|fatal", re.IGNORECASE)


class BuildError(RuntimeError):
    """A compiler failed: the message holds its first error lines, ``log`` the whole output."""

    def __init__(self, what: str, log: str, log_path: Path | None = None) -> None:
        self.log, self.log_path = log, log_path
        super().__init__(f"{what}{f' (full log: {log_path})' if log_path else ''}:\n{_first_errors(log)}")


class CudaUnavailableError(RuntimeError):
    """The step needs a CUDA GPU (or a CUDA toolkit) that this machine does not have."""


def build_root() -> Path:
    """``$FUSEDKIT_BUILD_DIR``, else ``build/`` in the repository (``~/.cache/fusedkit`` installed)."""
    if os.environ.get("FUSEDKIT_BUILD_DIR"):
        return Path(os.environ["FUSEDKIT_BUILD_DIR"])
    return _REPO_ROOT / "build" if (_REPO_ROOT / "pyproject.toml").exists() else Path.home() / ".cache" / "fusedkit"


def _problem_dir(problem: str) -> Path:
    if not isinstance(problem, str) or not re.fullmatch(r"[A-Za-z0-9_]+", problem):
        raise ValueError(f"problem must be a folder name like 'p12', got {problem!r}")
    if not (KERNELS_DIR / problem).is_dir():
        known = sorted(p.name for p in KERNELS_DIR.iterdir() if p.is_dir())
        raise ValueError(f"problem={problem!r} has no kernels folder {KERNELS_DIR / problem}; "
                         f"known problems: {', '.join(known) or 'none'}")
    return KERNELS_DIR / problem


def needs_hopper(source_path: str | os.PathLike[str]) -> bool:
    """True for a step that includes ``common/hopper.cuh``: it compiles for ``sm_90a`` only."""
    return bool(_HOPPER_INCLUDE_RE.search(Path(source_path).read_text()))


def required_arch(source_path: str | os.PathLike[str]) -> str:
    """The target a step compiles for by default: ``sm_90a`` for the Hopper steps, else ``sm_90``."""
    return HOPPER_ARCH if needs_hopper(source_path) else "sm_90"


def kernel_sources(problem: str = "p12") -> list[Path]:
    """The problem's CUDA steps for any GPU, in step order."""
    return [p for p in sorted(_problem_dir(problem).glob("*.cu")) if not needs_hopper(p)]


def hopper_sources(problem: str = "p12") -> list[Path]:
    """The problem's ``sm_90a`` steps, in step order."""
    return [p for p in sorted(_problem_dir(problem).glob("*.cu")) if needs_hopper(p)]


def extension_sources(problem: str = "p12", hopper: bool = False) -> list[Path]:
    """The problem's (Hopper) steps, then the binding that defines the module."""
    binding = _problem_dir(problem) / (HOPPER_BINDING if hopper else "binding.cpp")
    return (hopper_sources(problem) if hopper else kernel_sources(problem)) + [binding]


def _extension_headers(*folders: Path) -> list[Path]:
    """Headers a build depends on: those beside its sources and those of ``kernels/common/``."""
    return [h for f in dict.fromkeys([*folders, KERNELS_DIR / "common"])
            for h in sorted([*f.glob("*.h"), *f.glob("*.cuh")])]


def _sha(paths: list[Path], extra: list[str]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    for s in extra:
        h.update(s.encode() + b"\0")
    return h.hexdigest()


def _remove_stale_lock(build_dir: Path, max_age_s: float = STALE_LOCK_S) -> bool:
    """Delete cpp_extension's ``lock`` older than ``max_age_s``: a killed build's blocks every load."""
    lock = build_dir / "lock"
    try:
        if time.time() - lock.stat().st_mtime <= max_age_s:
            return False
    except FileNotFoundError:
        return False
    lock.unlink(missing_ok=True)
    return True


def _first_errors(log: str, limit: int = 8) -> str:
    """The first ``limit`` error lines of a compiler log with their source line and caret."""
    lines, picked, errors = log.splitlines(), [], 0
    for i, line in enumerate(lines):
        if errors == limit:
            break
        if line.startswith(("[", "FAILED:", "ninja: ")) or len(line) > 400 or not _ERROR_RE.search(line):
            continue
        errors += 1
        picked.append("  " + line.strip())
        for ctx in lines[i + 1:i + 3]:   # the source line and caret, up to the next error
            if not ctx.strip() or _ERROR_RE.search(ctx) or ctx.startswith(("[", "FAILED:")):
                break
            picked.append("  " + ctx.rstrip())
    text = "\n".join(picked or ["  " + ln for ln in lines[-15:]])
    return text.replace(str(KERNELS_DIR) + os.sep, "kernels" + os.sep)


def _nvcc_path() -> str | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    found = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    return found if Path(found).is_file() else None


@functools.lru_cache(maxsize=None)
def _nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip().splitlines()[-1] if out.returncode == 0 else ""


def nvcc_available() -> bool:
    """True if an ``nvcc`` that answers ``--version`` is found."""
    try:
        return bool(_nvcc_path() and _nvcc_version(_nvcc_path()))
    except (OSError, subprocess.SubprocessError):
        return False


def _nvcc_for(what: str, source_path: str | os.PathLike[str], arch: str | None) -> tuple[str, Path, str]:
    src = Path(source_path)
    if src.suffix != ".cu":
        raise ValueError(f"source_path must be a .cu file, got {str(source_path)!r}")
    if not src.is_file():
        raise FileNotFoundError(f"source_path {str(source_path)!r} does not exist")
    arch = required_arch(src) if arch is None else arch
    if not isinstance(arch, str) or not re.fullmatch(r"sm_\d{2,3}[a-z]?", arch):
        raise ValueError(f"arch must look like 'sm_90' (sm_ and the compute capability), got {arch!r}")
    if not nvcc_available():
        raise CudaUnavailableError(
            f"{what} needs nvcc, the CUDA compiler, which was not found on PATH, in CUDA_HOME "
            "or in /usr/local/cuda; install the CUDA toolkit (no GPU needed for PTX)")
    return _nvcc_path(), src.resolve(), arch


def _target_flags(arch: str, what: str) -> list[str]:
    """nvcc flags that compile for ``arch`` into ``what`` ("ptx" or "cubin"); ``sm_90a`` takes the
    ``-gencode`` form (nvcc 13.0's ``-arch=sm_90a`` was seen to run a plain sm_90 pass too)."""
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
    """PTX of one ``.cu`` file (``arch`` defaults to :func:`required_arch`), cached under ``build/ptx/``."""
    nvcc, src, arch = _nvcc_for("ptx()", source_path, arch)
    flags = [*_target_flags(arch, "ptx"), "-ptx", *NVCC_STANDALONE_FLAGS, f"-I{src.parent}"]
    key = _sha([src, *_extension_headers(src.parent)], [*flags[:-1], _nvcc_version(nvcc)])[:16]
    out = build_root() / "ptx" / f"{src.stem}-{arch}-{key}.ptx"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")   # never half a file cached
        try:
            _run_nvcc(nvcc, [*flags, "-o", str(tmp), str(src)], f"nvcc -ptx {src.name} ({arch}) failed")
            tmp.replace(out)
        finally:
            tmp.unlink(missing_ok=True)
    return out.read_text()


def resource_usage(source_path: str | os.PathLike[str], arch: str | None = None) -> dict[str, dict[str, int]]:
    """What ptxas assigns each kernel: ``{kernel: {"registers" (per thread), "shared_bytes" (static,
    per block), "spill_stores", "spill_loads", "stack_bytes" (bytes per thread)}}``."""
    return ptxas(source_path, arch)[0]


def ptxas(source_path: str | os.PathLike[str], arch: str | None = None
          ) -> tuple[dict[str, dict[str, int]], list[str]]:
    """:func:`resource_usage`'s table and ptxas's warnings (a wgmma serialised, a setmaxnreg dropped)."""
    nvcc, src, arch = _nvcc_for("resource_usage()", source_path, arch)
    with tempfile.TemporaryDirectory() as tmp:
        proc = _run_nvcc(nvcc, [*_target_flags(arch, "cubin"), "-cubin", "-Xptxas", "-v",
                                *NVCC_STANDALONE_FLAGS, f"-I{src.parent}", "-o", str(Path(tmp) / "out.cubin"),
                                str(src)], f"nvcc -cubin {src.name} ({arch}) failed")
    kernels: dict[str, dict[str, int]] = {}
    entry = props_for = None   # the kernel whose "Used" line, the function whose frame line, comes next
    log = proc.stdout + proc.stderr
    for line in log.splitlines():
        if m := re.search(r"Compiling entry function '([^']+)'", line):
            entry = m.group(1)
            kernels[entry] = dict.fromkeys(("registers", "shared_bytes", "spill_stores", "spill_loads",
                                            "stack_bytes"), 0)
        elif m := re.search(r"Function properties for (\S+)", line):
            props_for = m.group(1)
        elif (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                             line)) and props_for in kernels:
            k = kernels[props_for]
            k["stack_bytes"], k["spill_stores"], k["spill_loads"] = map(int, m.groups())
        elif (m := re.search(r"Used (\d+) registers", line)) and entry is not None:
            kernels[entry]["registers"] = int(m.group(1))
            if s := re.search(r"(\d+) bytes smem", line):
                kernels[entry]["shared_bytes"] = int(s.group(1))
            entry = None
    cxxfilt = shutil.which("c++filt")   # template kernels arrive mangled, extern "C" ones not
    return ({(subprocess.run([cxxfilt, n], capture_output=True, text=True, timeout=60).stdout.strip() or n
              if n.startswith("_Z") and cxxfilt else n): stats for n, stats in kernels.items()},
            [ln for ln in log.splitlines() if "warning" in ln.lower()])


def ptx_instructions(ptx_text: str, pattern: str | re.Pattern[str]) -> list[str]:
    """Lines of ``ptx_text`` (stripped) matching the regular expression ``pattern``, e.g.
    ``r"ld\\.global(\\.nc)?\\.v4\\.f32"`` for 16-byte loads (escape the dots to be exact)."""
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    return [ln.strip() for ln in ptx_text.splitlines() if rx.search(ln)]


_LOADED: dict[str, ModuleType] = {}   # by build folder
_LOADED_FAST: dict[tuple, ModuleType] = {}   # by _source_stamp


def put_ninja_on_path() -> bool:
    """Put ``ninja`` on PATH for cpp_extension (a venv not activated has it beside its python or
    in the ``ninja`` package); False when there is none. Copied into CUDA solution files."""
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


def links_libstdcxx_shared(cxx: str) -> "bool | None":
    """Does ``cxx -shared`` link libstdc++ dynamically (a probe library formats a number; None:
    the probe could not tell)? Copied into CUDA solution files."""
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
    """The C++ compiler of an extension: ``$CXX`` or ``c++``, as torch picks it, unless it links
    libstdc++ statically into shared objects (a second copy beside Python's, which crashed the
    extension the first time it formatted a number); then one from PATH that does not; None when
    there is none. Copied into CUDA solution files."""
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
    """:func:`links_libstdcxx_shared`, remembered per compiler binary in the build folder."""
    path = shutil.which(cxx)
    if path is None:
        return links_libstdcxx_shared(cxx)
    st = os.stat(path)
    memo = build_root() / "cxx-probes" / hashlib.sha256(
        f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    words = {True: "yes", False: "no", None: "unknown"}
    with contextlib.suppress(OSError, StopIteration):
        return next(k for k, w in words.items() if w == memo.read_text().strip())
    answer = links_libstdcxx_shared(cxx)
    with contextlib.suppress(OSError):
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(words[answer])
    return answer


def _pick_cxx() -> str:
    cxx = usable_cxx(_cxx_links_libstdcxx_shared)
    if cxx is None:
        wanted = os.environ.get("CXX", "c++")
        raise BuildError(f"no usable C++ compiler: CXX={wanted} links libstdc++ statically",
                         f"error: {wanted} -shared links libstdc++ statically, and a PyTorch extension "
                         "built so crashes when it formats a number; set CXX to a compiler that links "
                         "it dynamically (e.g. /usr/bin/g++)")
    return cxx


def _plan(name: str, sources: list[Path], capability: tuple[int, int], torch_version: str,
          cuda_version: str | None, cxx: str, hopper: bool) -> tuple[Path, list[str]]:
    """The build folder (name, versions, a sha of files and flags) and nvcc flags of an extension."""
    arch = "90a" if hopper else f"{capability[0]}{capability[1]}"
    cuda_flags = [*NVCC_FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}"]
    dev_tag = "cu" + cuda_version.replace(".", "") if cuda_version else "cpu"
    headers = _extension_headers(*dict.fromkeys(s.parent for s in sources))
    sha = _sha([*sources, *headers], [*CXX_FLAGS, *cuda_flags, *LDFLAGS, torch_version, dev_tag, cxx])[:12]
    py_tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return build_root() / "ext" / f"{name}-{py_tag}-{torch_version}-{dev_tag}-{sha}", cuda_flags


def _extension_plan(problem: str, capability: tuple[int, int], torch_version: str,
                    cuda_version: str | None, cxx: str = "c++",
                    hopper: bool = False) -> tuple[str, Path, list[Path], list[str]]:
    """Name, build folder, sources and nvcc flags of a problem's extension (no side effects)."""
    sources = extension_sources(problem, hopper)
    name = f"fusedkit_{problem}" + ("_hopper" if hopper else "")
    folder, cuda_flags = _plan(name, sources, capability, torch_version, cuda_version, cxx, hopper)
    return name, folder, sources, cuda_flags


def _source_stamp(problem: str, sources: list[Path]) -> tuple:
    """(problem, (name, size, mtime) of every source and header): changes with any edit, unread."""
    files = [*sources, *_extension_headers(sources[0].parent)]
    return (problem, tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files))


def load_extension(problem: str = "p12", verbose: bool = False, hopper: bool = False) -> ModuleType:
    """Build (if needed) and import the problem's (``hopper``: Hopper) CUDA extension, once per
    process; CudaUnavailableError without a (Hopper) GPU, BuildError with the compiler's errors."""
    sources = extension_sources(problem, hopper)  # validates `problem` before anything heavy
    # The same sources already imported here: at once (an H200 took ~24 s a call to reach the sha's cache).
    fast_key = _source_stamp(problem, sources)
    if fast_key not in _LOADED_FAST:
        capability = _require_gpu(f"load_extension({problem!r}" + (", hopper=True)" if hopper else ")"), hopper)
        cxx = _pick_cxx()
        name, folder, sources, cuda_flags = _extension_plan(problem, capability, torch.__version__,
                                                            torch.version.cuda, cxx, hopper)
        _LOADED_FAST[fast_key] = _build(name, folder, sources, cuda_flags, cxx, verbose)
    return _LOADED_FAST[fast_key]


def load_sources(name: str, sources: "list[str | os.PathLike[str]]", *, hopper: bool = False,
                 verbose: bool = False) -> ModuleType:
    """:func:`load_extension` for other ``sources`` (a learner's kernel), one ``.cpp`` the module."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"name={name!r}: an extension name is a Python identifier")
    paths = [Path(s).resolve() for s in sources]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        raise ValueError(f"sources: {', '.join(missing) or 'none given'} (need existing files)")
    if not any(p.suffix == ".cpp" for p in paths):
        raise ValueError(f"sources={[p.name for p in paths]}: one .cpp must define the module")
    capability = _require_gpu(f"load_sources({name!r})", hopper)
    cxx = _pick_cxx()
    folder, cuda_flags = _plan(name, paths, capability, torch.__version__, torch.version.cuda, cxx, hopper)
    return _build(name, folder, paths, cuda_flags, cxx, verbose)


def _require_gpu(what: str, hopper: bool) -> tuple[int, int]:
    """The GPU's compute capability, or CudaUnavailableError saying why ``what`` cannot build."""
    from torch.utils import cpp_extension  # noqa: PLC0415 - imports setuptools (0.1 s): only to build

    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else "a CUDA build"
        raise CudaUnavailableError(f"{what}: this step needs a CUDA GPU (torch {torch.__version__}, "
                                   f"{build}, sees none); on CPU use ptx() to inspect the kernel")
    if cpp_extension.CUDA_HOME is None:
        raise CudaUnavailableError(f"{what}: no CUDA toolkit found (nvcc); set CUDA_HOME to the "
                                   "toolkit that matches torch's CUDA version")
    capability = torch.cuda.get_device_capability()
    if hopper and capability[0] != 9:
        raise CudaUnavailableError(f"{what}: these steps need a Hopper (sm_90) GPU (wgmma, TMA); this "
                                   f"one, {torch.cuda.get_device_name()}, is sm_{capability[0]}{capability[1]}")
    return capability


def _build(name: str, folder: Path, sources: list[Path], cuda_flags: list[str], cxx: str,
           verbose: bool) -> ModuleType:
    """Compile ``sources`` in ``folder`` unless built there before, and import the module."""
    from torch.utils import cpp_extension  # noqa: PLC0415 - setuptools, as above

    key = str(folder)
    built, done = folder / f"{name}{cpp_extension.LIB_EXT}", folder / BUILT_MARK
    if key not in _LOADED and built.is_file() and done.is_file() and \
            done.stat().st_mtime_ns >= built.stat().st_mtime_ns:
        spec = importlib.util.spec_from_file_location(name, built)
        _LOADED[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_LOADED[key])
    if key in _LOADED:
        return _LOADED[key]
    if not put_ninja_on_path():
        raise BuildError("ninja is required to build the extension", "error: ninja not found; pip install ninja")
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_lock(folder)
    saved_cxx = os.environ.get("CXX")
    os.environ["CXX"] = cxx  # torch reads CXX when it writes build.ninja
    try:
        module = cpp_extension.load(name=name, sources=[str(s) for s in sources], extra_cflags=CXX_FLAGS,
                                    extra_cuda_cflags=cuda_flags,  # an explicit -gencode: no arch list added
                                    extra_ldflags=LDFLAGS, build_directory=str(folder), with_cuda=True,
                                    verbose=verbose)
    except RuntimeError as exc:
        if "Error building extension" not in str(exc):
            raise
        log = str(exc).split(":", 1)[-1]
        (folder / "build.log").write_text(log)
        arch = cuda_flags[-1].rsplit("=", 1)[1]
        raise BuildError(f"building extension {name!r} for {arch} failed", log, folder / "build.log") from None
    finally:
        if saved_cxx is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = saved_cxx
    done.touch()   # after the link: a build killed half-way leaves no mark, so it is redone
    _LOADED[key] = module
    return module


def build_all(todo: list[tuple[str, bool]], jobs: int | None = None,
              command=None) -> dict[tuple[str, bool], tuple[float, str]]:
    """Build the extensions ``todo`` ((problem, hopper)) ``jobs`` at a time, each in a process of
    its own (``command(problem, hopper)``): {(problem, hopper): (seconds, "" or the error)}."""
    if command is None:
        hopper = _require_gpu("fusedkit build", False)[0] == 9
        todo = [e for e in todo if hopper or not e[1]]
        command = lambda problem, hopper: [  # noqa: E731
            sys.executable, "-c", f"from fusedkit.build import load_extension as f; f({problem!r}, hopper={hopper})"]
    jobs = min(jobs or len(todo), len(todo)) or 1
    env = {**os.environ, "MAX_JOBS": str(max(1, (os.cpu_count() or 1) // jobs))}

    def one(ext: tuple[str, bool]) -> tuple[float, str]:
        started = time.monotonic()
        proc = subprocess.run(command(*ext), capture_output=True, text=True, env=env)
        log = proc.stdout + proc.stderr
        error = (_first_errors(log, 1).strip().splitlines() or [f"exit status {proc.returncode}"])[0]
        return time.monotonic() - started, "" if proc.returncode == 0 else error
    with ThreadPoolExecutor(jobs) as pool:   # each thread waits on its build's process
        return dict(zip(todo, pool.map(one, todo)))
