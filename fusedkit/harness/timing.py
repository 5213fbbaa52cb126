"""One timing rule, :func:`count`: warm-up and timed calls to fill the budgets, each count drawn
so that a kernel cannot know it, and bounded. The harness times candidates by it across the
process line; :func:`fusedkit.device.time_fn` times trusted code in this process by it."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch


MAX_CALLS = 1000
"""Most timed calls of one loop (a quarter of it warm-up): the median of a thousand is steady."""
MIN_CALLS = {"cuda": 10, "cpu": 3}
"""The fewest timed calls, however slow the first calls look (a call so slow that these would
take twice the budget gets the CPU's few); the floor itself is drawn between this and twice it."""


@dataclass(frozen=True)
class Timing:
    """Summary of repeated timings, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    repeats: int
    timer: str            # "cuda-events" or "cpu-wall"


def summarize(samples_ms: list[float], timer: str) -> Timing:
    """The median, p10 and p90 of ``samples_ms``."""
    a = np.asarray(samples_ms, dtype=float)
    return Timing(float(np.median(a)), float(np.percentile(a, 10)), float(np.percentile(a, 90)),
                  int(a.size), timer)


def count(estimate_ms: float, warmup_ms: float, rep_ms: float, device: torch.device,
          rng: random.Random) -> tuple[int, int]:
    """(warm-up calls, timed calls) for a call of about ``estimate_ms``."""
    estimate_ms = max(estimate_ms, 1e-4)
    floor = MIN_CALLS[device.type]
    if estimate_ms * floor > 2 * rep_ms:
        floor = MIN_CALLS["cpu"]
    warm = int(warmup_ms / estimate_ms * rng.uniform(0.75, 1.25))
    warm = min(MAX_CALLS // 4, max(1 if device.type == "cuda" else 0, warm))
    timed = int(rep_ms / estimate_ms * rng.uniform(0.9, 1.1))
    return warm, min(MAX_CALLS, max(rng.randint(floor, 2 * floor), timed))
