"""Timing with one method: warm-up, L2 flush, device events, median with p10 / p90.

On a GPU, :func:`time_fn` uses ``triton.testing.do_bench`` (CUDA events around each call,
a 256 MB buffer written between calls to flush L2, warm-up and repeat budgets in
milliseconds) and asks it for every sample. Without a GPU it times with the host clock
and says so in ``timer`` ("cpu-wall"): such numbers are never mixed with GPU ones.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch


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


def _summarize(samples_ms: list[float], timer: str) -> Timing:
    a = np.asarray(samples_ms, dtype=float)
    return Timing(float(np.median(a)), float(np.percentile(a, 10)),
                  float(np.percentile(a, 90)), int(a.size), timer)


def time_fn(fn: Callable[[], object], *, warmup_ms: float = 100.0, rep_ms: float = 500.0,
            device: str | torch.device | None = None) -> Timing:
    """Time ``fn()`` (no arguments: close over the inputs).

    ``warmup_ms`` / ``rep_ms`` are time budgets in milliseconds, as in ``do_bench``.
    """
    if warmup_ms < 0 or rep_ms <= 0:
        raise ValueError(f"warmup_ms={warmup_ms}, rep_ms={rep_ms}: need warmup_ms >= 0 and rep_ms > 0")
    device = torch.device(device) if device is not None else (
        torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu"))
    if device.type == "cuda":
        from triton.testing import do_bench  # noqa: PLC0415 - GPU mode only

        samples = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
        return _summarize(list(samples), "cuda-events")
    return _time_cpu(fn, warmup_ms, rep_ms)


def _time_cpu(fn: Callable[[], object], warmup_ms: float, rep_ms: float) -> Timing:
    """Host-clock timing, labelled "cpu-wall"; at least 3 samples."""
    t_end = time.perf_counter() + warmup_ms / 1e3
    fn()
    while time.perf_counter() < t_end:
        fn()
    samples: list[float] = []
    t_end = time.perf_counter() + rep_ms / 1e3
    while len(samples) < 3 or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return _summarize(samples, "cpu-wall")


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


def time_matmul(n: int = 8192, dtype: torch.dtype = torch.bfloat16,
                device: str | torch.device = "cuda") -> Timing:
    """Time one large random ``n x n x n`` matrix product through PyTorch."""
    device = _require_cuda(device, "the matrix-rate ceiling")
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return time_fn(lambda: a @ b, warmup_ms=100, rep_ms=500, device=device)


def matmul_tflops(n: int = 8192, dtype: torch.dtype = torch.bfloat16,
                  device: str | torch.device = "cuda") -> float:
    """Rate of one large random ``n x n x n`` matrix product through PyTorch, in TFLOP/s."""
    return 2 * n**3 / (time_matmul(n, dtype, device).median_ms * 1e-3) / 1e12
