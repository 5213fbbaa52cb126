"""Roofline arithmetic: FLOPs, fewest bytes, arithmetic intensity and the two time floors.

For a stage of F FLOPs that must move B bytes, on a unit of peak rate P fed by memory of bandwidth W:
compute floor = F / P, memory floor = B / W, floor = the larger. Intensity F / B against the ridge
point P / W says which binds. GEMM stages run at the precision's rate (tensor cores for tf32 / bf16),
elementwise and reduction stages on the FP32 CUDA cores; storage is fp32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from fusedkit.hardware import GpuSpec, precision_unit
from fusedkit.problems import Problem, Sizes, Stage


@dataclass(frozen=True)
class Floor:
    """Time floors of one piece of work on one GPU, in milliseconds."""

    flops: float
    bytes: float
    peak_tflops: float
    mem_gbps: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte."""
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def compute_ms(self) -> float:
        return self.flops / (self.peak_tflops * 1e12) * 1e3

    @property
    def memory_ms(self) -> float:
        return self.bytes / (self.mem_gbps * 1e9) * 1e3

    @property
    def floor_ms(self) -> float:
        return max(self.compute_ms, self.memory_ms)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_ms >= self.memory_ms else "memory"


def stage_floor(stage: Stage, gpu: GpuSpec, precision: str = "fp32") -> Floor:
    """Floors of one stage: GEMMs at ``precision``'s rate, the rest on FP32 cores."""
    precision_unit(precision)   # checked here: only a GEMM's rate depends on it
    peak = gpu.peak_tflops(precision if stage.kind == "gemm" else "fp32")
    return Floor(stage.flops, stage.bytes, peak, gpu.mem_gbps)


def fused_floor(problem: Problem, sizes: Sizes, gpu: GpuSpec, precision: str = "fp32") -> Floor:
    """Floors of a perfectly fused kernel: all FLOPs, only the fewest bytes."""
    return fused_floor_at(problem, sizes, lambda s: stage_floor(s, gpu, precision).peak_tflops, gpu.mem_gbps)


def fused_floor_at(problem: Problem, sizes: Sizes, stage_tflops: Callable[[Stage], float],
                   mem_gbps: float) -> Floor:
    """:func:`fused_floor` at each stage's rate ``stage_tflops(stage)`` (TFLOP/s) and ``mem_gbps``
    (GB/s): measured ceilings in place of the datasheet's (:func:`fusedkit.ceilings.measured_floor`)."""
    floors = [Floor(s.flops, s.bytes, stage_tflops(s), mem_gbps) for s in problem.stages(sizes)]
    flops = sum(f.flops for f in floors)
    compute_ms = sum(f.compute_ms for f in floors)
    # Express the mixed-unit compute time as one effective rate, so Floor stays simple.
    eff_tflops = flops / (compute_ms * 1e-3) / 1e12
    return Floor(flops, problem.min_bytes(sizes), eff_tflops, mem_gbps)


def table(problem: Problem, sizes: Sizes, gpu: GpuSpec, precision: str = "fp32") -> pd.DataFrame:
    """Per-stage roofline table with an unfused total and a fused row."""
    def row(name: str, kind: str, f: Floor) -> dict:
        return {"stage": name, "kind": kind, "GFLOP": f.flops / 1e9, "MB": f.bytes / 1e6,
                "FLOP/B": f.intensity, "compute ms": f.compute_ms, "memory ms": f.memory_ms,
                "floor ms": f.floor_ms, "bound": f.bound}

    rows = [row(s.name, s.kind, stage_floor(s, gpu, precision)) for s in problem.stages(sizes)]
    total = {c: sum(r[c] for r in rows) for c in ("GFLOP", "MB", "compute ms", "memory ms", "floor ms")}
    rows.append({"stage": "total, unfused (sum of stages)", "kind": "", **total,
                 "FLOP/B": 1e3 * total["GFLOP"] / total["MB"],
                 "bound": "compute" if total["compute ms"] >= total["memory ms"] else "memory"})
    rows.append(row("total, fused (fewest bytes)", "", fused_floor(problem, sizes, gpu, precision)))
    return pd.DataFrame(rows)


_PREFIXES = ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_TIMES = ((1.0, "ms"), (1e-3, "µs"), (1e-6, "ns"))
_TIME_COLUMNS = ("compute", "memory", "floor")


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`table`'s frame with work, bytes and times (the three in one unit) each in the unit in
    which its largest value is at least 1, to 3 significant digits: small sizes never read 0.000."""
    out = df.copy()

    def signif(values: pd.Series) -> pd.Series:
        return values.map(lambda v: float(f"{v:.3g}"))

    for column, base, unit in (("GFLOP", 1e9, "FLOP"), ("MB", 1e6, "B")):
        amounts = out[column] * base
        scale, prefix = next(((f, p) for f, p in _PREFIXES if amounts.abs().max() >= f), (1.0, ""))
        name = f"{prefix}{unit}" if unit == "FLOP" or prefix != "k" else "kB"
        out[column] = signif(amounts / scale)
        out = out.rename(columns={column: name})
    longest = max(out[f"{c} ms"].abs().max() for c in _TIME_COLUMNS)
    scale, unit = next(((f, u) for f, u in _TIMES if longest >= f), _TIMES[-1])
    for c in _TIME_COLUMNS:
        out[f"{c} ms"] = signif(out[f"{c} ms"] / scale)
    out["FLOP/B"] = signif(out["FLOP/B"])
    return out.rename(columns={f"{c} ms": f"{c} {unit}" for c in _TIME_COLUMNS})


def ridge_point(gpu: GpuSpec, precision: str = "fp32") -> float:
    """Intensity (FLOP/B) above which ``precision``'s arithmetic, not memory, binds."""
    return gpu.peak_tflops(precision) * 1e12 / (gpu.mem_gbps * 1e9)


def achieved(flops: float, nbytes: float, ms: float) -> tuple[float, float]:
    """(TFLOP/s, GB/s) achieved by work of ``flops`` and ``nbytes`` done in ``ms``."""
    if not ms > 0:
        raise ValueError(f"ms={ms!r} must be a positive time")
    return flops / (ms * 1e-3) / 1e12, nbytes / (ms * 1e-3) / 1e9
