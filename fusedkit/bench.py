"""Timing with one method: warm-up, L2 flush, device events, median with p10 / p90.

Every call is made the same way: an untimed ``prepare(i)`` (the harness writes fresh values
into the inputs there), an L2 flush, then the call between two CUDA events on the caller's
stream, then an untimed ``after(i, output)`` (the harness verifies the output there, every
call alike). The first calls are warm-up, but their number is drawn at random and they look
exactly like the timed ones, so a kernel cannot tell when the clock is running. A few timed
calls, also drawn at random, can keep a copy of their output for the caller to verify.

The timer functions are bound when this module is imported: a kernel that patches
``torch.cuda.Event`` or ``time.perf_counter`` later cannot change the time it is given.
Without a GPU the same loop runs on the host clock and says so in ``timer`` ("cpu-wall"):
such numbers are never mixed with GPU ones.
"""

from __future__ import annotations

import math
import numbers
import random
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from fusedkit.interrupts import checkpoint

# Bound once, here: nothing a candidate kernel patches afterwards reaches the clock, nor the
# statistics taken of it (numpy is no module fusedkit.guard watches).
_perf_counter = time.perf_counter
_CudaEvent = torch.cuda.Event
_cuda_synchronize = torch.cuda.synchronize
_asarray, _median, _percentile = np.asarray, np.median, np.percentile

FLUSH_BYTES = 256 * 2**20
"""Bytes written between timed calls to evict the L2 cache (H200: 50 MB of L2)."""
MAX_CALLS = 1000
"""Most timed calls per measurement, whatever the budget, and a quarter of it the most warm-up
calls: every call is verified on rows sent back to the caller and judged in float64 there, so a
0.2 ms kernel given 500 ms would cost far more than its 0.5 s (the median of a thousand
samples is as steady as of more)."""


@dataclass(frozen=True)
class Timing:
    """Summary of repeated timings, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    repeats: int
    timer: str            # "cuda-events" or "cpu-wall"

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: differences smaller than this are noise."""
        return (self.p90_ms - self.p10_ms) / self.median_ms


@dataclass
class TimedCalls:
    """What :func:`time_calls` measured, and the outputs it kept for verification."""

    timing: Timing
    kept: list[tuple[int, torch.Tensor]]   # (call index given to prepare, copy of its output)
    samples_ms: list[float]                # every timed call's time, in order


def summarize(samples_ms: list[float], timer: str) -> Timing:
    """The median, p10 and p90 of ``samples_ms`` (what the measuring process concludes from the
    raw times a worker sends)."""
    if not samples_ms:
        raise ValueError("no timed calls to summarize")
    a = _asarray(samples_ms, dtype=float)
    return Timing(float(_median(a)), float(_percentile(a, 10)),
                  float(_percentile(a, 90)), int(a.size), timer)


MAX_BUDGET_MS = 60_000.0
"""The longest timing budget, warm-up or timed, in ms (a minute: a typo such as 1e12 is
refused before anything runs)."""


def check_budgets(warmup_ms: float, rep_ms: float) -> None:
    """Refuse timing budgets (ms) that are not numbers, not finite, or out of range: a
    ValueError (TypeError for a non-number) naming the budget, its value and what is allowed."""
    for name, value, low in (("warmup_ms", warmup_ms, 0.0), ("rep_ms", rep_ms, None)):
        allowed = ("a finite number >= 0" if low is not None else "a finite number > 0") + \
            f", at most {MAX_BUDGET_MS:g}"
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name}={value!r} is not a number; allowed: {allowed}")
        if not math.isfinite(value) or value > MAX_BUDGET_MS or (
                value < low if low is not None else value <= 0):
            raise ValueError(f"{name}={value!r} is out of range; allowed: {allowed}")


def _resolve(device: str | torch.device | None) -> torch.device:
    return torch.device(device) if device is not None else (
        torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu"))


_flush_buffers: dict[torch.device, torch.Tensor] = {}


def _flush_buffer(device: torch.device) -> torch.Tensor:
    if device not in _flush_buffers:
        _flush_buffers[device] = torch.empty(FLUSH_BYTES, dtype=torch.int8, device=device)
    return _flush_buffers[device]


def flush_buffer(device: torch.device) -> torch.Tensor:
    """The buffer whose zeroing evicts the L2 before a timed call on ``device`` (a GPU)."""
    return _flush_buffer(device)


def synchronize(device: torch.device) -> None:
    """Wait for all of ``device``'s work (nothing to wait for on a CPU)."""
    if device.type == "cuda":
        _cuda_synchronize(device)


def timed_call(call: Callable[[], object], device: torch.device,
               flush: torch.Tensor | None) -> tuple[float | tuple, object]:
    """One call timed as :func:`time_calls` times each: on a GPU the L2 flushed (``flush``
    zeroed) and events recorded around it, their pair returned to be read later
    (:func:`elapsed_ms`); on a CPU its wall milliseconds. Returns (that mark, the output)."""
    if device.type == "cuda":
        if flush is not None:
            flush.zero_()
        start, end = _CudaEvent(enable_timing=True), _CudaEvent(enable_timing=True)
        start.record()
        out = call()
        end.record()
        return (start, end), out
    t0 = _perf_counter()
    out = call()
    return (_perf_counter() - t0) * 1e3, out


def elapsed_ms(marks: list, device: torch.device) -> list[float]:
    """The milliseconds of each :func:`timed_call` mark (one sync on a GPU)."""
    if device.type == "cuda":
        _cuda_synchronize(device)
        return [float(s.elapsed_time(e)) for s, e in marks]
    return [float(t) for t in marks]


def timer_name(device: torch.device) -> str:
    """What :func:`timed_call` times with on ``device``: "cuda-events" or "cpu-wall"."""
    return "cuda-events" if device.type == "cuda" else "cpu-wall"


def time_calls(call: Callable[[], object], *, prepare: Callable[[int], None] | None = None,
               after: Callable[[int, object], None] | None = None,
               warmup_ms: float = 100.0, rep_ms: float = 500.0,
               device: str | torch.device | None = None, keep: int = 0,
               rng: random.Random | None = None, flush_l2: bool = True) -> TimedCalls:
    """Time ``call()`` (no arguments: close over the inputs), each call preceded by an untimed
    ``prepare(i)`` (``i`` counts every call, warm-up included) and, on a GPU, an L2 flush, and
    followed by an untimed ``after(i, output)`` (on a GPU, queued behind the call's end event:
    what it enqueues is not timed, and it must not synchronize, or the calls after it would start
    on an idle GPU). ``flush_l2=False`` leaves the L2 as the previous call left it: only for
    measuring the L2 itself (:mod:`fusedkit.ceilings`), never a kernel.

    ``warmup_ms`` / ``rep_ms`` are time budgets in milliseconds, as in ``triton.testing.do_bench``;
    the number of warm-up calls is randomised by up to a quarter. ``keep`` timed calls, drawn
    at random with distinct indices modulo ``keep``, store a copy of their output (taken on
    the caller's stream right after the call) in :attr:`TimedCalls.kept` with their index.
    """
    check_budgets(warmup_ms, rep_ms)
    device = _resolve(device)
    rng = rng or random.Random()
    gpu = device.type == "cuda"
    flush = _flush_buffer(device) if gpu and flush_l2 else None
    kept: list[tuple[int, torch.Tensor]] = []
    wanted: set[int] = set()
    counter = [0]

    def one() -> float | tuple:
        checkpoint()   # outside the timed span: a run asked to stop stops between calls
        i = counter[0]
        counter[0] += 1
        if prepare is not None:
            prepare(i)
        mark, out = timed_call(call, device, flush)
        if i in wanted and isinstance(out, torch.Tensor):
            kept.append((i, out.detach().clone()))
        if after is not None:
            after(i, out)
        return mark

    def elapsed(marks: list) -> list[float]:
        return elapsed_ms(marks, device)

    # Estimate one call's time from a few calls made exactly like the others: five, so that the
    # first calls of a fresh process (a kernel's load, a library's handle, a cold allocator)
    # do not set the count.
    estimate = max(float(_median(elapsed([one() for _ in range(5)]))), 1e-4)
    # The estimating calls warm up a slow CPU call enough; a GPU always gets more.
    n_warm = max(1 if gpu else 0,
                 min(MAX_CALLS // 4, int(warmup_ms / estimate * rng.uniform(0.75, 1.25))))
    n_rep = min(MAX_CALLS, max(10 if gpu else 3, int(rep_ms / estimate)))
    first = counter[0] + n_warm
    # One kept call per residue class of the call index modulo ``keep``: when ``prepare``
    # rotates ``keep`` input sets, every set's answer is verified, so an answer cached from
    # any one set is seen to be wrong for the others.
    for r in range(min(keep, n_rep)):
        wanted.add(rng.choice(range(first + (r - first) % keep, first + n_rep, keep)))
    warm = [one() for _ in range(n_warm)]
    del warm
    timed = elapsed([one() for _ in range(n_rep)])
    timed = [float(t) for t in timed]
    return TimedCalls(summarize(timed, timer_name(device)), kept, timed)


def time_fn(fn: Callable[[], object], *, warmup_ms: float = 100.0, rep_ms: float = 500.0,
            device: str | torch.device | None = None, flush_l2: bool = True) -> Timing:
    """Time ``fn()`` alone (no input refresh, nothing kept): ceilings and components.
    ``flush_l2`` as in :func:`time_calls`."""
    return time_calls(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, device=device,
                      flush_l2=flush_l2).timing


def device_busy_ms(call: Callable[[], object], device: str | torch.device, *,
                   target_ms: float = 50.0, per_call_ms: float = 0.01) -> tuple[float, float]:
    """(wall, host) milliseconds per call of ``call()`` made back to back between two device-wide
    synchronizes: ``wall`` is what the whole GPU took, ``host`` what issuing took on the CPU.

    Events on the caller's stream see only that stream; this sees every stream. A call whose
    events show much less than ``wall`` while the host is not the bottleneck does work that the
    events miss (on a stream the caller never waits for).
    """
    device = _require_cuda(device, "device-wide wall time")
    n = int(min(200, max(3, target_ms / max(per_call_ms, 1e-3))))
    _cuda_synchronize(device)
    t0 = _perf_counter()
    for _ in range(n):
        call()
    issued = _perf_counter()
    _cuda_synchronize(device)
    done = _perf_counter()
    return (done - t0) * 1e3 / n, (issued - t0) * 1e3 / n


def peak_memory_mb(fn: Callable[[], object], device: str | torch.device) -> float:
    """Device memory one call of ``fn()`` needs on top of what is already allocated, in MB
    (10**6 bytes): the allocator's peak during the call minus its level before it, so the
    output and every temporary count; inputs, weights and caches made earlier do not."""
    device = _require_cuda(device, "peak memory")
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    out = fn()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device)
    del out
    return (peak - before) / 1e6


def _require_cuda(device: str | torch.device, what: str) -> torch.device:
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"device={device}: {what} is a GPU measurement; no CUDA device")
    return device


def time_copy(nbytes_moved: float, device: str | torch.device = "cuda", *,
              warmup_ms: float = 50.0, rep_ms: float = 300.0) -> Timing:
    """Time a device-to-device copy that moves ``nbytes_moved`` bytes (read plus written)."""
    device = _require_cuda(device, "copy bandwidth")
    src = torch.rand(int(nbytes_moved // 8), device=device)   # a copy reads and writes half each
    dst = torch.empty_like(src)
    return time_fn(lambda: dst.copy_(src), warmup_ms=warmup_ms, rep_ms=rep_ms, device=device)


def copy_bandwidth_gbps(nbytes: int = 2 * 2**30, device: str | torch.device = "cuda") -> float:
    """Device-to-device copy bandwidth in GB/s of an ``nbytes`` buffer, counting bytes read
    plus bytes written.

    This is the ceiling a memory-bound kernel is judged against, measured in the same run.
    """
    return 2 * nbytes / (time_copy(2 * nbytes, device).median_ms * 1e-3) / 1e9
