"""Export a kernel of the ladder as one self-contained KernelBench solution file.

``ModelNew``'s ``__init__`` is the reference Model's, verbatim (the same weights from the same seed);
``forward`` calls the step's function as the variant does (:class:`StepCall`). Triton and operands
modules are embedded as source, CUDA steps as the problem's extension (local includes inlined),
built by ``load_inline`` on the first ``forward``: the file imports torch, triton and the standard
library only.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import textwrap
from collections import Counter
from pathlib import Path
from string import Template
from typing import Callable

from fusedkit import build as fk_build, paths, records, results
from fusedkit.build import HOPPER_BINDING
from fusedkit.kernels import KERNELS, step_path
from fusedkit.problems import Problem, Variant
from fusedkit.problems import get as get_problem
from fusedkit.problems.base import StepCall

# A step file imports fusedkit for this line only; the exported file provides load_step itself.
_LOAD_STEP_IMPORT = re.compile(r"^from fusedkit\.kernels import load_step[ \t]*$", re.M)
_LOAD_STEP_CALL = re.compile(r"""load_step\(\s*["'](\w+)["']\s*,\s*["']([\w.]+)["']\s*\)""")
_IMPORTS_FUSEDKIT = re.compile(r"^\s*(from\s+fusedkit\b|import\s+fusedkit\b)", re.M)
_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
# A name defined at file scope in a .cu file: the identifier before the first "(" or "=" of a
# line starting in column 0 (the step files indent every statement); nvcc on the whole
# translation unit (tests/test_export.py) proves the list complete.
_FILE_SCOPE_NAME = re.compile(
    r"^(?!(?:namespace|using|extern|template|return|if|for|while|switch|static_assert)\b)"
    r"(?=[A-Za-z_])[^\n(=;{]*?\b([A-Za-z_]\w*)\s*[(=\[]", re.M)


def step_call(problem: Problem | str, slug: str) -> StepCall:
    """What the registered variant ``slug`` calls: the function, the weights and the options."""
    return _variant(problem, slug)[1].call


def exportable(problem: Problem | str) -> list[str]:
    """Slugs of the problem's own kernels (no baselines, no by-batch choices), in ladder order."""
    problem = _problem(problem)
    return [v.slug for v in problem.ladder() if not v.baseline and not v.routes]


def file_name(problem: Problem | str, slug: str) -> str:
    """The file name :func:`export_all` gives a variant: ``p12_triton_fp16x3.py``."""
    problem, v = _variant(problem, slug)
    return f"{problem.key}_{v.slug}.py"


def init_inputs(problem: Problem | str, sizes: dict[str, int] | None = None) -> list:
    """The reference constructor's arguments at ``sizes``: KernelBench's ``get_init_inputs()``."""
    problem = _problem(problem)
    sizes = problem.sizes(sizes or problem.defaults)
    values = {**sizes, **problem.constants}
    return [values[n] for n in _arguments(_model_class_of(problem).__init__)]


def best_per_tier(problem: Problem | str) -> dict[str, str]:
    """Tier -> the fastest of our exportable kernels that meets it (:func:`results.best_by_tier`)."""
    problem = _problem(problem)
    rows = results.recorded(problem)
    rows = rows[rows["variant"].isin(exportable(problem))]   # no by-batch choices
    return {tier: str(row["variant"]) for tier, row in results.best_by_tier(rows, problem).items()}


def render(problem: Problem | str, slug: str) -> str:
    """The text of the KernelBench solution file for variant ``slug`` of ``problem``."""
    problem, v = _variant(problem, slug)
    call = step_call(problem, slug)
    model_cls = _model_class_of(problem)
    text = Template(_FILE).substitute(
        header=_header(problem, v),
        docstring=_docstring(problem, v, call),
        imports=_IMPORTS[call.kind],
        model=_model_class(problem, v, call, model_cls),
        runtime=_RUNTIME[call.kind],
        sources=_sources_block(problem, call),
    )
    compile(text, file_name(problem, slug), "exec")   # a syntax error here is ours, not the user's
    return text


def export_variant(problem: Problem | str, slug: str, path: str | os.PathLike[str], *,
                   force: bool = False) -> Path:
    """Write :func:`render`'s file to ``path`` (an existing one with ``force``); the path written."""
    problem, _ = _variant(problem, slug)
    return _write(_writable([path], force), [render(problem, slug)])[0]


def export_all(problem: Problem | str, folder: str | os.PathLike[str], *,
               force: bool = False) -> list[Path]:
    """One file per exportable variant in ``folder``, every one checked and rendered before any write."""
    problem = _problem(problem)
    folder = paths.check(folder, "a folder for the solution files (created if missing)", folder=True)
    slugs = exportable(problem)
    targets = _writable([folder / file_name(problem, s) for s in slugs], force)
    return _write(targets, [render(problem, s) for s in slugs])


def _writable(files: list, force: bool) -> list[Path]:
    """The write target of each path; an existing file is refused unless ``force``."""
    out = []
    for path in files:
        target = paths.check(path, "a writable file (chmod u+w), existing or new, or another path")
        if target.exists() and not force:
            raise FileExistsError(f"path={str(path)!r} exists; pass --force (force=True) to overwrite it")
        out.append(target)
    return out


def _write(targets: list[Path], texts: list[str]) -> list[Path]:
    for path, text in zip(targets, texts):
        path.parent.mkdir(parents=True, exist_ok=True)
        paths.replace(path, text)
    return targets


def _problem(problem: Problem | str) -> Problem:
    return problem if isinstance(problem, Problem) else get_problem(problem)


def _variant(problem: Problem | str, slug: str) -> tuple[Problem, Variant]:
    problem = _problem(problem)
    v = problem.variants.get(slug) if isinstance(slug, str) else None
    if v is None:
        raise ValueError(f"variant={slug!r} is not a kernel of {problem.key}; "
                         f"allowed: {', '.join(exportable(problem))}")
    if v.baseline:
        raise ValueError(f"variant={slug!r} is a baseline (PyTorch itself), not a kernel to export; "
                         f"allowed: {', '.join(exportable(problem))}")
    if v.routes:
        steps = sorted({s for r in v.routes for s in r.slugs})
        raise ValueError(f"variant={slug!r} chooses among other steps by batch size; export those: "
                         f"{', '.join(steps)}")
    return problem, v


@functools.lru_cache(maxsize=4)
def _recorded_at(key: str, path: str, stamp: object) -> dict[str, dict]:
    """Our kernels' newest clean results by slug, read once per ``stamp`` of the records file."""
    problem = _problem(key)
    rows, mine = results.recorded(problem, path=path), set(exportable(problem))
    return {r["variant"]: {"tier": r["tier"] if isinstance(r["tier"], str) else "",
                           "median_ms": float(r["median_ms"]),
                           "speedup": float(r["speedup"]), "label": results.run_label(r)}
            for _, r in rows.iterrows() if r["variant"] in mine}


def _model_class_of(problem: Problem) -> type:
    """The reference Model class, of a model the problem's factory builds at tiny sizes."""
    return type(problem.make_model({d.name: 3 for d in problem.dims}))


def _arguments(method: Callable) -> list[str]:
    """A method's positional parameters after ``self``, in order."""
    code = method.__code__
    return list(code.co_varnames[1:code.co_argcount])


def _header(problem: Problem, v: Variant) -> str:
    """The file's opening comment: the step, its tier and speed as recorded."""
    path = records.default_path()
    mine = _recorded_at(problem.key, str(path), (path.stat().st_mtime_ns, path.stat().st_size)
                        if path.exists() else None)
    rec = mine.get(v.slug)
    if rec is None:
        where = ("no clean measurement of this step recorded yet" if mine
                 else "nothing recorded for this problem")
        recorded = f"# Tier and speed: {where}."
    else:
        tier = rec["tier"] or "not judged"
        recorded = (f"# Tier {tier}; last recorded {rec['median_ms']:.4g} ms, {rec['speedup']:.2f}x "
                    f"eager fp32,\n# on {rec['label']}.")
    return "\n".join([
        f"# KernelBench level 2 problem {problem.kernelbench_id} ({problem.title}),",   # as every one of ours
        f"# as fusedkit's `{v.slug}` (step {v.number}, {v.precision} arithmetic).",
        recorded,
        "# Self-contained: torch, triton and the standard library only; ModelNew takes the reference",
        "# Model's constructor arguments and state_dict. The kernel is built on the first forward.",
        f"# Written by: python -m fusedkit export --problem {problem.key} --variant {v.slug}",
    ])


def _docstring(problem: Problem, v: Variant, call: StepCall) -> str:
    functions = (call.function,) if isinstance(call.function, str) else call.function
    hopper = call.kind == "hopper"
    how = (f"The Triton step {call.problem}/{call.filename} (and the steps it loads) is embedded below "
           "as source, verbatim but for its `load_step` import" if call.kind == "triton" else
           f"The CUDA step is {' and '.join(f'`{f}`' for f in functions)} of problem {problem.key}'s "
           f"{'Hopper ' if hopper else ''}extension: its .cu files, {HOPPER_BINDING if hopper else 'binding.cpp'} "
           "and headers are embedded below (local includes inlined) and built once per process with "
           "torch.utils.cpp_extension.load_inline" + (" for sm_90a; it runs on a Hopper (sm_90) GPU only"
                                                      if hopper else ", linked with cuBLAS"))
    if call.kind != "cuda":
        how += ("; each ModelNew compiles its own copy" if call.kind == "triton" else
                f". Its operands are made by `{call.operands}` of common/{call.filename}, embedded below "
                "as source with the modules it loads, once per weight version; each ModelNew runs its own copy")
        how += ", so what it keeps between calls lives and dies with the model."
    else:
        how += "; torch keeps the build on disk for later processes."
    text = f"{v.title}.\n\nWhat changed against the step before: {v.summary}.\n\n{how}"
    return '"""' + "\n".join(textwrap.fill(p, 96) for p in text.split("\n")) + '\n"""'


def _model_class(problem: Problem, v: Variant, call: StepCall, model_cls: type) -> str:
    init_lines = textwrap.dedent(inspect.getsource(model_cls.__init__)).rstrip().splitlines()
    body_indent = re.match(r"\s*", init_lines[1]).group(0)
    if call.kind == "triton":
        opts = "".join(f", {k}={val!r}" for k, val in call.options.items())
        kernel = f"_TritonStep({call.problem!r}, {call.filename!r}, {call.function!r}{opts})"
    elif call.kind in ("hopper", "cuda_operands"):
        kernel = f"_OperandsStep({call.function!r}, {call.filename!r}, {call.operands!r})"
    else:
        kernel = f"_CudaStep({call.function!r})"
    init_lines += [f"{body_indent}# The kernel, built on the first forward; what it keeps between calls lives here.",
                   f"{body_indent}self._kernel = {kernel}"]
    init_text = textwrap.indent("\n".join(init_lines), "    ")

    inputs = _arguments(model_cls.forward)
    # The weights as the parameters themselves (the fp16x3 weight cache keys on the tensor object).
    args = [*(f"self.{t}" for t in call.weights.tensors), *(f"float(self.{n})" for n in call.weights.numbers)]
    call_line = f"        return self._kernel({', '.join([*inputs, *args])})"
    if len(call_line) > 100:
        joined = ",\n".join(f"            {a}" for a in [*inputs, *args])
        call_line = f"        return self._kernel(\n{joined},\n        )"
    doc = (f'    """KernelBench problem {problem.kernelbench_id}\'s Model computed by fusedkit\'s '
           f'`{v.slug}`.\n\n'
           "    The constructor is the reference Model's, verbatim: the same submodules in the same\n"
           "    order, so the same seed draws the same weights and the reference's state_dict loads.\n"
           '    """')
    return (f"class ModelNew(nn.Module):\n{doc}\n\n{init_text}\n\n"
            f"    def forward(self, {', '.join(inputs)}):\n{call_line}\n")


def _literal(text: str) -> str:
    """``text`` as a raw triple-quoted string where that reads back exactly, else its repr."""
    exact = not ("'''" in text or text.endswith(("'", "\\")) or "\r" in text or "\0" in text)
    return "r'''" + text + "'''" if exact else repr(text)


def _triton_sources(problem: str, filename: str) -> dict[str, str]:
    """The step's source and every step it loads, by "pNN/file.py", each with its ``load_step``
    import made a comment (the same line count: tracebacks name the repository's lines)."""
    found: dict[str, str] = {}
    todo = [(problem, filename)]
    while todo:
        p, f = todo.pop()
        key = f"{p}/{f}"
        if key in found:
            continue
        src = step_path(p, f).read_text(encoding="utf-8")
        src = _LOAD_STEP_IMPORT.sub("# load_step is given by the exported file (see _TritonStep)", src)
        if bad := _IMPORTS_FUSEDKIT.search(src):
            line = src.count("\n", 0, bad.start()) + 1
            raise ValueError(f"kernel {key} imports fusedkit at line {line}: it cannot be exported")
        found[key] = src
        todo += _LOAD_STEP_CALL.findall(src)
    return dict(sorted(found.items()))


def _inline_includes(path: Path, seen: set[Path]) -> list[str]:
    """``path``'s lines, each local include inlined once between ``#line`` markers."""
    rel = path.resolve().relative_to(KERNELS).as_posix()
    out = [f'#line 1 "{rel}"']
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if m := _LOCAL_INCLUDE.match(line):
            header = (path.parent / m.group(1)).resolve()
            if header not in seen:
                seen.add(header)
                out += _inline_includes(header, seen)
                out.append(f'#line {number + 1} "{rel}"')
            else:
                out.append(f"// {line.strip()}: inlined above")
            continue
        out.append("" if line.strip() == "#pragma once" else line)
    return out


def _colliding_names(sources: list[Path]) -> dict[Path, list[str]]:
    """Names that several .cu files define at file scope: each file's get a spelling of its own."""
    defined = {p: {n for n in _FILE_SCOPE_NAME.findall(p.read_text(encoding="utf-8"))
                   if not n.startswith("__")} for p in sources}
    counts = Counter(n for names in defined.values() for n in names)
    return {p: sorted(n for n in names if counts[n] > 1) for p, names in defined.items()}


def cuda_sources(problem: str, hopper: bool = False) -> tuple[str, str]:
    """The problem's (Hopper) extension as load_inline's C++ and CUDA translation units."""
    *steps, binding = fk_build.extension_sources(problem, hopper)
    cpp = "\n".join(_inline_includes(binding, set()))
    seen: set[Path] = set()
    parts: list[str] = []
    renames = _colliding_names(steps)
    for cu in steps:
        own = renames[cu]
        parts += [f"#define {n} {n}__{cu.stem}  // also defined by another step file" for n in own]
        parts += _inline_includes(cu, seen)
        parts += [f"#undef {n}" for n in own]
    return cpp + "\n", "\n".join(parts) + "\n"


def _sources_block(problem: Problem, call: StepCall) -> str:
    how = {"cuda": "local includes, inlined", "triton": "the load_step import, which this file provides",
           "hopper": "local includes, inlined, and the load_step import, which this file provides"}
    how["cuda_operands"] = how["hopper"]
    head = ("# " + "-" * 94 + f"\n# The kernel sources: fusedkit/kernels/{call.problem}/ (and what they use), "
            "verbatim but for\n# " + how[call.kind] + "\n# " + "-" * 94 + "\n")
    text, python = head, call.kind != "cuda"
    if python:
        modules = _triton_sources(call.problem if call.kind == "triton" else "common", call.filename)
        items = "".join(f"    {key!r}: {_literal(src)},\n" for key, src in modules.items())
        text += "_SOURCES = {\n" + items + "}\n"
    if call.kind == "triton":
        return text
    hopper = call.kind == "hopper"
    cpp, cu = cuda_sources(call.problem, hopper)
    name = "kernelbench_" + call.problem + ("_hopper" if hopper else "")
    arch = (f"_ARCH = {fk_build.HOPPER_ARCH[len('sm_'):]!r}  # wgmma, TMA, setmaxnreg: Hopper (sm_90) only\n"
            if hopper else "_ARCH = None  # the GPU at hand's own compute capability\n")
    return (text + ("\n" if python else "") + f"_EXTENSION_NAME = {name!r}\n" + arch +
            f"_CXX_FLAGS = {list(fk_build.CXX_FLAGS)!r}\n"
            f"_NVCC_FLAGS = {list(fk_build.NVCC_FLAGS)!r}  # plus -gencode for _ARCH\n"
            f"_LDFLAGS = {list(fk_build.LDFLAGS)!r}  # the cuBLAS steps call cublasSgemm themselves\n\n"
            f"_CPP_SOURCE = {_literal(cpp)}\n\n_CUDA_SOURCE = {_literal(cu)}\n")


# Templates of the generated file. No `from __future__` import: KernelBench may exec the file
# with lines of its own in front (its build-directory form), where a future import is an error.


_FILE = '''\
${header}
${docstring}

${imports}


${model}

${runtime}

${sources}'''

_IMPORTS = {
    "triton": "import linecache\nimport types\n\nimport torch  # noqa: F401 (the steps import torch and triton themselves)\nfrom torch import nn",
    "cuda": "import functools\nimport hashlib\nimport inspect\nimport os\nimport shutil\nimport subprocess\n"
            "import sys\nimport tempfile\n\nimport torch\nfrom torch import nn",
    "hopper": "import functools\nimport hashlib\nimport inspect\nimport linecache\nimport os\nimport shutil\n"
              "import subprocess\nimport sys\nimport tempfile\nimport types\n\nimport torch\nfrom torch import nn",
}
_IMPORTS["cuda_operands"] = _IMPORTS["hopper"]

_TRITON_STEP = '''\
class _TritonStep:
    """A Triton step's function, compiled from the sources embedded below on its first call.

    Each ModelNew owns one: the step modules and whatever they keep between calls (the fp16x3
    steps cache each weight's split, re-split when the weight changes) live and die with the model.
    """

    def __init__(self, problem, filename, function, **options):
        self.step = (problem, filename)
        self.function = function
        self.options = options
        self._modules = {}
        self._fn = None

    def __call__(self, *args):
        if self._fn is None:
            self._fn = getattr(self.load_step(*self.step), self.function)
        return self._fn(*args, **self.options)

    def load_step(self, problem, filename):
        """The step file as a module, run once per ModelNew (a step loads the steps it builds on
        through this, where in fusedkit it imports fusedkit.kernels.load_step)."""
        key = (problem, filename)
        if key not in self._modules:
            source = _SOURCES[f"{problem}/{filename}"]
            path = f"<kernelbench {problem}/{filename}>"
            # triton.jit reads each kernel's source back (inspect.getsource): linecache serves it.
            linecache.cache[path] = (len(source), None, source.splitlines(True), path)
            module = types.ModuleType(f"kernelbench_{problem}_step_{filename.rsplit('.', 1)[0]}")
            module.__file__ = path
            module.load_step = self.load_step
            exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)
            self._modules[key] = module
        return self._modules[key]

    def __getstate__(self):
        # A copy (deepcopy, pickle) starts with nothing compiled and nothing cached.
        return {**self.__dict__, "_modules": {}, "_fn": None}
'''
_EXTENSION = '''\
@functools.lru_cache(maxsize=None)
def _extension():
    """Build the extension (once per process: compiled code, no state) and import it.

    torch keeps the build under TORCH_EXTENSIONS_DIR; the name carries a hash of the sources,
    flags, torch version and GPU architecture, so a changed source never loads a stale build.
    """
    from torch.utils import cpp_extension

    if not torch.cuda.is_available():
        raise RuntimeError("this solution's CUDA kernels need a CUDA GPU; torch sees none")
    if cpp_extension.CUDA_HOME is None:
        raise RuntimeError("no CUDA toolkit (nvcc) found: set CUDA_HOME to the toolkit that "
                           "matches torch's CUDA version")
    major, minor = torch.cuda.get_device_capability()
    if _ARCH is not None and not _ARCH.startswith(str(major)):
        raise RuntimeError(f"this solution's kernels are built for sm_{_ARCH} (wgmma, TMA): they need "
                           f"a Hopper (sm_90) GPU; this one, {torch.cuda.get_device_name()}, is "
                           f"sm_{major}{minor}")
    arch = _ARCH or f"{major}{minor}"
    cuda_flags = [*_NVCC_FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}"]
    key = hashlib.sha256("\\0".join([_CPP_SOURCE, _CUDA_SOURCE, *_CXX_FLAGS, *cuda_flags, *_LDFLAGS,
                                     torch.__version__]).encode()).hexdigest()[:12]
    extra = {}
    if "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters:
        extra["no_implicit_headers"] = True  # the sources include what they need
    put_ninja_on_path()
    cxx = usable_cxx()
    if cxx is None:
        raise RuntimeError("no C++ compiler that links libstdc++ dynamically was found (a static "
                           "one crashes the extension); set CXX, e.g. to /usr/bin/g++")
    saved = os.environ.get("CXX")
    os.environ["CXX"] = cxx  # torch reads CXX when it writes build.ninja
    try:
        return cpp_extension.load_inline(
            name=f"{_EXTENSION_NAME}_{key}", cpp_sources=[_CPP_SOURCE], cuda_sources=[_CUDA_SOURCE],
            extra_cflags=list(_CXX_FLAGS), extra_cuda_cflags=cuda_flags,
            extra_ldflags=list(_LDFLAGS), with_cuda=True, verbose=False, **extra)
    finally:
        if saved is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = saved


'''
# The build helpers a CUDA solution needs are fusedkit.build's own, copied as source (they are
# written to need only the standard library), so the two cannot drift apart.
_EXTENSION += "\n\n".join(textwrap.dedent(inspect.getsource(f)) for f in (
    fk_build.put_ninja_on_path, fk_build.links_libstdcxx_shared, fk_build.usable_cxx))
_CUDA_STEP = '''class _CudaStep:
    """One function of the problem's CUDA extension, which is built on the first call."""

    def __init__(self, function):
        self.function = function
        self._fn = None

    def __call__(self, *args):
        if self._fn is None:
            self._fn = getattr(_extension(), self.function)
        return self._fn(*args)

    def __getstate__(self):
        return {**self.__dict__, "_fn": None}


'''
_OPERANDS_STEP = '''\
class _OperandsStep(_TritonStep):
    """One function of the problem's extension (built on the first call), or a tuple of them for
    a step of several launches, fed by its operands function, which makes the operands the
    kernel takes from the model's (W transposed, 16-bit copies, fp16x3 splits; and chains the
    launches): a Python module embedded below, run once per ModelNew, so the weight's form it
    keeps (made once per weight version) lives and dies with the model."""

    def __init__(self, function, operands_file, operands):
        super().__init__("common", operands_file, operands)
        self.kernels = (function,) if isinstance(function, str) else tuple(function)

    def __call__(self, *args):
        if self._fn is None:
            ext = _extension()   # first: it says which GPU it needs
            compiled = [getattr(ext, kernel) for kernel in self.kernels]
            self._fn = functools.partial(getattr(self.load_step(*self.step), self.function), *compiled)
        return self._fn(*args)


'''
_RUNTIME = {"triton": _TRITON_STEP, "cuda": _CUDA_STEP + _EXTENSION,
            "hopper": _TRITON_STEP + "\n\n" + _OPERANDS_STEP + _EXTENSION}
_RUNTIME["cuda_operands"] = _RUNTIME["hopper"]
