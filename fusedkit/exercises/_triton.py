"""The Triton kernel exercises: the learner's kernel measured as a step of the ladder, then called once more at
the nearby odd shape in a worker (:func:`probe_job`), so the line says what the kernel did. Outputs start as NaN
in a buffer with a NaN margin: an element never stored stays NaN, a store that forgets its mask lands in the
margin. Weights are copied once per build with a margin: a load that forgets its mask reads zeros (or NaN, which
shows) rather than faulting. Wrong numbers are compared with each known mistake's (float64)."""

from __future__ import annotations

import contextlib
import functools
import linecache
import math
import traceback
import warnings
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
import triton
from triton.runtime.jit import KernelInterface

from fusedkit.exercises._protocol import Exercise, Verdict, checked_at, dims, first_line
from fusedkit.harness import WorkerDied, measure, pack, plan, rel_error, run_job, unpack
from fusedkit.harness.terms import (ALIASING, CRASHED, HUNG, MUTATION, RAISED, REUSE, SPECIALISED,
                                    UNWRITTEN, WRONG)
from fusedkit.problems import Problem, Sizes
from fusedkit.problems import get as get_problem
from fusedkit.problems.base import nearby_odd
from fusedkit.problems.p12_gemm_multiply_leakyrelu import WEIGHTS as p12_weights   # W, b, multiplier, slope

CPU_CHECK = dict(seeds=1, warmup_ms=0.0, rep_ms=1.0)
GPU_CHECK = dict(seeds=3, warmup_ms=25.0, rep_ms=200.0)
PROBE_SEED = 4242
MATCH_REL = 1e-4   # a kernel output this close (relative) to a mistake's output shows that mistake
HINTS = dict(
    raised="check the kernel's signature (keep the skeleton's parameters) and the TODO lines",
    nothing_stored="keep the skeleton's tl.store at the end of the kernel",
    precision="give tl.dot input_precision=\"ieee\": tf32 rounds the inputs to 10 bits",
    reuse="compute every output from the x of this call: check that the accumulator adds each product")


class KernelError(Exception):
    """The learner's kernel failed to compile or run: one line."""


class Run(NamedTuple):
    """One call: the kernel's own output, the problem's output, the margin after the first."""
    out: torch.Tensor
    final: torch.Tensor
    margin: torch.Tensor


class Mistake(NamedTuple):
    """A likely slip: what its output shows, what to fix, its float64 output (None: not told apart there)."""
    seen: str
    hint: str
    output: Callable[[dict], torch.Tensor | None]


class Probe(NamedTuple):
    """What the call at the nearby odd shape showed; the float64 parts of its draw when asked for."""
    out: torch.Tensor | None = None  # None: the call raised, or its worker died
    outside: int = 0                 # elements written past the end of the output
    parts: dict | None = None


def describe_error(e: BaseException, kernel: object) -> str:
    """One line for an error of ``kernel``: its line when it can be found, the error's type and first line."""
    chain: list[BaseException] = []
    while e is not None and e not in chain and len(chain) < 10:
        chain.append(e)
        e = e.__cause__ or e.__context__
    where = what = ""
    for exc in chain:    # the GPU compiler: CompilationError carries the source and the AST node
        src, node = getattr(exc, "src", None), getattr(exc, "node", None)
        if src and 0 < getattr(node, "lineno", 0) <= len(src.split("\n")):
            where = src.split("\n")[node.lineno - 1].strip()
            msg = (getattr(exc, "error_message", None) or "").strip()
            what = first_line(msg.splitlines()[-1]) if msg else what
    code = getattr(getattr(kernel, "fn", None), "__code__", None)
    for exc in chain if code and not where else ():   # the interpreter: the kernel's own frames
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == code.co_filename]
        if frames:
            where = (frames[-1].line or linecache.getline(code.co_filename, frames[-1].lineno)).strip()
    root = next((x for x in chain if type(x).__name__ not in
                 ("InterpreterError", "CompilationError", "KernelError")), chain[-1])
    what = what or f"{type(root).__name__}: {first_line(root)}"
    return f"in `{where[:100]}`: {what}" if where else what


def launch(kernel: Any, grid: tuple[int, ...], *args: Any, **meta: Any) -> None:
    """``kernel[grid](*args, **meta)`` on the first argument's device; a failure is a :class:`KernelError`."""
    if not isinstance(kernel, KernelInterface):
        raise KernelError(f"got {type(kernel).__name__} {getattr(kernel, '__name__', '')!s}, not a "
                          "Triton kernel: keep the @triton.jit line above its def")
    device = args[0].device
    on_device = torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), on_device:
            warnings.simplefilter("ignore")
            kernel[grid](*args, **meta)
    except Exception as e:  # noqa: BLE001 - the learner's kernel may fail in any way
        raise KernelError(describe_error(e, kernel)) from None


def guarded(shape: tuple[int, ...], margin: int, device: torch.device,
            fill: float = math.nan) -> tuple[torch.Tensor, torch.Tensor]:
    """(a tensor of ``shape``, the ``margin`` elements after it in the same buffer), all ``fill``."""
    numel = math.prod(shape)
    buf = torch.full((numel + margin,), fill, device=device, dtype=torch.float32)
    return buf[:numel].view(shape), buf[numel:]


def margin_2d(rows: int, cols: int, block_rows: int, block_cols: int) -> int:
    """Elements past a row-major (rows, cols) tensor that unmasked block accesses can reach."""
    padded_rows = triton.cdiv(rows, block_rows) * block_rows
    padded_cols = triton.cdiv(cols, block_cols) * block_cols
    return (padded_rows - rows + 1) * max(cols, padded_cols) + padded_cols


def _draw(problem: Problem, sizes: Sizes, device: torch.device) -> tuple[torch.nn.Module, torch.Tensor]:
    """The probe's model and input, the same in the worker and here."""
    return (problem.make_model(sizes, seed=PROBE_SEED, device=device),
            problem.get_inputs(sizes, seed=PROBE_SEED, device=device)[0])


def probe_job(*, build: Callable, report: Callable[[str], None], problem_key: str, device: str,
              sizes: Sizes, **_: Any) -> dict:
    """The probe, in its worker: one call of ``build(model)`` (the learner's kernel launched by its exercise):
    its output and how many elements it stored past the output's end, or its one-line error."""
    report(f"the probe's call at {dims(sizes)}")
    model, x = _draw(get_problem(problem_key), sizes, torch.device(device))
    try:
        with torch.no_grad():
            run = build(model)(x)
            if x.is_cuda:
                torch.cuda.synchronize(x.device)
    except KernelError as e:
        return dict(out=None, outside=0, error=str(e))
    return dict(out=pack(run.out), outside=int((~torch.isnan(run.margin)).sum()), error="")


def _same(out: torch.Tensor, other: torch.Tensor) -> bool:
    """``out`` equals ``other`` to MATCH_REL, infinities and NaNs in the same places."""
    if out.shape != other.shape:
        return False
    out, other = out.double(), other.double().to(out.device)
    if not all(torch.equal(f(out), f(other)) for f in (torch.isnan, torch.isposinf, torch.isneginf)):
        return False
    fin = torch.isfinite(other)
    return not fin.any() or rel_error(out[fin], other[fin]) <= MATCH_REL


def _final(ex: "TritonExercise", kernel: Any, model: torch.nn.Module) -> Callable[..., torch.Tensor]:
    """What the harness measures: the problem's output of each call."""
    call = ex.launcher(kernel, model)
    return lambda x: call(x).final


class TritonExercise(Exercise):
    """A Triton kernel to complete. A module adds ``launcher(kernel, model) -> call(x) -> Run``, ``parts(model,
    x)`` (float64 pieces) and ``expected(parts)``, its ``mistakes`` and ``hints`` (beside :data:`HINTS`)."""

    output = "y"                     # the kernel's output, as the lines name it
    n_block = "BLOCK_N"              # a tile kernel's block of W's rows
    w_fill = 0.0                     # what an unmasked load past W's end reads (zeros: harmless, not a fault)
    hints: dict[str, str] = {}
    cpu_sizes: dict[str, int] = {}
    gpu_blocks: dict[str, int] = {}
    cpu_blocks: dict[str, int] = {}
    mistakes: tuple[Mistake, ...] = ()

    def blocks(self, device: torch.device) -> dict[str, int]:
        return self.gpu_blocks if device.type == "cuda" else self.cpu_blocks

    def hint(self, key: str) -> str:
        return self.hints.get(key) or HINTS[key]

    def about(self) -> str:
        return checked_at(self.problem, self.cpu_sizes, "in Triton's CPU interpreter")

    def tile_launcher(self, kernel: Any, w: torch.Tensor, b: torch.Tensor, *numbers: float,
                      finish: Callable[[torch.Tensor], torch.Tensor] = lambda y: y) -> Callable[..., Run]:
        """The tile kernels' launch: (x, W, b, y, M, N, K, the row strides of x, W and y, *numbers) on a grid
        of (BLOCK_M or 1, :attr:`n_block`) blocks of y; ``finish(y)`` is the problem's output."""
        (n, k), bl = w.shape, self.blocks(w.device)
        bm, bn, bk = bl.get("BLOCK_M", 1), bl[self.n_block], bl["BLOCK_K"]
        # One-off copy with a margin that unmasked tile loads reach, with the strides either way.
        reach = max(margin_2d(n, k, bn, bk), margin_2d(k, n, bk, bn))
        w = guarded((n, k), reach, w.device, fill=self.w_fill)[0].copy_(w)

        def call(x: torch.Tensor) -> Run:
            x = x.contiguous()
            m = x.shape[0]
            y, outside = guarded((m, n), margin_2d(m, n, bm, bn), x.device)
            launch(kernel, (triton.cdiv(m, bm), triton.cdiv(n, bn)), x, w, b, y, m, n, k, x.stride(0),
                   w.stride(0), y.stride(0), *numbers, **bl)
            return Run(y, finish(y), outside)
        return call

    def judge(self, problem: Problem, kernel: Any, *, device: torch.device, sizes: Sizes | None = None,
              time_it: bool = True, **budget: Any) -> Verdict:
        gpu = device.type == "cuda"
        sizes = problem.sizes(sizes or (problem.defaults if gpu else self.cpu_sizes))
        p = plan(problem, functools.partial(_final, self, kernel), sizes, device=device,
                 name=f"exercise_{self.name}", precision="fp32", triton=True, time_it=time_it,
                 **{**(GPU_CHECK if gpu else CPU_CHECK), **budget})
        if p.refusal:   # a Triton kernel on a CPU outside Triton's interpreter, over the CPU budget
            raise ValueError(p.refusal)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            m = measure(p)
            probe = None
            if not {RAISED, CRASHED, HUNG} & set(m.check.fault_classes):
                probe = self.probe(kernel, nearby_odd(problem, sizes), device,
                                   want_parts=not m.ok or m.tier != "fp32-faithful")
        return Verdict(self.line(m, probe, sizes), m)

    def probe(self, kernel: Any, sizes: Sizes, device: torch.device, *, want_parts: bool) -> Probe:
        try:
            got = run_job(probe_job, self.problem, functools.partial(self.launcher, kernel), device,
                          sizes=dict(sizes))
        except WorkerDied:
            return Probe()
        parts = self.parts(*_draw(self.problem, sizes, device)) if want_parts and not got["error"] else None
        return Probe(unpack(got["out"], device), got["outside"], parts)

    def matched(self, p: Probe | None) -> Mistake | None:
        """The first known mistake whose output the probe's equals (and the right one does not)."""
        if p is None or p.out is None or p.parts is None or _same(p.out, right := self.expected(p.parts)):
            return None
        return next((mk for mk in self.mistakes if (wrong := mk.output(p.parts)) is not None
                     and not _same(wrong, right) and _same(p.out, wrong)), None)

    def line(self, m: Any, p: Probe | None, sizes: Sizes) -> str:
        out, odd = self.output, nearby_odd(m.problem, sizes)
        there = f"at {dims(odd)}, the nearby odd shape checked after your {dims(sizes)}"
        if p is not None and p.outside:
            were = "1 element past its end was" if p.outside == 1 else f"{p.outside} elements past its end were"
            return f"✗ stored outside {out}: {were} written {there}. Hint: {self.hint('outside')}"
        first, rel, eager = next(iter(m.check.fault_classes), ""), m.check.rel_error, m.check.eager_rel_error
        if first == RAISED:
            said = m.failure.partition("KernelError: ")[2] or m.failure.partition(" raised ")[2] or m.failure
            return f"✗ your kernel raised an error: {said}. Hint: {self.hint('raised')}"
        if m.ok and m.tier == "fp32-faithful":
            where = ("in Triton's CPU interpreter (a check of the logic; time it on a GPU)" if m.interpreter
                     else f"on {torch.cuda.get_device_name(m.device)}")
            timing = f", {m.timing.median_ms:.3g} ms per call {where}" if m.timing else f" {where}"
            return (f"✓ right (fp32-faithful){timing}; rel. error {rel:.1e} (eager fp32 {eager:.1e}) "
                    f"at {dims(sizes)} and {dims(odd)}")
        mistake = self.matched(p)
        if m.ok or first == WRONG:   # numbers fp32 arithmetic cannot explain, or only less accurate
            numbers = f"rel. error {rel:.1e} against float64, eager fp32 {eager:.1e}, at {dims(sizes)}"
            if mistake is not None:
                return f"✗ wrong numbers ({numbers}): {mistake.seen}. Hint: {mistake.hint}"
            if m.ok and m.check.allclose:
                return (f"✗ close but not fp32-faithful ({numbers}; KernelBench's 1e-4 would pass). "
                        f"Hint: {self.hint('precision')}")
            return f"✗ wrong numbers ({numbers}). Hint: {self.hint('wrong')}"
        if mistake is not None:   # what the learner did, not the name of the guard that saw it
            return f"✗ wrong output {there}: {mistake.seen}. Hint: {mistake.hint}"
        if first == UNWRITTEN:
            bad = ~torch.isfinite(p.out) if p is not None and p.out is not None else torch.zeros(0, dtype=bool)
            n, total = int(bad.sum()), bad.numel()
            if not n:   # seen at the learner's sizes only: the check's own words
                return f"✗ {first_line(m.failure)} at {dims(sizes)}. Hint: {self.hint('some_unwritten')}"
            if n == total:
                return (f"✗ unwritten output: none of the {total} elements of {out} was stored (all NaN) "
                        f"{there}. Hint: {self.hint('nothing_stored')}")
            first_bad = ", ".join(str(int(i)) for i in bad.nonzero()[0])
            return (f"✗ unwritten output: {n} of {total} elements of {out} are NaN/Inf {there}, the first "
                    f"at {out}[{first_bad}]. Hint: {self.hint('some_unwritten')}")
        if first == SPECIALISED:
            return (f"✗ shape specialisation: right at {dims(sizes)} but not at the nearby odd shape "
                    f"{dims(odd)}. Hint: {self.hint('specialised')}")
        if first in (MUTATION, ALIASING):
            return f"✗ {first_line(m.failure)}. Hint: store only into {out}_ptr: the other tensors are read-only"
        if first == REUSE:
            return ("✗ the output does not follow x: a second, different input got the first one's "
                    f"answer. Hint: {self.hint('reuse')}")
        return f"✗ {first_line(m.failure)}. Hint: {self.hint('raised')}"   # a crash, a hang, a refusal


class P45Exercise(TritonExercise):
    """A kernel of p45 (notebook 03)."""

    problem_key, notebook = "p45", "03"
    cpu_sizes = dict(batch_size=17, input_size=33, hidden_size=65, output_size=19)


# -- problem 12's pieces in float64: the right output and the slips of a tile kernel ----------

def p12_epilogue64(p: dict, acc: torch.Tensor) -> torch.Tensor:
    """LeakyReLU((acc + b) * multiplier) in float64."""
    v = (acc + p["b"]) * p["c"]
    return torch.where(v > 0, v, v * p["s"])


class P12Exercise(TritonExercise):
    """A kernel of p12 (notebook 01); its parts: x, W, b, the multiplier, the slope, acc = x @ W.T, BLOCK_K."""

    problem_key, notebook, cpu_sizes = "p12", "01", dict(batch_size=17, in_features=33, out_features=65)

    def launcher(self, kernel: Any, model: torch.nn.Module) -> Callable[[torch.Tensor], Run]:
        return self.tile_launcher(kernel, *p12_weights(model))

    def parts(self, model: torch.nn.Module, x: torch.Tensor) -> dict:
        w, b, c, s = p12_weights(model)
        x, w = x.double(), w.double()
        return dict(x=x, w=w, b=b.double(), c=c, s=s, acc=x @ w.t(), bk=self.blocks(x.device).get("BLOCK_K", 0))

    def expected(self, p: dict) -> torch.Tensor:
        return p12_epilogue64(p, p["acc"])


def p12_last_chunk(p: dict) -> torch.Tensor | None:
    """Each K chunk's product replaced the accumulator: only the last counts (None with one chunk)."""
    last = (p["x"].shape[1] - 1) // p["bk"] * p["bk"]
    return p12_epilogue64(p, p["x"][:, last:] @ p["w"][:, last:].t()) if last else None


def p12_zero_acc(p: dict) -> torch.Tensor:
    """Nothing was added to the accumulator: the epilogue of zeros."""
    return p12_epilogue64(p, torch.zeros_like(p["acc"]))
