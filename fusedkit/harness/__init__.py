"""The measuring harness: check, then time, then one record, with every verdict reached in
this process, where the kernel never ran.

The public face every caller uses (the command line, the notebooks, the explorer, the
exercises, the probes): :func:`plan` checks the arguments once, at the edge; :func:`measure`
measures a plan; :func:`fusedkit.runner.ladder` measures many.
"""

from __future__ import annotations

import functools

import torch

from fusedkit.check import (FAULT_CLASSES, MAX_SEEDS, SEEDS, Build, CheckResult, classify,
                            eager32, evaluations, reference64, rel_error)
from fusedkit.interpreter_cost import run_seconds
from fusedkit.isolation import MALFORMED, WorkerDied, pack, retire, unpack
from fusedkit.isolation import run as run_job
from fusedkit.measure import CANNOT_RUN, REP_MS, WARMUP_MS, Measurement, Plan, candidate, measure, plan
from fusedkit.precision import TIERS


@functools.cache
def _cpu_flops_per_s(dtype: torch.dtype) -> float:
    """This CPU's GEMM rate in ``dtype``, measured once at 1024 x 1024 x 1024."""
    import time

    a = torch.randn(1024, 1024, dtype=dtype)
    a @ a
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t0)
    return 2 * 1024**3 / max(best, 1e-9)


def estimate_s(p: Plan) -> float:
    """Predicted wall seconds of :func:`measure` of ``p`` here (0 for a plan that cannot run)."""
    if p.refusal:
        return 0.0
    if p.device.type == "cuda":
        return (p.warmup_ms + p.rep_ms) / 1e3 + 0.5
    seeds = p.seeds if isinstance(p.seeds, int) else len(p.seeds)
    if p.variant.triton:
        return run_seconds(p.problem, p.variant, p.sizes, seeds=seeds, time_it=p.time_it)
    per_eval = p.problem.flops(p.sizes) * (1 / _cpu_flops_per_s(torch.float64)
                                           + 2 / _cpu_flops_per_s(torch.float32)) / 3
    return evaluations(seeds) * per_eval


__all__ = ["CANNOT_RUN", "FAULT_CLASSES", "MALFORMED", "MAX_SEEDS", "REP_MS", "SEEDS", "TIERS",
           "WARMUP_MS", "Build", "CheckResult", "Measurement", "Plan", "WorkerDied", "candidate",
           "classify", "eager32", "estimate_s", "measure", "pack", "plan", "reference64",
           "rel_error", "retire", "run_job", "unpack"]
