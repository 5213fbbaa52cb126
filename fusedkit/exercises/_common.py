"""What the exercises share: launching a learner's kernel safely, and turning a
:class:`~fusedkit.measure.Measurement` into one line that says what is wrong.

A learner's kernel is checked exactly like a step of the ladder, by
:func:`fusedkit.measure.measure` (float64 references on fresh inputs, two inputs per build,
a nearby odd shape, poisoned outputs, then timing). On top of that, each exercise adds:

- outputs that start as NaN on every device, inside a buffer with a NaN margin after them:
  an element the kernel never stores stays NaN (an *unwritten output*), and a store that
  forgets its mask lands in the margin instead of another tensor's memory, where
  :func:`probe` sees it;
- weights copied once per build into buffers with a zero margin, so a load that forgets
  its mask reads zeros rather than faulting;
- errors raised while compiling or interpreting the kernel, cut to one line that quotes
  the kernel's line;
- known mistakes of each exercise (no bias, the sum never rescaled ...): when the check
  finds wrong numbers, the kernel's own output is compared with what each mistake would
  give, and a match names the mistake.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import linecache
import math
import re
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import triton

from fusedkit.check import (ALIASING, MUTATION, NOT_PLAIN, RAISED, REUSE, SPECIALISED, STREAM,
                            UNWRITTEN, WRONG, nearby_odd, rel_error)
from fusedkit import isolation, wire
from fusedkit.measure import Measurement, measure
from fusedkit.problems import Problem, Sizes
from fusedkit.problems import get as get_problem

PROBE_SEED = 4242
"""Seed of the model and input of the probe call made after the check."""
REUSE_HINT = "compute every output from the x of this call: check that the accumulator adds each product"
"""The hint for an output that ignores its input, where an exercise names none."""
MATCH_REL = 1e-4
"""A kernel output this close (relative, float64) to a mistake's output shows that mistake."""
CPU_CHECK = dict(seeds=1, warmup_ms=0.0, rep_ms=1.0)
GPU_CHECK = dict(seeds=3, warmup_ms=25.0, rep_ms=200.0)


_ANSWER = re.compile(r"^(\s*)# (\d+): ")


TRITON_IMPORTS = "import triton\nimport triton.language as tl"
"""The imports a Triton skeleton cell opens with."""


def source_of(solution: Any) -> str:
    """The source of a worked solution: a ``@triton.jit`` kernel (decorator included) or a
    plain Python function."""
    return inspect.getsource(getattr(solution, "fn", solution))


def skeleton_of(solution: Any, imports: str = TRITON_IMPORTS) -> str:
    """The notebook cell a learner completes, made from the worked ``solution`` (a
    ``@triton.jit`` kernel or a plain function): each numbered comment ``# n: ...`` becomes
    ``# TODO n: ...`` and the code lines under it (the answer) are left out; everything else
    is kept as it is, after ``imports``. One text for both, so the skeleton and the solution
    cannot drift apart."""
    out, dropping, indent, answered = [], False, 0, False
    for line in source_of(solution).splitlines():
        m = _ANSWER.match(line)
        if m:
            out.append(line.replace(f"# {m[2]}: ", f"# TODO {m[2]}: ", 1))
            dropping, indent, answered = True, len(m[1]), False
            continue
        stripped = line.lstrip()
        if dropping:
            if stripped.startswith("#") and not answered:    # the TODO's own continuation
                out.append(line)
                continue
            if stripped and not stripped.startswith("#") and len(line) - len(stripped) >= indent:
                answered = True                              # a line of the answer
                continue
            dropping = False
        out.append(line)
    return imports + "\n\n\n" + "\n".join(out) + "\n"


class KernelError(Exception):
    """The learner's kernel failed to compile or run; the message is one line."""


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (fixed when triton is imported)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    import os  # noqa: PLC0415

    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def is_kernel(obj: object) -> bool:
    """A ``@triton.jit`` function (compiled or interpreted)."""
    from triton.runtime.jit import KernelInterface  # noqa: PLC0415

    return isinstance(obj, KernelInterface)


def _kernel_file(kernel: object) -> str:
    fn = getattr(kernel, "fn", None)
    code = getattr(fn, "__code__", None)
    return code.co_filename if code else ""


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[0][:200] if lines else "(no message)"


def describe_error(e: BaseException, kernel: object) -> str:
    """One line for an error raised while compiling or running ``kernel``: the offending
    line of the kernel when it can be found, then the error's type and first line."""
    chain, seen = [], set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen and len(chain) < 10:
        seen.add(id(cur))
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    where, what = "", None
    # The GPU compiler: CompilationError carries the kernel's source and the AST node.
    for exc in chain:
        src, node = getattr(exc, "src", None), getattr(exc, "node", None)
        if src and node is not None and hasattr(node, "lineno"):
            lines = src.split("\n")
            if 0 < node.lineno <= len(lines):
                where = lines[node.lineno - 1].strip()
            msg = getattr(exc, "error_message", None)
            if msg:
                what = _first_line(msg.splitlines()[-1] if msg.strip() else msg)
    # The interpreter: the traceback passes through the kernel's own file.
    filename = _kernel_file(kernel)
    if not where and filename:
        for exc in chain:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
            if frames:
                where = (frames[-1].line or linecache.getline(filename, frames[-1].lineno)).strip()
    root = chain[-1]
    for exc in chain:   # the first that is neither Triton's wrapper nor a compile report
        if type(exc).__name__ not in ("InterpreterError", "CompilationError", "KernelError"):
            root = exc
            break
    if what is None:
        what = f"{type(root).__name__}: {_first_line(root)}"
    where = f"in `{where[:100]}`: " if where else ""
    return f"{where}{what}"


def run_kernel(kernel: object, grid: tuple[int, ...], *args: Any, **meta: Any) -> None:
    """Launch ``kernel[grid](*args, **meta)``; any failure becomes one-line :class:`KernelError`."""
    if not is_kernel(kernel):
        raise KernelError(f"got {type(kernel).__name__} {getattr(kernel, '__name__', '')!s}, not a "
                          "Triton kernel: keep the @triton.jit line above its def")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            kernel[grid](*args, **meta)
    except Exception as e:  # noqa: BLE001 - the learner's kernel may fail in any way
        raise KernelError(describe_error(e, kernel)) from None


def on_device(device: torch.device) -> contextlib.AbstractContextManager:
    """Triton launches on torch's current CUDA device: make it the tensors' device."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def guarded(shape: tuple[int, ...], margin: int, device: torch.device,
            fill: float = math.nan) -> tuple[torch.Tensor, torch.Tensor]:
    """A contiguous tensor of ``shape`` at the start of a buffer ``margin`` elements longer,
    all ``fill``; returns (tensor, margin). A store past the tensor's end lands in the margin."""
    numel = math.prod(shape)
    buf = torch.full((numel + margin,), fill, device=device, dtype=torch.float32)
    return buf[:numel].view(shape), buf[numel:]


def padded_copy(t: torch.Tensor, margin: int, fill: float = 0.0) -> torch.Tensor:
    """A contiguous copy of ``t`` followed by ``margin`` elements of ``fill`` in the same
    buffer (one-off, at build time): a load that forgets its mask reads zeros (``fill=0``)
    instead of faulting, or NaN (``fill=nan``), which then shows in the output."""
    out, _ = guarded(tuple(t.shape), margin, t.device, fill=fill)
    out.copy_(t.detach())
    return out


def margin_2d(rows: int, cols: int, block_rows: int, block_cols: int) -> int:
    """Elements past a row-major (rows, cols) tensor that unmasked block stores can reach."""
    padded_rows = triton.cdiv(rows, block_rows) * block_rows
    padded_cols = triton.cdiv(cols, block_cols) * block_cols
    return (padded_rows - rows + 1) * max(cols, padded_cols) + padded_cols


@dataclass
class Run:
    """One call of an exercise: the kernel's own output, the problem's output and the
    margin after the kernel's output."""

    out: torch.Tensor
    final: torch.Tensor
    margin: torch.Tensor


@dataclass(frozen=True)
class Mistake:
    """A likely slip: what the output then shows, what to fix, and the kernel output it
    gives (float64, from the probe's parts; None where it cannot be told apart there)."""

    seen: str
    hint: str
    output: Callable[[dict], torch.Tensor | None]


@dataclass
class Exercise:
    """One exercise: the skeleton the learner completes, its worked solution, how the
    kernel is launched, and the hints that turn a check's finding into advice."""

    name: str
    problem_key: str
    title: str
    kernel_name: str
    skeleton: str
    solution: Any
    prepare: Callable[[torch.nn.Module], dict]
    launch: Callable[[Any, dict, torch.Tensor], Run]
    parts: Callable[[torch.nn.Module, torch.Tensor, dict], dict]
    expected: Callable[[dict], torch.Tensor]
    blocks: Callable[[torch.device], dict]
    mistakes: tuple[Mistake, ...]
    hints: dict[str, str]
    output_name: str
    cpu_sizes: dict[str, int]
    gpu_sizes: dict[str, int] = field(default_factory=dict)   # {} = the problem's defaults
    notebook: str = ""        # the course notebook it belongs to, "01" ... "06"

    @property
    def problem(self) -> Problem:
        return get_problem(self.problem_key)

    def check(self, problem: Problem | str, kernel: Any, **options: Any) -> "ExerciseMeasurement":
        """See :func:`fusedkit.exercises.check`."""
        return run_check(self, problem, kernel, **options)

    def show_solution(self) -> None:
        """Print the worked solution's source."""
        print_solution(self.name, self.solution)

    def about(self) -> str:
        """One line: the sizes the check runs at, here and on a GPU (both shapes of each)."""
        return checked_sizes(self.problem, self.cpu_sizes, self.gpu_sizes,
                             cpu="in Triton's CPU interpreter")

    def builder(self, kernel: Any) -> Callable[[torch.nn.Module], Callable[..., torch.Tensor]]:
        """``build(model) -> fn``: the one-off preparation, then ``fn(x)`` launches ``kernel``
        (and finishes the problem with PyTorch where the exercise leaves that to it)."""
        def build(model: torch.nn.Module) -> Callable[..., torch.Tensor]:
            if not is_kernel(kernel):
                raise KernelError(f"got {type(kernel).__name__}, not a Triton kernel: keep the "
                                  "@triton.jit line above its def")
            prep = self.prepare(model)

            def fn(x: torch.Tensor) -> torch.Tensor:
                return self.launch(kernel, prep, x).final
            return fn
        build.__name__ = f"exercise_{self.name}"
        return build


# -- float64 models of a p12 tile kernel: the right output and two slips -------------------

def p12_tile_parts(model: torch.nn.Module, x: torch.Tensor, bl: dict) -> dict:
    """p12's pieces in float64 (x, W, b, the multiplier, the slope) and the K chunk BLOCK_K,
    what the models below are made of."""
    w, b = model.gemm.weight.detach().double(), model.gemm.bias.detach().double()
    return dict(x=x.double(), w=w, b=b, c=float(model.multiplier),
                s=float(model.leaky_relu.negative_slope), bk=bl["BLOCK_K"])


def p12_epilogue64(p: dict, acc: torch.Tensor) -> torch.Tensor:
    """LeakyReLU((acc + b) * multiplier) in float64."""
    v = (acc + p["b"]) * p["c"]
    return torch.where(v > 0, v, v * p["s"])


def p12_expected(p: dict) -> torch.Tensor:
    """The right output, in float64."""
    return p12_epilogue64(p, p["x"] @ p["w"].t())


def p12_last_chunk(p: dict) -> torch.Tensor | None:
    """The output when the accumulator is replaced by each K chunk's product instead of added
    to: only the last chunk counts (None with a single chunk, where it cannot be told apart)."""
    k = p["x"].shape[1]
    last = (k - 1) // p["bk"] * p["bk"]
    return p12_epilogue64(p, p["x"][:, last:] @ p["w"][:, last:].t()) if last else None


def p12_zero_acc(p: dict) -> torch.Tensor:
    """The output when nothing is added to the accumulator: the epilogue of zeros."""
    return p12_epilogue64(p, torch.zeros(p["x"].shape[0], p["w"].shape[0], dtype=torch.float64,
                                         device=p["x"].device))


# -- loading the skeleton as the notebook does --------------------------------------------

_counter = itertools.count(1)


def exec_source(source: str, label: str) -> dict:
    """Execute ``source`` as a notebook cell would, in a fresh namespace, under a file name
    registered with :mod:`linecache` (Triton reads a kernel's source through :mod:`inspect`)."""
    filename = f"<fusedkit exercise {label} #{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {"__name__": f"fusedkit_exercise_{label}"}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own skeleton text
    return namespace


def print_solution(name: str, solution: Any, what: str = "solution") -> None:
    """Print exercise ``name``'s worked ``solution`` (its source) under a line saying where it lives."""
    print(f"# fusedkit/exercises/{name}.py: the worked {what} of {name}\n")
    print(source_of(solution))


def checked_sizes(problem: Problem, cpu_sizes: Sizes, gpu_sizes: Sizes | None = None, *,
                  cpu: str = "on the CPU") -> str:
    """"Checked at 17x33x65 and the nearby odd shape 15x29x57 in ...; on a GPU at ... and ...":
    both shapes :func:`fusedkit.measure.measure` checks, computed, never typed."""
    small = problem.sizes(cpu_sizes)
    big = problem.sizes(gpu_sizes or problem.defaults)
    names = " x ".join(d.name for d in problem.dims)
    return (f"Checked ({names}) at {dims(small)} and the nearby odd shape "
            f"{dims(nearby_odd(problem, small))} {cpu}; on a GPU at {dims(big)} and "
            f"{dims(nearby_odd(problem, big))}.")


# -- the check and its one line ------------------------------------------------------------

@dataclass
class ExerciseMeasurement(Measurement):
    """A :class:`~fusedkit.measure.Measurement` with an exercise's verdict on it: ``message`` is
    the one line shown, ``fault`` what a ``✗`` found ("" for a ``✓``). A ``✗`` is never ``ok``:
    a wrong answer is a failure, whatever tier its numbers reached, and it has no record."""

    fault: str = ""
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.check.ok and not self.refused and not self.fault

    @property
    def failure(self) -> str:
        return Measurement.failure.fget(self) or self.fault

    @classmethod
    def graded(cls, m: Measurement, line: str) -> "ExerciseMeasurement":
        """``m`` with the verdict ``line`` (``✓ ...`` or ``✗ ...``) on it."""
        out = cls(**{f.name: getattr(m, f.name) for f in dataclasses.fields(m)})
        out.message = line
        out.fault = line.removeprefix("✗ ") if line.startswith("✗") else ""
        return out


@dataclass
class Probe:
    """What one more call at the nearby odd shape showed (after the check)."""

    sizes: Sizes
    out: torch.Tensor | None = None
    outside: int = 0                 # elements written past the end of the output
    error: str = ""
    parts: dict | None = None


def probe(ex: Exercise, kernel: Any, sizes: Sizes, device: torch.device, *,
          want_parts: bool) -> Probe:
    """Call ``kernel`` once at ``sizes`` on a fresh model and input, in a worker process of its
    own as every measurement does (:mod:`fusedkit.isolation`: an out-of-bounds store cannot
    reach this process); never raises. The reference pieces are computed here."""
    problem = ex.problem
    p = Probe(sizes)
    try:
        got = isolation.run(probe_call, problem, kernel, device, exercise=ex.name, sizes=dict(sizes))
        got = wire.fields(got, dict(out=(torch.Tensor, type(None)), outside=int, error=str))
    except isolation.WorkerDied as e:
        p.error = e.line
        return p
    except wire.Malformed as e:
        isolation.retire(device)
        p.error = f"{isolation.MALFORMED} ({e})"
        return p
    p.out, p.outside, p.error = isolation.unpack(got["out"], device), got["outside"], got["error"]
    if want_parts and not p.error:
        try:
            p.parts = ex.parts(*_probe_draw(problem, sizes, device), ex.blocks(device))
        except Exception as e:  # noqa: BLE001 - a probe must never turn into a traceback
            p.error = f"{type(e).__name__}: {_first_line(e)}"
    return p


def _probe_draw(problem: Problem, sizes: Sizes,
                device: torch.device) -> tuple[torch.nn.Module, torch.Tensor]:
    """The probe's model and input: the same draw in the worker and here."""
    model = problem.make_model(sizes, seed=PROBE_SEED, device=device)
    (x,) = problem.get_inputs(sizes, seed=PROBE_SEED, device=device)
    return model, x


def probe_call(*, build: Any, report: Callable[[str], None], progress: object, ask: Any,
               problem_key: str, device: str, exercise: str, sizes: Sizes) -> dict:
    """:func:`probe`'s call of the learner's kernel (``build``), run in its worker: its output
    and how many elements it stored past the output's end, or the error it raised."""
    from fusedkit import exercises  # noqa: PLC0415 - the package imports this module

    ex, device = exercises.get(exercise), torch.device(device)
    problem = ex.problem
    got = {"out": None, "outside": 0, "error": ""}
    report(f"the probe's call at {dims(sizes)}")
    try:
        model, x = _probe_draw(problem, sizes, device)
        with torch.no_grad():
            run = ex.launch(build, ex.prepare(model), x)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            got["out"] = isolation.pack(run.out)
            got["outside"] = int((~torch.isnan(run.margin)).sum().item())
    except KernelError as e:
        got["error"] = str(e)
    except Exception as e:  # noqa: BLE001 - a probe must never turn into a traceback
        if isolation.is_device_fault(e):
            raise   # the worker reports the crash and ends
        got["error"] = f"{type(e).__name__}: {_first_line(e)}"
    return got


def _same(out: torch.Tensor, other: torch.Tensor) -> bool:
    """``out`` equals ``other`` to MATCH_REL, infinities and NaNs in the same places."""
    if out.shape != other.shape:
        return False
    out, other = out.double(), other.double().to(out.device)
    for test in (torch.isnan, torch.isposinf, torch.isneginf):
        if not torch.equal(test(out), test(other)):
            return False
    fin = torch.isfinite(other)
    if not fin.any():
        return True
    return rel_error(out[fin], other[fin]) <= MATCH_REL


def matched_mistake(ex: Exercise, p: Probe) -> Mistake | None:
    """The first known mistake whose output the probe's output equals (and the right answer
    does not)."""
    if p.out is None or p.parts is None:
        return None
    right = ex.expected(p.parts)
    if _same(p.out, right):
        return None
    for mistake in ex.mistakes:
        try:
            wrong = mistake.output(p.parts)
        except Exception:  # noqa: BLE001 - a mistake that cannot be formed at these sizes
            continue
        if wrong is not None and not _same(wrong, right) and _same(p.out, wrong):
            return mistake
    return None


def dims(sizes: Sizes) -> str:
    return "x".join(str(v) for v in sizes.values())


def _raised_detail(failure: str) -> str:
    """The error's own words from a "raised an error: ..." failure line."""
    for marker in ("KernelError: ",):
        if marker in failure:
            return failure.split(marker, 1)[1]
    m = re.search(r" raised (.*)$", failure)
    return m.group(1) if m else failure


def _unwritten_detail(ex: Exercise, p: Probe, failure: str) -> tuple[str, bool]:
    """(what was seen, whether nothing at all was written)."""
    if p.out is not None:
        bad = ~torch.isfinite(p.out)
        n_bad, total = int(bad.sum().item()), p.out.numel()
        if n_bad:
            if n_bad == total:
                return (f"none of the {total} elements of {ex.output_name} was stored "
                        f"(all NaN, at {dims(p.sizes)})"), True
            first = [int(i) for i in bad.nonzero()[0].tolist()]
            at = f"{ex.output_name}[{', '.join(map(str, first))}]"
            return (f"{n_bad} of {total} elements of {ex.output_name} are NaN/Inf at "
                    f"{dims(p.sizes)}, the first at {at}"), False
    m = re.search(r"(\d+) of (\d+) elements", failure)
    if m:
        n_bad, total = int(m.group(1)), int(m.group(2))
        return f"{n_bad} of {total} outputs are NaN/Inf", n_bad == total
    return failure, False


def verdict(ex: Exercise, m: Measurement, p: Probe | None) -> str:
    """The one line a learner sees for ``m`` (and the probe made after it)."""
    hints = ex.hints
    if p is not None and p.outside:
        were = "1 element past its end was" if p.outside == 1 else f"{p.outside} elements past its end were"
        return (f"✗ stored outside {ex.output_name}: {were} written at {dims(p.sizes)}. "
                f"Hint: {hints['outside']}")
    failure = m.failure
    if not m.ok:
        klass = next((c for c in (RAISED, UNWRITTEN, WRONG, SPECIALISED, REUSE, MUTATION, ALIASING,
                                  NOT_PLAIN, STREAM) if failure.startswith(c + ":")), "")
        if klass == RAISED:
            return f"✗ your kernel raised an error: {_raised_detail(failure)}. Hint: {hints['raised']}"
        if klass == WRONG:   # numbers fp32 arithmetic cannot explain: the same line as a tier's
            return _wrong_numbers(ex, m, p)
        mistake = matched_mistake(ex, p) if p is not None else None
        if mistake is not None:   # what the learner did, not the name of the guard that saw it
            return f"✗ wrong output: {mistake.seen}. Hint: {mistake.hint}"
        if klass == UNWRITTEN:
            seen, nothing = _unwritten_detail(ex, p or Probe({}), failure)
            return (f"✗ unwritten output: {seen}. Hint: "
                    f"{hints['nothing_stored'] if nothing else hints['some_unwritten']}")
        if klass == SPECIALISED:
            return (f"✗ shape specialisation: right at {dims(m.sizes)} but not at the odd shape "
                    f"{dims(m.check.odd_sizes or nearby_odd(m.problem, m.sizes))}. "
                    f"Hint: {hints['specialised']}")
        if klass in (MUTATION, ALIASING):
            return f"✗ {_first_line(failure)}. Hint: {hints['mutation']}"
        if klass == REUSE:
            return (f"✗ the output does not follow x: a second, different input got the first "
                    f"one's answer. Hint: {hints.get('reuse', REUSE_HINT)}")
        return f"✗ {_first_line(failure)}"
    tier, rel, eager = m.tier, m.check.rel_error, m.check.eager_rel_error
    if tier != "fp32-faithful":
        return _wrong_numbers(ex, m, p)
    where = (f"in Triton's CPU interpreter (a check of the logic; time it on a GPU)"
             if m.interpreter else f"on {_device_name(m.device)}")
    timing = f", {m.timing.median_ms:.3g} ms per call {where}" if m.timing else f" {where}"
    odd = f" and {dims(m.check.odd_sizes)}" if m.check.odd_sizes else ""
    return (f"✓ right (fp32-faithful){timing}; rel. error {rel:.1e} (eager fp32 {eager:.1e}) "
            f"at {dims(m.sizes)}{odd}")


def _wrong_numbers(ex: Exercise, m: Measurement, p: Probe | None) -> str:
    """The line for numbers that are not fp32-faithful (beyond what fp32 can explain, or only
    less accurate than eager): the mistake they show, or how close they came."""
    hints, rel, eager = ex.hints, m.check.rel_error, m.check.eager_rel_error
    mistake = matched_mistake(ex, p) if p is not None else None
    numbers = f"rel. error {rel:.1e} against float64, eager fp32 {eager:.1e}"
    if mistake is not None:
        return f"✗ wrong numbers ({numbers}): {mistake.seen}. Hint: {mistake.hint}"
    if m.check.allclose:
        return (f"✗ close but not fp32-faithful ({numbers}; KernelBench's 1e-4 would pass). "
                f"Hint: {hints['precision']}")
    return f"✗ wrong numbers ({numbers}). Hint: {hints['wrong']}"


def own_problem(ex: Any, problem: Problem | str) -> Problem:
    """``problem`` (or its key) as a Problem, if it is exercise ``ex``'s; else ValueError."""
    problem = get_problem(problem) if isinstance(problem, str) else problem
    if problem.key != ex.problem_key:
        raise ValueError(f"exercise {ex.name!r} belongs to problem {ex.problem_key}, not {problem.key}")
    return problem


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return str(device)


def run_check(ex: Exercise, problem: Problem | str, kernel: Any, *, sizes: Sizes | None = None,
              device: str | torch.device | None = None, seeds: int | None = None,
              time_it: bool = True, warmup_ms: float | None = None, rep_ms: float | None = None,
              show: bool = True) -> ExerciseMeasurement:
    """See :func:`fusedkit.exercises.check`."""
    problem = own_problem(ex, problem)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu" and not interpreting():
        raise ValueError("device=cpu: Triton kernels run on the CPU only in its interpreter; set "
                         "TRITON_INTERPRET=1 before triton is imported (import fusedkit first)")
    gpu = device.type == "cuda"
    budget = dict(GPU_CHECK if gpu else CPU_CHECK)
    for key, value in (("seeds", seeds), ("warmup_ms", warmup_ms), ("rep_ms", rep_ms)):
        if value is not None:
            budget[key] = value
    if sizes is None:
        sizes = (ex.gpu_sizes or problem.defaults) if gpu else ex.cpu_sizes
    sizes = problem.sizes(sizes)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        m = measure(problem, ex.builder(kernel), sizes, device=device, name=f"exercise_{ex.name}",
                    precision="fp32", triton=True, time_it=time_it, **budget)
        p = None
        if not m.failure.startswith((RAISED + ":", isolation.CRASHED, isolation.HUNG)):
            wrong = not m.ok or m.tier != "fp32-faithful"
            p = probe(ex, kernel, nearby_odd(problem, sizes), device, want_parts=wrong)
        graded = ExerciseMeasurement.graded(m, verdict(ex, m, p))
    if show:
        print(graded.message)
    return graded
