"""Correctness before speed: every variant against a float64 reference, on fresh inputs.

Error is ``rel = ||out - ref64|| / ||ref64||`` (Frobenius norms). Precision tiers:

- ``fp32-faithful``: rel no worse than 2x eager fp32's on the same inputs (with a floor of
  2 * 2**-24, so an exact eager result does not demand the impossible), AND
  ``allclose(out, eager, atol=1e-4, rtol=1e-4)`` on every seed;
- ``kb-pass``: the allclose alone (KernelBench's fp32 rule);
- ``fast``: neither; the error is reported next to the speed.

Outputs are poisoned: before each run the allocator's next block of the output's size is
filled with NaN, so an element a kernel forgets to write shows up as NaN, never as a
stale correct-looking value.
"""

from __future__ import annotations

import copy
import math
import secrets
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from fusedkit.problems import Problem, Sizes, Variant, fmt_sizes
from fusedkit.problems.base import INTERPRETER_FLOP_BUDGET
from fusedkit.problems.baselines import tf32_matmul

ATOL = RTOL = 1e-4
TIERS = ("fp32-faithful", "kb-pass", "fast")
EPS32 = 2.0**-24


@dataclass
class CheckResult:
    """Outcome of checking one variant over several seeds (worst seed reported)."""

    problem: str
    variant: str
    sizes: Sizes
    seeds: list[int]
    rel_error: float = math.nan          # worst over seeds
    max_abs_error: float = math.nan
    eager_rel_error: float = math.nan    # eager fp32 on the same inputs (worst seed)
    allclose: bool = False               # vs eager fp32, every seed
    tier: str = ""
    failures: list[str] = field(default_factory=list)   # NaN, unwritten, wrong shape ...

    @property
    def ok(self) -> bool:
        """True when the output was complete and finite on every seed (any tier)."""
        return not self.failures

    def summary(self) -> str:
        if not self.ok:
            return f"{self.variant}: FAILED — " + "; ".join(self.failures)
        return (f"{self.variant}: {self.tier}, rel. error {self.rel_error:.2e} "
                f"(eager fp32 {self.eager_rel_error:.2e}), max abs {self.max_abs_error:.2e}, "
                f"allclose 1e-4 {'yes' if self.allclose else 'no'} on {len(self.seeds)} seeds")


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| computed in float64."""
    ref = ref.double()
    denom = torch.linalg.vector_norm(ref).item()
    diff = torch.linalg.vector_norm(out.double() - ref).item()
    return diff / denom if denom else diff


def classify(rel: float, eager_rel: float, allclose_all: bool) -> str:
    """The precision tier of a variant from its worst errors (see module docstring)."""
    if not math.isfinite(rel):
        return "fast"
    if allclose_all and rel <= 2.0 * max(eager_rel, 2.0 * EPS32):
        return "fp32-faithful"
    return "kb-pass" if allclose_all else "fast"


def poison_allocator(shape: Sequence[int], device: torch.device) -> None:
    """Leave a NaN-filled block of ``shape`` in the caching allocator for the next output.

    On CUDA the caching allocator hands the freed block to the next allocation of that
    size, so unwritten output elements read back as NaN. CPU memory is returned to the
    system, so there the check relies on the NaN/Inf and error tests alone.
    """
    if device.type == "cuda":
        block = torch.full(tuple(shape), float("nan"), device=device)
        del block


def reference64(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The model's output computed in float64 on the inputs' device."""
    with torch.no_grad():
        return copy.deepcopy(model).double()(*[t.double() for t in inputs])


def cpu_refusal(problem: Problem, variant: Variant, sizes: Sizes, device: torch.device) -> str:
    """Why ``variant`` cannot run at ``sizes`` on ``device`` ("" when it can)."""
    if device.type == "cuda":
        return ""
    if variant.needs_gpu:
        return "needs a CUDA GPU (its GPU results are in the records in data/)"
    if variant.triton and problem.flops(sizes) > INTERPRETER_FLOP_BUDGET:
        return (f"Triton's CPU interpreter is limited to {INTERPRETER_FLOP_BUDGET / 1e9:.1f} GFLOP "
                f"(these sizes need {problem.flops(sizes) / 1e9:.1f}); pick smaller sizes")
    return ""


def check_variant(problem: Problem, variant: Variant | str, sizes: Sizes, *,
                  device: str | torch.device = "cpu", seeds: int | Sequence[int] = 5,
                  build: Callable | None = None) -> CheckResult:
    """Check ``variant`` on ``seeds`` fresh draws of model weights and inputs.

    ``seeds`` is a count (fresh random seeds, recorded in the result) or explicit seeds.
    ``build`` overrides ``variant.build`` (to check a function that is not registered).
    """
    variant = problem.variant(variant) if isinstance(variant, str) else variant
    sizes = problem.sizes(sizes)
    device = torch.device(device)
    refusal = cpu_refusal(problem, variant, sizes, device)
    if refusal:
        raise ValueError(f"variant={variant.slug!r} on {device}: {refusal}")
    problem.check_runnable(sizes, device)
    if isinstance(seeds, int):
        base = secrets.randbelow(2**31 - 64)
        seeds = [base + i for i in range(seeds)]
    res = CheckResult(problem.key, variant.slug, sizes, list(seeds))
    worst = {"rel": 0.0, "abs": 0.0, "eager": 0.0}
    allclose_all = True
    expect = tuple(problem.output_shape(sizes))
    for seed in seeds:
        model = problem.make_model(sizes, seed=seed, device=device)
        inputs = problem.get_inputs(sizes, seed=seed, device=device)
        ref = reference64(model, inputs)
        with torch.no_grad(), tf32_matmul(False):
            eager = model(*inputs)
        fn = (build or variant.build)(model)
        poison_allocator(expect, device)
        out = fn(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if tuple(out.shape) != expect or out.dtype != torch.float32:
            res.failures.append(f"seed {seed}: output is {tuple(out.shape)} {out.dtype}, "
                                f"expected {expect} torch.float32")
            break
        bad = (~torch.isfinite(out) & torch.isfinite(ref)).sum().item()
        if bad:
            res.failures.append(f"seed {seed}: {bad} of {out.numel()} elements are NaN/Inf "
                                f"(unwritten or overflowed) where the reference is finite")
            break
        worst["rel"] = max(worst["rel"], rel_error(out, ref))
        worst["abs"] = max(worst["abs"], (out.double() - ref).abs().max().item())
        worst["eager"] = max(worst["eager"], rel_error(eager, ref))
        allclose_all &= torch.allclose(out, eager, atol=ATOL, rtol=RTOL)
    if res.ok:
        res.rel_error, res.max_abs_error = worst["rel"], worst["abs"]
        res.eager_rel_error, res.allclose = worst["eager"], allclose_all
        res.tier = "reference" if variant.slug == "eager" and build is None else classify(
            worst["rel"], worst["eager"], allclose_all)
    return res


def describe(result: CheckResult) -> str:
    """One line for logs: problem, sizes and the summary."""
    return f"[{result.problem} {fmt_sizes(result.sizes)}] {result.summary()}"
