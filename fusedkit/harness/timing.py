"""One timing rule, :func:`count` (warm-up and timed calls to fill the budgets, each count drawn
so that a kernel cannot know it, and bounded), and :func:`time_fn`, the timer of trusted code in
this process (an L2 flush and CUDA events on a GPU, the host clock on a CPU)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from fusedkit.interrupts import checkpoint

FLUSH_BYTES = 256 * 2**20
"""Bytes written before each timed call on a GPU to evict the L2 (an H200 has 50 MB)."""
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


_flush: dict[str, torch.Tensor] = {}


def time_fn(fn: Callable[[], object], *, warmup_ms: float = 100.0, rep_ms: float = 500.0,
            device: torch.device | str = "cuda", flush_l2: bool = True,
            prepare: Callable[[int], None] | None = None, keep: int = 0
            ) -> tuple[Timing, list[tuple[int, object]]]:
    """Time ``fn()`` (trusted code: it runs in this process), each call after an untimed
    ``prepare(i)``; returns the timing and the outputs of ``keep`` timed calls (call index,
    output) for the caller to check. ``flush_l2=False`` leaves the L2 as the last call left it:
    only for measuring the L2 itself."""
    device = torch.device(device)
    gpu = device.type == "cuda"
    if gpu and flush_l2 and str(device) not in _flush:
        _flush[str(device)] = torch.empty(FLUSH_BYTES, dtype=torch.int8, device=device)
    flush = _flush.get(str(device)) if gpu and flush_l2 else None
    made = [0]

    def one() -> tuple[object, object]:
        checkpoint()
        if prepare is not None:
            prepare(made[0])
        made[0] += 1
        if not gpu:
            t0 = time.perf_counter()
            out = fn()
            return (time.perf_counter() - t0) * 1e3, out
        if flush is not None:
            flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        return (start, end), out

    def ms(marks: list) -> list[float]:
        if gpu:
            torch.cuda.synchronize(device)
            return [s.elapsed_time(e) for s, e in marks]
        return list(marks)

    rng = random.Random()
    estimate = float(np.median(ms([one()[0] for _ in range(5)])))
    warm, timed = count(estimate, warmup_ms, rep_ms, device, rng)
    for _ in range(warm):
        one()
    kept_at = set(rng.sample(range(timed), min(keep, timed)))
    marks, kept = [], []
    for i in range(timed):
        mark, out = one()
        marks.append(mark)
        if i in kept_at:
            kept.append((made[0] - 1, out.detach().clone() if isinstance(out, torch.Tensor) else out))
    return summarize(ms(marks), "cuda-events" if gpu else "cpu-wall"), kept


def time_copy(nbytes_moved: float, device: torch.device | str = "cuda", *,
              warmup_ms: float = 50.0, rep_ms: float = 300.0) -> Timing:
    """A device-to-device copy that moves ``nbytes_moved`` bytes (read plus written)."""
    src = torch.rand(int(nbytes_moved // 8), device=device)
    dst = torch.empty_like(src)
    return time_fn(lambda: dst.copy_(src), warmup_ms=warmup_ms, rep_ms=rep_ms, device=device)[0]
