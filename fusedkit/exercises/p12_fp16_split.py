"""Exercise p12_fp16_split: the fp16x3 split with its power-of-two row scale, in PyTorch, as
``kernels/common/fp16x3_split.py`` does it in Triton for p12's fp16x3 steps::

    scale = 2**(15 - e) per row, e the exponent of the row's max |t| (torch.frexp): max|t| * scale
            lies in [2**14, 2**15), far from fp16's 65504 and its subnormals, and is exact
    hi = fp16(t * scale);  lo = fp16((t * scale - hi) * 2048);  t * scale = hi + lo / 2048 to ~2**-22

The check measures p12's linear built from it as step ``triton_fp16x3`` computes it (three fp32 products,
exact for fp16 operands), on KernelBench's inputs, well inside fp16's range; so it then splits a probe matrix
row by row (:func:`probe_matrix`) and names the fault it shows.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch

from fusedkit.exercises._protocol import Exercise, Verdict, checked_at, dims, first_line
from fusedkit.harness import measure
from fusedkit.harness.terms import RAISED, UNWRITTEN
from fusedkit.problems import Problem, Sizes
from fusedkit.problems.base import nearby_odd
from fusedkit.problems.baselines import tf32_matmul
from fusedkit.problems.p12_gemm_multiply_leakyrelu import WEIGHTS as p12_weights

LO_SCALE = 2048.0                         # lo holds the residual lifted by 2**11: the check reads hi + lo / 2048
PROBE_EXPONENTS = (0, 20, -20, 9, -9)     # the probe's rows: randn * 2**k, one just below 2**NEAR_POWER, zeros
NEAR_POWER, PROBE_COLS, PROBE_SEED = 5, 48, 2718
SPLIT_BOUND = 2.0**-20
"""The largest per-row error of hi + lo / 2048 against t * scale the probe accepts (a right one: ~2**-23)."""


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


class SplitError(Exception):
    """The learner's split raised, or returned something that is not (hi, lo, scale); one line."""


def call_split(fn: Callable, t: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``fn(t)`` as (hi, lo, scale (R, 1) float32); anything else is a one-line :class:`SplitError`."""
    if not callable(fn):
        raise SplitError(f"got {type(fn).__name__}, not a function: define split(t) in the cell above")
    try:
        out = fn(t)
    except Exception as e:  # noqa: BLE001 - the learner's function may fail in any way
        todo = ": TODO 1-3 are still to write" if isinstance(e, NameError) and e.name in ("scale", "hi", "lo") else ""
        said = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        raise SplitError(f"split({name}) raised {type(e).__name__}: {said}{todo}") from None
    if not isinstance(out, tuple) or len(out) != 3:
        got = f"a tuple of {len(out)}" if isinstance(out, tuple) else type(out).__name__
        raise SplitError(f"split({name}) returned {got}; expected (hi, lo, scale)")
    for part, value in zip(("hi", "lo"), out):
        if not isinstance(value, torch.Tensor):
            raise SplitError(f"{part} is a {type(value).__name__}; expected a torch.float16 tensor")
        if value.dtype != torch.float16:
            why = (" (bf16 keeps 8 significant bits, fp16 11: the scheme needs fp16)"
                   if value.dtype == torch.bfloat16 else ": round it with .half()")
            raise SplitError(f"{part} is {value.dtype}, not torch.float16{why}")
        if value.shape != t.shape:
            raise SplitError(f"{part} has shape {tuple(value.shape)}; expected t's {tuple(t.shape)}")
    scale, rows = out[2], t.shape[0]
    if not isinstance(scale, torch.Tensor) or not scale.is_floating_point():
        raise SplitError(f"scale is a {type(scale).__name__}; expected a float32 tensor, one value per row")
    if scale.numel() not in (1, rows):
        raise SplitError(f"scale has shape {tuple(scale.shape)}; expected ({rows}, 1), one value per row")
    return out[0], out[1], scale.float().reshape(-1, 1).expand(rows, 1)


def _linear(fn: Callable, model: torch.nn.Module) -> Callable[..., torch.Tensor]:
    """p12 from the split ``fn``: W split once, x each call, three fp32 products, the scales undone."""
    w, b, c, slope = p12_weights(model)
    wh, wl, ws = (p.float() for p in call_split(fn, w, "W"))   # fp16 values, held in fp32

    def linear(x: torch.Tensor) -> torch.Tensor:
        xh, xl, xs = (p.float() for p in call_split(fn, x, "x"))
        with tf32_matmul(False):
            acc = xh @ wh.T + (xh @ wl.T + xl @ wh.T) / LO_SCALE
        return torch.nn.functional.leaky_relu((acc / (xs * ws.T) + b) * c, slope)
    return linear


def probe_matrix() -> torch.Tensor:
    """randn rows times 2**k for k in PROBE_EXPONENTS, one of max (1 - 2**-12) * 2**NEAR_POWER, zeros."""
    g = torch.Generator().manual_seed(PROBE_SEED)
    rows = [torch.randn(PROBE_COLS, generator=g) * 2.0**k for k in PROBE_EXPONENTS]
    near = torch.randn(PROBE_COLS, generator=g)
    near = near / near.abs().max() * (1 - 2.0**-12) * 2.0**NEAR_POWER
    return torch.stack(rows + [near, torch.zeros(PROBE_COLS)])


def _pow2(v: float) -> str:
    k = math.log2(v) if v > 0 and math.isfinite(v) else 0.5
    return f"2^{int(k)}" if k == round(k) else f"{v:.3g}"


def _row_errors(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """max |recon - target| / max |target| per row; the error itself where the row is 0."""
    top, err = target.abs().amax(dim=1), (recon - target).abs().amax(dim=1)
    return torch.where(top > 0, err / torch.where(top > 0, top, 1.0), err)


def _power_of_two(r: torch.Tensor) -> torch.Tensor:
    return (r > 0) & (torch.frexp(r).mantissa == 0.5)


ROW_SCALE = "scale = 2^(15 - e), e from torch.frexp(amax)"


def diagnose(fn: Callable) -> tuple[str, str, float, bool]:
    """Split :func:`probe_matrix` with ``fn``: (what is wrong, the hint, the worst row's error,
    whether every scale is a power of two); "" for what is wrong when the split is right."""
    t = probe_matrix()
    before = t.clone()
    hi, lo, scale = call_split(fn, t, "t")
    if not torch.equal(t, before):
        return ("split changed its input t in place",
                "compute t * scale into a new tensor (t * scale, not t.mul_(scale) or t *= scale)", 0, True)
    t64, h, lo64, s = t.double(), hi.double(), lo.double(), scale.double()
    amax, zero_row = t64.abs().amax(dim=1), t.shape[0] - 1

    def row(r: int) -> str:
        return "the row of zeros" if r == zero_row else f"the probe's row of max |t| {amax[r]:.4g}"

    def fault(seen: str, hint: str) -> tuple[str, str, float, bool]:
        return seen, hint, math.nan, True

    bad = ~torch.isfinite(s[:, 0]) | (s[:, 0] <= 0)
    if bad.any():
        r = int(bad.nonzero()[0])
        if r == zero_row:
            return fault(f"a row of zeros gets scale {s[r, 0].item():.3g}: amax = 0 there",
                         "torch.frexp(amax) gives exponent 0 for 0 (so scale 2^15, and hi = lo = 0); "
                         "log2(0) is -inf")
        return fault(f"scale is {s[r, 0].item():.3g} for {row(r)}",
                     f"scale must be a positive, finite power of two per row: {ROW_SCALE}")
    if not torch.all(s == 1.0) and torch.equal(lo64, ((t - hi.float()) * LO_SCALE).half().double()):
        return fault("lo is (t - hi) * 2048: the residual of t, not of t * scale",
                     "hi holds t * scale: lo = ((t * scale - hi.float()) * 2048).half()")
    overflow = torch.isinf(h) | torch.isinf(lo64)
    if overflow.any():
        r = int(overflow.any(dim=1).nonzero()[0])
        if torch.all(s == 1.0):
            return fault(f"no row scale: hi overflows fp16 (largest 65504) in {row(r)}: its values "
                         "become inf", f"scale each row by a power of two so its max lands in "
                         f"[2^14, 2^15): {ROW_SCALE}")
        return fault(f"fp16 overflows in {row(r)}: max|t| * scale is {(amax[r] * s[r, 0]).item():.6g}, and "
                     "fp16 rounds what lies past 65504 to inf",
                     "aim max|t| * scale at [2^14, 2^15): scale = 2^(15 - e) with amax = m * 2^e")
    target = t64 * s
    err = _row_errors(h + lo64 / LO_SCALE, target)
    if err.max() <= SPLIT_BOUND:
        return "", "", float(err.max()), bool(_power_of_two(s[:, 0]).all())
    r = int(err.argmax())
    if not lo64.any() and (target - h).abs().max() > 0:
        return fault("lo is zero everywhere, so only hi's 11 bits are left: the residual was formed in "
                     "fp16 ((t * scale).half() - hi is 0)",
                     "form the residual in fp32, t * scale - hi.float(), then * 2048 and .half()")
    if _row_errors(h + lo64, target).max() <= SPLIT_BOUND:
        return fault("hi + lo equals t * scale: lo is the residual itself, not 2048 times it",
                     "the check reads hi + lo / 2048: lo = ((t * scale - hi.float()) * 2048).half(); "
                     "the lift keeps the residual's 11 bits clear of fp16's subnormals")
    live = t64 != 0   # the power of two each row was really scaled by, against the one returned
    ratio = torch.where(live, (h + lo64 / LO_SCALE) / torch.where(live, t64, 1.0), torch.nan)
    applied = torch.nanmedian(ratio, dim=1).values
    off = torch.isfinite(applied) & _power_of_two(applied) & (applied != s[:, 0])
    if off.any():
        r = int(off.nonzero()[0])
        got, used = s[r, 0].item(), applied[r].item()
        if got * used == 1.0:
            return fault(f"scale is inverted: hi + lo/2048 is t * {_pow2(used)} in {row(r)}, but scale is "
                         f"{_pow2(got)}", "return the factor you multiplied t by (the check divides by "
                         "scale to undo it), not its inverse")
        return fault(f"the scale returned is not the one applied: in {row(r)} hi + lo/2048 is "
                     f"t * {_pow2(used)}, but scale is {_pow2(got)}",
                     "return the very scale that multiplied t (the check divides by it)")
    if torch.all(s[:, 0] == s[0, 0]) and r != zero_row and amax[r] < amax.max():
        smaller = _pow2(2.0**round(math.log2(amax.max() / amax[r])))
        return fault(f"the scale is one for the whole tensor, not one per row: {row(r)}, {smaller} times "
                     f"smaller than the largest, comes back with rel. error {err[r]:.1e}: scaled by the "
                     "largest row's scale, its values fall among fp16's subnormals, which keep few bits",
                     "amax = t.abs().amax(dim=1, keepdim=True): one scale per row")
    if torch.all(s[:, 0] == 1.0):
        return fault(f"no row scale: {row(r)} comes back with rel. error {err[r]:.1e} (it lies in fp16's "
                     "subnormals, which keep few bits)",
                     f"scale each row so its max lands in [2^14, 2^15): {ROW_SCALE}")
    return fault(f"hi + lo/2048 misses t * scale by rel. error {err[r]:.1e} in {row(r)}",
                 "hi = (t * scale).half(); lo = ((t * scale - hi.float()) * 2048).half()")


def _linear_phrase(m: Any, sizes: Sizes) -> str:
    """How the linear built from the split fared, in the learner's words (no guard's name)."""
    if m.ok:
        return (f"is {m.tier}, rel. error {m.check.rel_error:.1e} against float64 (eager fp32 "
                f"{m.check.eager_rel_error:.1e}) at {dims(sizes)} and {dims(nearby_odd(m.problem, sizes))}")
    if m.check.fault_classes[:1] == [RAISED]:
        return "could not be built: " + m.failure.split(" raised ", 1)[-1].removeprefix("SplitError: ")
    return f"fails at {dims(sizes)}: " + first_line(m.failure).split(": ", 1)[-1]


class FP16Split(Exercise):
    name, problem_key, notebook, answer = "p12_fp16_split", "p12", "05", "split"
    solution = staticmethod(split)
    imports = "import torch\n\nLO_SCALE = 2048.0   # lo holds the residual times 2**11"
    options = frozenset({"sizes", "seeds"})
    cpu_sizes = dict(batch_size=33, in_features=1024, out_features=65)

    def about(self) -> str:
        return (checked_at(self.problem, self.cpu_sizes, "on the CPU (torch)")[:-1] + ". Then split(t) is "
                f"probed row by row on rows of max about 2^{max(PROBE_EXPONENTS)} down to "
                f"2^{min(PROBE_EXPONENTS)}, one whose max sits just below 2^{NEAR_POWER}, and a row of zeros.")

    def judge(self, problem: Problem, fn: Any, *, device: torch.device, sizes: Sizes | None = None,
              seeds: int | None = None) -> Verdict:
        gpu = device.type == "cuda"
        sizes = problem.sizes(sizes or (problem.defaults if gpu else self.cpu_sizes))
        try:
            seen, hint, worst, exact = diagnose(fn)
        except SplitError as e:   # nothing to measure: the same fault would only repeat there
            todo = "TODO 1-3" in str(e)
            return Verdict(f"✗ {e}. Hint: " + ("write scale (TODO 1), then hi (TODO 2), then lo (TODO 3)"
                           if todo else "split(t) must return (hi, lo, scale): hi and lo torch.float16 "
                           "of t's shape, scale float32 of shape (R, 1)"))
        with np.errstate(all="ignore"):
            m = measure(problem, lambda model: _linear(fn, model), sizes, device=device,
                        name=f"exercise_{self.name}", time_it=False, seeds=seeds or (3 if gpu else 1))
        linear = _linear_phrase(m, sizes)
        if seen:
            return Verdict(f"✗ {seen}; the fp16x3 linear built from it {linear}. Hint: {hint}", m)
        if not m.ok or m.tier != "fp32-faithful":
            hint = ("NaN/Inf from a split means fp16 overflowed: max|t| * scale must stay below 65504; "
                    "aim it at [2^14, 2^15)" if UNWRITTEN in m.check.fault_classes else
                    "hi = (t * scale).half(); lo = ((t * scale - hi.float()) * 2048).half(); split must "
                    "not change t")
            return Verdict(f"✗ the fp16x3 linear built from your split {linear}. Hint: {hint}", m)
        note = "" if exact else (" (your scale is not a power of two: t * scale then rounds once more, "
                                 "and so does undoing it; a power of two makes both exact)")
        return Verdict(f"✓ right (fp32-faithful): the fp16x3 linear built from your split {linear}; split "
                       f"row by row, the probe's rows (max 2^{min(PROBE_EXPONENTS)} to "
                       f"2^{max(PROBE_EXPONENTS)}, and zeros) come back within {worst:.1e} of t * scale{note}", m)


EXERCISE = FP16Split()
