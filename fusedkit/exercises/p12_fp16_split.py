"""Exercise p12_fp16_split: the fp16x3 split with its power-of-two row scale, in PyTorch.

The learner writes ``split(t) -> (hi, lo, scale)``, what ``kernels/common/fp16x3_split.py``
does in Triton for p12's fp16x3 steps::

    scale = 2**(15 - e) per row, where the row's max |t| is m * 2**e, m in [0.5, 1)
            (so max|t| * scale lies in [2**14, 2**15): far from fp16's 65504, clear of its
            subnormals; a power of two only moves the exponent, so t * scale is exact)
    hi = fp16(t * scale)                      (round to nearest: 11 significant bits)
    lo = fp16((t * scale - hi) * 2048)        (the next 11 bits; the residual is exact in fp32)
    so t * scale = hi + lo / 2048 to about 2**-22 relative.

The check builds p12's linear from the learner's split, as step ``triton_fp16x3`` computes
it: W split once per build, x on every call, then ``(xh @ Wh.T + (xh @ Wl.T + xl @ Wh.T) /
2048) / (scale_x * scale_w.T)`` and the epilogue. The three products run in fp32 (TF32 off):
an fp16 x fp16 product has 22 significant bits, so each is exact in fp32 and only the fp32
sums round, as on fp16 tensor cores with fp32 accumulation. That linear goes through
:func:`fusedkit.measure.measure` as a p12 builder on KernelBench's inputs, so its verdict is
its tier against float64 (fp32-faithful when the split is right).

KernelBench's values all lie well inside fp16's range (x in [0, 1), W within 1/sqrt(K)), so
a split with no row scale, or one scale for the whole tensor, passes there; it fails on rows
of large or small magnitude, which p12's output cannot show honestly (scaled rows make
KernelBench's allclose fail for any method, and a tiny row of x only moves y by less than
its bias). So the check then splits a probe matrix row by row (:func:`probe_matrix`: rows of
max about 2**20 down to 2**-20, one whose max sits just below a power of two, and a row of
zeros) and names the fault it shows; a fault there is a ``✗`` whatever the linear's tier.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from fusedkit.check import MUTATION, RAISED, REUSE, SPECIALISED, UNWRITTEN, WRONG, nearby_odd
from fusedkit.exercises._common import (ExerciseMeasurement, checked_sizes, dims, own_problem,
                                        print_solution, skeleton_of)
from fusedkit.measure import Measurement, measure
from fusedkit.problems import Problem, Sizes
from fusedkit.problems import get as get_problem
from fusedkit.problems.baselines import tf32_matmul

LO_SCALE = 2048.0
"""2**11: lo holds the residual lifted by this much (the check reads hi + lo / 2048)."""
PROBE_EXPONENTS = (0, 20, -20, 9, -9)
"""The probe matrix's rows: standard normal values times 2**k, then a row whose max is just
below 2**NEAR_POWER (a scale aimed too high overflows fp16 there), then a row of zeros."""
NEAR_POWER = 5
PROBE_COLS = 48
PROBE_SEED = 2718
SPLIT_BOUND = 2.0**-20
"""Largest per-row error of hi + lo / 2048 against t * scale (float64, relative to the row's
largest |t * scale|) the probe accepts; a right split stays near 2**-23."""


def split(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """t (R, C) float32 as hi, lo (R, C) float16 and scale (R, 1) float32, a power of two per
    row, with t * scale = hi + lo / 2048 to about 2**-22 relative."""
    amax = t.abs().amax(dim=1, keepdim=True)          # (R, 1): each row's largest |value|
    # 1: scale = 2**(15 - e), e the exponent of amax (torch.frexp: amax = m * 2**e, m in
    #    [0.5, 1)), so amax * scale lies in [2**14, 2**15): torch.ldexp(torch.ones_like(amax), 15 - e)
    scale = torch.ldexp(torch.ones_like(amax), 15 - torch.frexp(amax).exponent)
    # 2: hi = t * scale rounded to fp16 (.half() rounds to nearest)
    hi = (t * scale).half()
    # 3: lo = the residual t * scale - hi, formed in fp32 (exact), times 2048, rounded to fp16
    lo = ((t * scale - hi.float()) * LO_SCALE).half()
    # The check multiplies the parts in fp32 and divides by scale: t * scale = hi + lo / 2048.
    return hi, lo, scale


solution = split
SKELETON = skeleton_of(solution, imports="import torch\n\n"
                                         "LO_SCALE = 2048.0   # lo holds the residual times 2**11")


class SplitError(Exception):
    """The learner's split raised, or returned something that is not (hi, lo, scale); one line."""


def call_split(fn: Callable, t: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``fn(t)`` checked to be (hi, lo, scale): hi and lo float16 of t's shape, scale float32
    with one value per row (or one for the whole tensor); scale comes back as (R, 1).
    Anything else raises :class:`SplitError` with one line naming what came back."""
    if not callable(fn):
        raise SplitError(f"got {type(fn).__name__}, not a function: define split(t) in the cell above")
    try:
        out = fn(t)
    except NameError as e:
        if e.name in ("scale", "hi", "lo"):
            raise SplitError(f"split({name}) raised NameError: {e}: TODO 1-3 are still to write") from None
        raise SplitError(f"split({name}) raised NameError: {e}") from None
    except Exception as e:  # noqa: BLE001 - the learner's function may fail in any way
        lines = str(e).strip().splitlines()
        said = lines[0][:160] if lines else ""
        raise SplitError(f"split({name}) raised {type(e).__name__}: {said}") from None
    if not isinstance(out, tuple) or len(out) != 3:
        got = f"a tuple of {len(out)}" if isinstance(out, tuple) else type(out).__name__
        raise SplitError(f"split({name}) returned {got}; expected (hi, lo, scale)")
    hi, lo, scale = out
    rows = t.shape[0]
    for part, value in (("hi", hi), ("lo", lo)):
        if not isinstance(value, torch.Tensor):
            raise SplitError(f"{part} is a {type(value).__name__}; expected a torch.float16 tensor")
        if value.dtype != torch.float16:
            why = (" (bf16 keeps 8 significant bits, fp16 11: the scheme needs fp16)"
                   if value.dtype == torch.bfloat16 else ": round it with .half()")
            raise SplitError(f"{part} is {value.dtype}, not torch.float16{why}")
        if tuple(value.shape) != tuple(t.shape):
            raise SplitError(f"{part} has shape {tuple(value.shape)}; expected t's {tuple(t.shape)}")
    if not isinstance(scale, torch.Tensor) or not scale.is_floating_point():
        raise SplitError(f"scale is a {type(scale).__name__}; expected a float32 tensor, one value per row")
    if scale.numel() not in (1, rows):
        raise SplitError(f"scale has shape {tuple(scale.shape)}; expected ({rows}, 1), one value per row")
    return hi, lo, scale.float().reshape(-1, 1).expand(rows, 1)


def fp16x3_builder(fn: Callable) -> Callable[[torch.nn.Module], Callable[..., torch.Tensor]]:
    """``build(model) -> fn(x)``: p12's linear from the split ``fn``: W split once per build, x
    on every call, three products in fp32 (exact for fp16 operands), both scales undone, the
    epilogue; what :func:`check` hands to :func:`fusedkit.measure.measure`."""
    def build(model: torch.nn.Module) -> Callable[..., torch.Tensor]:
        w = model.gemm.weight.detach()
        b = model.gemm.bias.detach()
        c, slope = float(model.multiplier), float(model.leaky_relu.negative_slope)
        wh, wl, ws = (p.float() for p in call_split(fn, w, "W"))   # fp16 values, held in fp32

        def linear(x: torch.Tensor) -> torch.Tensor:
            xh, xl, xs = (p.float() for p in call_split(fn, x, "x"))
            with tf32_matmul(False):
                acc = xh @ wh.T + (xh @ wl.T + xl @ wh.T) / LO_SCALE
            v = (acc / (xs * ws.T) + b) * c
            return torch.where(v > 0, v, v * slope)
        return linear
    build.__name__ = "exercise_p12_fp16_split"
    return build


# -- the probe: the split itself, row by row ------------------------------------------------

def probe_matrix() -> torch.Tensor:
    """The probe: rows of standard normal values times 2**k for k in :data:`PROBE_EXPONENTS`,
    a row whose largest |value| is (1 - 2**-12) * 2**NEAR_POWER, and a row of zeros;
    (len + 2, PROBE_COLS) float32, the same every time."""
    g = torch.Generator().manual_seed(PROBE_SEED)
    rows = [torch.randn(PROBE_COLS, generator=g) * 2.0**k for k in PROBE_EXPONENTS]
    near = torch.randn(PROBE_COLS, generator=g)
    near = near / near.abs().max() * (1 - 2.0**-12) * 2.0**NEAR_POWER
    return torch.stack(rows + [near, torch.zeros(PROBE_COLS)])


@dataclass
class Finding:
    """What the probe showed: what was seen and the hint (both "" when the split is right);
    for a right split, the worst row's error of hi + lo / 2048 against t * scale and whether
    every scale is a power of two."""

    seen: str = ""
    hint: str = ""
    worst: float = math.nan
    exact: bool = True
    unusable: bool = False   # split(t) raised or returned no (hi, lo, scale): nothing to measure


def _pow2(v: float) -> str:
    """2**k for a power of two, else the number."""
    if v > 0 and math.isfinite(v):
        k = math.log2(v)
        if k == round(k):
            return f"2^{int(k)}"
    return f"{v:.3g}"


def _row_errors(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """max |recon - target| / max |target| per row (float64); 0 where both are 0."""
    top = target.abs().amax(dim=1)
    err = (recon - target).abs().amax(dim=1)
    return torch.where(top > 0, err / torch.where(top > 0, top, 1.0), err)


def _power_of_two(r: torch.Tensor) -> torch.Tensor:
    """Per element: r is a (positive) power of two."""
    m, _ = torch.frexp(r)
    return (r > 0) & (m == 0.5)


def diagnose(fn: Callable) -> Finding:
    """Split :func:`probe_matrix` with ``fn`` and name the first fault it shows (``seen`` is ""
    when there is none; ``worst`` is then the worst row's error)."""
    t = probe_matrix()
    before = t.clone()
    try:
        hi, lo, scale = call_split(fn, t, "t")
    except SplitError as e:
        todo = "TODO 1-3" in str(e)
        return Finding(str(e), "write scale (TODO 1), then hi (TODO 2), then lo (TODO 3)" if todo else
                       "split(t) must return (hi, lo, scale): hi and lo torch.float16 of t's shape, "
                       "scale float32 of shape (R, 1)", unusable=True)
    if not torch.equal(t, before):
        return Finding("split changed its input t in place",
                       "compute t * scale into a new tensor (t * scale, not t.mul_(scale) or t *= scale)")
    t64, h, lo64, s = t.double(), hi.double(), lo.double(), scale.double()
    amax = t64.abs().amax(dim=1)
    zero_row = t.shape[0] - 1

    def row(r: int) -> str:
        if r == zero_row:
            return "the row of zeros"
        return f"the probe's row of max |t| {amax[r]:.4g}"

    bad_scale = ~torch.isfinite(s[:, 0]) | (s[:, 0] <= 0)
    if bad_scale.any():
        r = int(bad_scale.nonzero()[0])
        if r == zero_row:
            return Finding(f"a row of zeros gets scale {s[r, 0].item():.3g}: amax = 0 there",
                           "torch.frexp(amax) gives exponent 0 for 0 (so scale 2^15, and hi = lo = 0); "
                           "log2(0) is -inf")
        return Finding(f"scale is {s[r, 0].item():.3g} for {row(r)}", "scale must be a positive, finite "
                       "power of two per row: 2^(15 - e), e from torch.frexp(amax)")
    if not torch.all(s == 1.0) and torch.equal(lo64, ((t - hi.float()) * LO_SCALE).half().double()):
        return Finding("lo is (t - hi) * 2048: the residual of t, not of t * scale",
                       "hi holds t * scale: lo = ((t * scale - hi.float()) * 2048).half()")
    if torch.all(s[:, 0] == 1.0) and torch.isinf(h).any():
        r = int(torch.isinf(h).any(dim=1).nonzero()[0])
        return Finding(f"no row scale: hi overflows fp16 (largest 65504) in {row(r)}: its values "
                       "become inf", "scale each row by a power of two so its max lands in "
                       "[2^14, 2^15): scale = 2^(15 - e), e from torch.frexp(amax)")
    if torch.isinf(h).any() or torch.isinf(lo64).any():
        r = int((torch.isinf(h) | torch.isinf(lo64)).any(dim=1).nonzero()[0])
        top = (t64[r].abs().max() * s[r, 0]).item()
        return Finding(f"fp16 overflows in {row(r)}: max|t| * scale is {top:.6g}, and fp16 rounds "
                       "what lies past 65504 to inf",
                       "aim max|t| * scale at [2^14, 2^15): scale = 2^(15 - e) with amax = m * 2^e")
    target = t64 * s
    err = _row_errors(h + lo64 / LO_SCALE, target)
    worst = float(err.max())
    if worst <= SPLIT_BOUND:
        return Finding(worst=worst, exact=bool(_power_of_two(s[:, 0]).all()))
    r = int(err.argmax())
    live = t64 != 0
    # What the parts hold instead, each against the probe's own numbers.
    if torch.equal(lo64, torch.zeros_like(lo64)) and (target - h).abs().max() > 0:
        return Finding("lo is zero everywhere, so only hi's 11 bits are left: the residual was "
                       "formed in fp16 ((t * scale).half() - hi is 0)",
                       "form the residual in fp32, t * scale - hi.float(), then * 2048 and .half()")
    if _row_errors(h + lo64, target).max() <= SPLIT_BOUND:
        return Finding("hi + lo equals t * scale: lo is the residual itself, not 2048 times it",
                       "the check reads hi + lo / 2048: lo = ((t * scale - hi.float()) * 2048).half(); "
                       "the lift keeps the residual's 11 bits clear of fp16's subnormals")
    ratio = torch.where(live, (h + lo64 / LO_SCALE) / torch.where(live, t64, 1.0), torch.nan)
    per_row = torch.nanmedian(ratio, dim=1).values
    applied = torch.where(torch.isfinite(per_row) & _power_of_two(per_row), per_row, torch.nan)
    off = torch.isfinite(applied) & (applied != s[:, 0])
    if off.any():
        r = int(off.nonzero()[0])
        got, used = s[r, 0].item(), applied[r].item()
        if got * used == 1.0:
            return Finding(f"scale is inverted: hi + lo/2048 is t * {_pow2(used)} in {row(r)}, but scale "
                           f"is {_pow2(got)}", "return the factor you multiplied t by (the check divides "
                           "by scale to undo it), not its inverse")
        return Finding(f"the scale returned is not the one applied: in {row(r)} hi + lo/2048 is "
                       f"t * {_pow2(used)}, but scale is {_pow2(got)}",
                       "return the very scale that multiplied t (the check divides by it)")
    one_scale = bool(torch.all(s[:, 0] == s[0, 0]))
    if one_scale and r != zero_row and amax[r] < amax.max():
        ratio_rows = amax.max() / amax[r]
        return Finding(f"the scale is one for the whole tensor, not one per row: {row(r)}, "
                       f"{_pow2(2.0**round(math.log2(ratio_rows)))} times smaller than the largest, "
                       f"comes back with rel. error {err[r]:.1e}: scaled by the largest row's "
                       "scale, its values fall among fp16's subnormals, which keep few bits",
                       "amax = t.abs().amax(dim=1, keepdim=True): one scale per row")
    if torch.all(s[:, 0] == 1.0):
        return Finding(f"no row scale: {row(r)} comes back with rel. error {err[r]:.1e} "
                       "(it lies in fp16's subnormals, which keep few bits)",
                       "scale each row so its max lands in [2^14, 2^15): scale = 2^(15 - e), e from "
                       "torch.frexp(amax)")
    return Finding(f"hi + lo/2048 misses t * scale by rel. error {err[r]:.1e} in {row(r)}",
                   "hi = (t * scale).half(); lo = ((t * scale - hi.float()) * 2048).half()")


# -- the check and its line ------------------------------------------------------------------

@dataclass
class SplitExercise:
    """The split exercise: the learner's ``split`` checked as an fp16x3 linear of p12 through
    :func:`fusedkit.measure.measure`, then probed row by row."""

    name: str
    problem_key: str
    title: str
    kernel_name: str
    skeleton: str
    solution: Any
    notebook: str
    cpu_sizes: Sizes

    @property
    def problem(self) -> Problem:
        return get_problem(self.problem_key)

    def builder(self, fn: Callable) -> Callable[[torch.nn.Module], Callable[..., torch.Tensor]]:
        """The fp16x3 linear made from the split ``fn`` (:func:`fp16x3_builder`)."""
        return fp16x3_builder(fn)

    def about(self) -> str:
        """One line: the sizes of the check, and the probe."""
        return (checked_sizes(self.problem, self.cpu_sizes, cpu="on the CPU (torch)")[:-1]
                + f". Then split(t) is probed row by row on rows of max about 2^{max(PROBE_EXPONENTS)} "
                f"down to 2^{min(PROBE_EXPONENTS)}, one whose max sits just below 2^{NEAR_POWER}, "
                "and a row of zeros.")

    def show_solution(self) -> None:
        """Print the worked solution's source."""
        print_solution(self.name, self.solution)

    def check(self, problem: Problem | str, fn: Any, *, sizes: Sizes | None = None,
              device: str | torch.device | None = None, seeds: int | None = None,
              show: bool = True) -> ExerciseMeasurement:
        """Measure the fp16x3 linear built from ``fn`` on p12 (checked, not timed: the verdict
        is its tier), probe ``fn`` row by row, print one line. Returns the Measurement
        (``.message`` the line, ``.ok`` False on a ``✗``)."""
        problem = own_problem(self, problem)
        device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        gpu = device.type == "cuda"
        sizes = problem.sizes(sizes or (problem.defaults if gpu else self.cpu_sizes))
        with np.errstate(all="ignore"):
            m = measure(problem, fp16x3_builder(fn), sizes, device=device, name=f"exercise_{self.name}",
                        precision="fp32", time_it=False, seeds=seeds or (3 if gpu else 1))
            finding = diagnose(fn)
        graded = ExerciseMeasurement.graded(m, verdict(m, finding))
        if show:
            print(graded.message)
        return graded


def verdict(m: Measurement, finding: Finding) -> str:
    """The one line for the measurement ``m`` of the linear and the probe's ``finding``."""
    if finding.unusable:
        return f"✗ {finding.seen}. Hint: {finding.hint}"
    linear = _linear_phrase(m)
    if finding.seen:
        return f"✗ {finding.seen}; the fp16x3 linear built from it {linear}. Hint: {finding.hint}"
    if not m.ok or m.tier != "fp32-faithful":
        nan = "NaN/Inf" in linear
        hint = ("NaN/Inf from a split means fp16 overflowed: max|t| * scale must stay below 65504; "
                "aim it at [2^14, 2^15)" if nan else
                "hi = (t * scale).half(); lo = ((t * scale - hi.float()) * 2048).half(); split must "
                "not change t")
        return f"✗ the fp16x3 linear built from your split {linear}. Hint: {hint}"
    note = "" if finding.exact else (" (your scale is not a power of two: t * scale then rounds once "
                                     "more, and so does undoing it; a power of two makes both exact)")
    return (f"✓ right (fp32-faithful): the fp16x3 linear built from your split {linear}; split row "
            f"by row, the probe's rows (max 2^{min(PROBE_EXPONENTS)} to 2^{max(PROBE_EXPONENTS)}, and "
            f"zeros) come back within {finding.worst:.1e} of t * scale{note}")


def _linear_phrase(m: Measurement) -> str:
    """"is fp32-faithful, rel. error 2.1e-07 against float64 (eager fp32 3.4e-07) at 33x1024x65
    and 29x895x57", or what the check found instead, in the learner's words."""
    at = f"at {dims(m.sizes)} and {dims(nearby_odd(m.problem, m.sizes))}"
    if m.check.ok:
        return (f"is {m.tier}, rel. error {m.check.rel_error:.1e} against float64 (eager fp32 "
                f"{m.check.eager_rel_error:.1e}) {at}")
    failure = m.failure
    if failure.startswith(RAISED):
        return "could not be built: " + failure.split(" raised ", 1)[-1].removeprefix("SplitError: ")
    if failure.startswith(UNWRITTEN):
        count = re.search(r"(\d+ of \d+) elements", failure)
        how_many = count[1] if count else "some"
        return f"gives NaN/Inf where float64 is finite ({how_many} outputs) at {dims(m.sizes)}"
    if failure.startswith(WRONG):
        return (f"has rel. error {m.check.rel_error:.1e} against float64 at {dims(m.sizes)}, more "
                f"than fp32 arithmetic can explain (eager fp32 {m.check.eager_rel_error:.1e})")
    if failure.startswith(MUTATION):
        return "changed its weight or input (split wrote into t)"
    if failure.startswith(REUSE):
        return "gives answers that do not follow x (two inputs came out nearer each other than their own)"
    if failure.startswith(SPECIALISED):
        odd = dims(nearby_odd(m.problem, m.sizes))
        if m.check.rel_error > 1e-4:
            return f"has rel. error {m.check.rel_error:.1e} at {dims(m.sizes)}, and more at {odd}"
        return f"is right at {dims(m.sizes)} but not at {odd}"
    return failure.split(";")[0]


EXERCISE = SplitExercise(
    name="p12_fp16_split", problem_key="p12",
    title="the fp16x3 split: fp16 hi and lo with a power-of-two scale per row",
    kernel_name="split", skeleton=SKELETON, solution=solution, notebook="05",
    cpu_sizes=dict(batch_size=33, in_features=1024, out_features=65),
)


def builder(fn: Callable):
    """``build(model) -> fn`` of the fp16x3 linear made from the split ``fn``."""
    return fp16x3_builder(fn)


__all__ = ["EXERCISE", "LO_SCALE", "NEAR_POWER", "PROBE_EXPONENTS", "SPLIT_BOUND", "Finding",
           "SplitError", "SplitExercise", "builder", "call_split", "diagnose", "fp16x3_builder",
           "probe_matrix", "solution", "split", "verdict"]
