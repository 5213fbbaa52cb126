"""Every verdict, reached in the caller's process, where the kernel never ran: model and inputs
regenerated from the seeds sent, the float64 reference and eager fp32 from copies the kernel never
held, and one error budget per tier for checked and timed calls alike.

Error is ``rel = ||out - ref64|| / ||ref64||``. ``fp32-faithful``: rel at most 2x eager fp32's on
the same inputs (floor 2 * 2**-24) and ``allclose(out, eager, 1e-4, 1e-4)``; ``kb-pass``: the
allclose alone (KernelBench's rule); ``fast``: within what the declared arithmetic explains on
these inputs (:func:`fusedkit.precision.error_bound`). Beyond that: a *wrong result*."""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Sequence

import torch

from fusedkit.harness.terms import (CALLS_PER_BUILD, REUSE, SECOND_INPUT, TIMED_DIFFER, UNWRITTEN,
                                    WRONG, refill)
from fusedkit.interrupts import checkpoint
from fusedkit.precision import EPS32, TIERS, error_bound, grouped_error_bounds
from fusedkit.problems import Problem, Sizes
from fusedkit.problems.baselines import tf32_matmul

ATOL = RTOL = 1e-4
JUDGED_AT_ONCE = 256
"""Timed calls whose rows are judged in one float64 forward."""


def short(v: float, digits: int = 2) -> str:
    """A rel. error for a failure line: ``0.57``, ``1.6``, ``3.1e-4``."""
    text = f"{v:.{digits}g}" if 0.01 <= abs(v) < 100 else f"{v:.{digits - 1}e}"
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", text)


def wrong_line(rel: float, bound: float, precision: str, where: str = "here") -> str:
    """The *wrong result* failure: an error the declared arithmetic cannot explain."""
    return (f"{WRONG}: rel. error {short(rel)}, more than {precision} arithmetic can explain "
            f"(at most ~{short(bound, 1)} {where})")


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| computed in float64."""
    ref = ref.double()
    denom = torch.linalg.vector_norm(ref).item()
    diff = torch.linalg.vector_norm(out.double() - ref).item()
    return diff / denom if denom else diff


def reference64(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The model's output computed in float64 on the inputs' device."""
    with torch.no_grad():
        return copy.deepcopy(model).double()(*[t.double() for t in inputs])


def eager32(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The model's output in fp32 with TF32 off: KernelBench's reference."""
    with torch.no_grad(), tf32_matmul(False):
        return model(*inputs)


def faithful_bound(eager_rel: float) -> float:
    """The largest rel. error fp32-faithful allows beside eager's ``eager_rel``."""
    return 2.0 * max(eager_rel, 2.0 * EPS32)


def classify(rel: float, eager_rel: float, allclose: bool) -> str:
    """The tier of errors no call exceeded (see the module's docstring)."""
    if allclose and math.isfinite(rel) and rel <= faithful_bound(eager_rel):
        return "fp32-faithful"
    return "kb-pass" if allclose else "fast"


@dataclass
class Compared:
    """One output against its own reference."""

    rel: float
    max_abs: float
    eager_rel: float
    allclose: bool
    bound: float          # the largest rel. error the declared precision explains on this input


def judge_build(problem: Problem, sizes: Sizes, seed: int, device: torch.device, precision: str,
                outs: list[torch.Tensor]) -> tuple[list[str], list[Compared]]:
    """The verdict on one build's checked outputs (call k's input drawn under ``seed + k *
    SECOND_INPUT``): the failures, and the outputs compared (those so far after a wrong one)."""
    model = problem.make_model(sizes, seed=seed, device=device)
    inputs = [problem.get_inputs(sizes, seed=seed + k * SECOND_INPUT, device=device)
              for k in range(CALLS_PER_BUILD)]
    checkpoint()
    refs, bounds = zip(*[error_bound(model, x, precision, problem.error_model) for x in inputs])
    compared = []
    for k, out in enumerate(outs):
        bad = (~torch.isfinite(out) & torch.isfinite(refs[k])).sum().item()
        if bad:
            return [f"{UNWRITTEN}: call {k + 1}: {bad} of {out.numel()} elements are NaN/Inf "
                    "(unwritten or overflowed) where the reference is finite"], []
        eager = eager32(model, inputs[k])
        compared.append(Compared(rel_error(out, refs[k]), (out.double() - refs[k]).abs().max().item(),
                                 rel_error(eager, refs[k]),
                                 torch.allclose(out, eager, atol=ATOL, rtol=RTOL), float(bounds[k])))
    for k, out in enumerate(outs):
        c = compared[k]
        if c.allclose or c.rel <= c.bound:
            continue
        # Another input's right answer is a cached one; two answers right for neither are wrong.
        for j in range(len(outs)):
            if j != k and rel_error(out, refs[j]) <= bounds[j]:
                return [f"{REUSE}: call {k + 1} got an answer nearer call {j + 1}'s input than its "
                        "own; a kernel must compute from the input it is given"], []
        return [wrong_line(c.rel, c.bound, precision)], compared[:k + 1]
    return [], compared


@dataclass
class TimedCall:
    """What the caller keeps of one timed call: its input's seed, the rows it chose once the
    worker had committed to the output, and those rows as sent."""

    seed: int
    rows: list[int]
    got: torch.Tensor


def judge_timed(problem: Problem, sizes: Sizes, seed: int, device: torch.device, precision: str,
                eager_rel: float, calls: list[TimedCall]) -> tuple[str, float, str]:
    """The tier every timed call's rows meet, their worst rel. error, and "" or the verdict on a
    call whose rows are wrong (beyond both KernelBench's allclose and what ``precision``
    explains). Each call's input is replayed from its seed; references and eager on the chosen
    rows (as many for every call). Eager's error on a few rows is a noisy figure, so a call's eager
    error is at least ``eager_rel``, eager's worst on the checked calls' whole outputs."""
    model = problem.make_model(sizes, seed=seed, device=device)
    model64 = copy.deepcopy(model).double()
    inputs = problem.get_inputs(sizes, seed=seed, device=device)
    worst, worst_rel = TIERS[1], 0.0
    for start in range(0, len(calls), JUDGED_AT_ONCE):
        checkpoint()
        chunk = calls[start:start + JUDGED_AT_ONCE]
        picked = []
        for c in chunk:
            refill(problem, inputs, c.seed)
            index = torch.tensor(c.rows, device=device)
            picked.append([t.index_select(0, index) for t in inputs])
        stacked = [torch.cat([p[j] for p in picked]) for j in range(len(inputs))]
        refs, bounds = grouped_error_bounds(model64, stacked, len(chunk[0].rows), precision,
                                            problem.error_model)
        eager = eager32(model, stacked)
        at = 0
        for i, c in enumerate(chunk):
            n = len(c.rows)
            got, ref, ea = c.got.to(device), refs[at:at + n], eager[at:at + n]
            at += n
            rel = rel_error(got, ref) if torch.isfinite(got).all() else math.inf
            close = torch.allclose(got, ea, atol=ATOL, rtol=RTOL)
            if not (close or rel <= float(bounds[i])):
                return worst, rel, (f"{TIMED_DIFFER}: timed call {start + i + 1} of {len(calls)}: "
                                    + wrong_line(rel, float(bounds[i]), precision,
                                                 f"on {n} rows chosen after it committed to its output"))
            tier = classify(rel, max(rel_error(ea, ref), eager_rel), close)
            worst, worst_rel = max(worst, tier, key=TIERS.index), max(worst_rel, rel)
    return worst, worst_rel, ""
