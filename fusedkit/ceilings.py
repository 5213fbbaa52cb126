"""The device's own ceilings, measured beside a ladder's run (:mod:`fusedkit.device`) and read
back from the records (``problem`` ``device``), and the floor they give. A datasheet rate is a lead,
not a ceiling (:mod:`fusedkit.hardware`): under a long tensor-core load the GPU may run slower.

- ``ceiling_copy``: a 2 GiB device-to-device copy, bytes read plus written, L2 flushed before each
  call: the bandwidth a memory-bound kernel gets.
- ``ceiling_dram_read``, ``ceiling_l2_read``: a read-only kernel (``kernels/common/read_sum.py``)
  over 2 GiB, the L2 flushed, and over 16 MiB read 64 times a call, served by the L2; bytes read.
- ``ceiling_gemm_<operands>``: cuBLAS through ``torch.mm`` at a GEMM shape of a problem, x (M, K)
  times W.T, operands fp32 (TF32 off), tf32, fp16 or bf16, its output checked against float64.
- older runs' ``d2d_copy`` (the same copy) and ``bf16_matmul`` (n = 8192).

:func:`measured_floor` is :func:`fusedkit.roofline.fused_floor` on these: the larger of the fewest
bytes over the copy bandwidth and the FLOPs over cuBLAS's rate at each GEMM shape (tf32x3 and fp16x3
count three products; elementwise stages at the datasheet FP32 rate, < 0.1% of the FLOPs). A
``pct_of_measured`` above 100 is faster than cuBLAS's own GEMM at that shape.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable

import pandas as pd

from fusedkit import records
from fusedkit.hardware import DEFAULT_GPU, GpuSpec, match_device_name, spec
from fusedkit.precision import PRECISIONS
from fusedkit.problems import Problem, Sizes, parse_sizes
from fusedkit.roofline import Floor, fused_floor_at

PROBLEM = "device"   # the records' ``problem`` of every ceiling row
COPY, DRAM_READ, L2_READ = "ceiling_copy", "ceiling_dram_read", "ceiling_l2_read"
GEMM_PREFIX = "ceiling_gemm_"
LEGACY = {"d2d_copy": "copy", "bf16_matmul": "gemm"}
"""Variants of older runs read as ceilings: the same copy, and a square bf16 matmul."""

COPY_BYTES = 2 * 2**30          # buffer copied (moves twice this)
DRAM_READ_BYTES = 2 * 2**30     # far larger than any L2 of the spec table
L2_READ_BYTES = 16 * 2**20      # a third of the H200's 50 MiB L2
L2_PASSES = 64

GEMM_OPERANDS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16")
"""Operand types whose cuBLAS rate is measured at each GEMM shape."""
PRECISION_CEILING: dict[str, tuple[str, int]] = {
    "fp32": ("fp32", 1), "tf32": ("tf32", 1), "tf32x3": ("tf32", 3),
    "fp16": ("fp16", 1), "bf16": ("bf16", 1), "fp16x3": ("fp16", 3)}
"""A precision (:data:`fusedkit.precision.PRECISIONS`) -> (cuBLAS operands, products per term)."""


def gemm_shapes(problem: Problem, sizes: Sizes | Iterable[Sizes] | None = None
                ) -> list[tuple[int, int, int]]:
    """(M, N, K) of every GEMM stage of ``problem`` at ``sizes`` (one mapping, several, or
    None for the defaults), in order, each once."""
    many = [sizes] if sizes is None or isinstance(sizes, dict) else list(sizes)
    shapes: list[tuple[int, int, int]] = []
    for s in many:
        for stage in problem.stages(problem.sizes(s or problem.defaults)):
            if stage.kind == "gemm" and stage.mnk and stage.mnk not in shapes:
                shapes.append(stage.mnk)
    return shapes


NOT_ITS_ARITHMETIC = "not a ceiling of its operands"
"""In the notes of a cuBLAS row not of its operands' arithmetic (at one shape cuBLAS runs tf32 in
plain fp32): recorded as the fact it is, never read back as a ceiling."""


CEILING_COLUMNS = ("run_id", "timestamp", "commit", "device", "variant", "kind", "operands",
                   "m", "n", "k", "bytes", "rate", "unit", "median_ms", "notes")


def ceilings_frame(recs: pd.DataFrame) -> pd.DataFrame:
    """The ceiling rows of a records frame, one per (run, ceiling): ``kind``, a GEMM's ``operands`` and
    ``m``, ``n``, ``k``, a buffer's ``bytes``, ``rate`` in ``unit``; :data:`NOT_ITS_ARITHMETIC` left out."""
    df = recs[(recs["problem"] == PROBLEM)
              & (recs["variant"].str.startswith("ceiling_") | recs["variant"].isin(list(LEGACY)))
              & ~recs["notes"].fillna("").str.contains(NOT_ITS_ARITHMETIC, regex=False)]
    out = []
    for r in df.itertuples(index=False):
        sizes = parse_sizes(r.sizes)
        kind = LEGACY.get(r.variant) or ("gemm" if r.variant.startswith(GEMM_PREFIX)
                                         else r.variant.removeprefix("ceiling_"))
        ops = (r.variant.removeprefix(GEMM_PREFIX) if r.variant.startswith(GEMM_PREFIX)
               else "bf16" if r.variant == "bf16_matmul" else "")
        if r.variant == "bf16_matmul":
            sizes = dict(m=sizes["n"], n=sizes["n"], k=sizes["n"])
        gemm = kind == "gemm"
        out.append({"run_id": r.run_id, "timestamp": r.timestamp, "commit": r.commit,
                    "device": r.device, "variant": r.variant, "kind": kind, "operands": ops,
                    **{d: float(sizes[d]) if gemm else math.nan for d in "mnk"},
                    "bytes": math.nan if gemm else float(sizes["bytes"]),
                    "rate": r.tflops if gemm else r.gbps, "unit": "TFLOP/s" if gemm else "GB/s",
                    "median_ms": r.median_ms, "notes": r.notes})
    return pd.DataFrame(out, columns=list(CEILING_COLUMNS))


def read_ceilings(path: str | Path | None = None) -> pd.DataFrame:
    """Every recorded ceiling (see :func:`ceilings_frame`) of the records at ``path``."""
    return ceilings_frame(records.read_records(path or records.default_path()))


def _newest_per_key(df: pd.DataFrame) -> pd.DataFrame:
    # A ceiling's key: what was measured. NaN sizes compare equal once filled.
    keyed = df.assign(**{c: df[c].fillna(-1) for c in ("m", "n", "k", "bytes")})
    key = ["kind", "operands", "m", "n", "k", "bytes"]
    newest = keyed.sort_values("timestamp").groupby(key, sort=False).tail(1).index
    return df.loc[newest].sort_values(["kind", "operands", "m", "n", "k"]).reset_index(drop=True)


def newest(device: str, path: str | Path | None = None) -> pd.DataFrame:
    """The newest recorded value of each ceiling on ``device`` (its exact name, e.g. ``NVIDIA
    H200``); empty when none was recorded there."""
    df = read_ceilings(path)
    return _newest_per_key(df[df["device"] == device])


def of_run(run_id: str, path: str | Path | None = None, *,
           ceilings: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ceilings recorded in the run ``run_id``; empty when it recorded none."""
    df = read_ceilings(path) if ceilings is None else ceilings
    return _newest_per_key(df[df["run_id"] == run_id])


def for_problem(problem: Problem, ceilings: pd.DataFrame, sizes: Sizes | None = None) -> pd.DataFrame:
    """The rows of ``ceilings`` that bound ``problem`` at ``sizes``: the memory ceilings, then cuBLAS
    at its own GEMM shapes in order, each in :data:`GEMM_OPERANDS` order; other shapes left out."""
    shapes, memory = gemm_shapes(problem, sizes), ["copy", "dram_read", "l2_read"]
    ops = {op: i for i, op in enumerate(GEMM_OPERANDS)}
    keys = {}
    for i, r in enumerate(ceilings.itertuples(index=False)):
        if r.kind in memory:
            keys[i] = (memory.index(r.kind), 0, 0)
        elif r.kind == "gemm" and (r.m, r.n, r.k) in shapes:
            keys[i] = (len(memory), shapes.index((r.m, r.n, r.k)), ops.get(r.operands, len(ops)))
    return ceilings.iloc[sorted(keys, key=keys.get)].reset_index(drop=True)


def for_run(device: str, run_id: str | None, ceilings: pd.DataFrame) -> pd.DataFrame:
    """The ceilings the run ``run_id`` measured on ``device`` itself, never another run's (its
    clocks and power state differ); with ``run_id`` None, the newest of each on ``device``."""
    on_device = ceilings[ceilings["device"] == device]
    return _newest_per_key(on_device if run_id is None else on_device[on_device["run_id"] == run_id])


def rate(ceilings: pd.DataFrame, kind: str, operands: str = "",
         mnk: tuple[int, int, int] | None = None) -> float:
    """One ceiling's rate from ``ceilings``: copy, dram_read or l2_read in GB/s, or gemm in TFLOP/s of
    ``operands`` at ``mnk`` (M, N, K); NaN where it is not among them (a copy: the largest)."""
    kinds = {"copy", "dram_read", "l2_read", "gemm"}
    if kind not in kinds:
        raise ValueError(f"kind={kind!r} is not a ceiling; valid: {', '.join(sorted(kinds))}")
    if kind == "gemm" and (operands not in GEMM_OPERANDS or mnk is None):
        raise ValueError(f"kind='gemm' needs operands (one of {', '.join(GEMM_OPERANDS)}) and its "
                         f"(M, N, K); got operands={operands!r}, mnk={mnk!r}")
    if ceilings.empty:
        return math.nan
    hit = ceilings[(ceilings["kind"] == kind) & (ceilings["operands"] == operands)]
    if mnk is not None:
        hit = hit[(hit["m"] == mnk[0]) & (hit["n"] == mnk[1]) & (hit["k"] == mnk[2])]
    elif kind == "copy":   # the 2 GiB copy (legacy rows: the same size)
        hit = hit.sort_values("bytes").tail(1)
    return float(hit["rate"].iloc[-1]) if len(hit) else math.nan


def measured_floor(problem: Problem, sizes: Sizes | str, precision: str,
                   ceilings: pd.DataFrame) -> Floor | None:
    """The floor of a fused kernel (module docstring) of ``problem`` at ``sizes`` and ``precision`` on
    measured ``ceilings`` (e.g. :func:`newest`); None where a needed ceiling is not recorded."""
    if precision not in PRECISION_CEILING:
        raise ValueError(f"precision={precision!r} is not known; valid: {', '.join(PRECISIONS)}")
    sizes = problem.sizes(parse_sizes(sizes) if isinstance(sizes, str) else sizes)
    if ceilings.empty:
        return None
    copy = rate(ceilings, "copy")
    operands, products = PRECISION_CEILING[precision]
    gpu = match_device_name(str(ceilings["device"].iloc[0])) or spec(DEFAULT_GPU)
    rates = {s.name: rate(ceilings, "gemm", operands, s.mnk) / products
             for s in problem.stages(sizes) if s.kind == "gemm"}
    if not math.isfinite(copy) or not all(math.isfinite(r) for r in rates.values()):
        return None
    return fused_floor_at(problem, sizes, lambda s: rates.get(s.name, gpu.fp32_tflops), copy)


def _precision_of(problem: Problem, row: pd.Series) -> str:
    if "precision" in row and isinstance(row["precision"], str) and row["precision"]:
        return row["precision"]
    if row["variant"] in problem.variants:
        return problem.variants[row["variant"]].precision
    found = str(row.get("notes", "")).split("precision=")
    return found[1].split(";")[0].strip() if len(found) > 1 else ""


def add_pct_of_measured(df: pd.DataFrame, problem: Problem, *, path: str | Path | None = None) -> pd.DataFrame:
    """``df`` with ``pct_of_measured`` (:func:`measured_floor` over ``median_ms``, x 100) and
    ``ceilings_run``, each row on the ceilings its own run measured (:func:`for_run`): NaN (and "")
    where it measured none, never another run's, and where the row was not timed with CUDA events."""
    out = df.copy()
    missing = [c for c in ("variant", "sizes", "device", "median_ms") if c not in out]
    if missing and len(out):
        raise ValueError(f"add_pct_of_measured: df lacks column(s) {', '.join(missing)}")
    ceilings = read_ceilings(path)
    floors: dict[tuple, tuple[float, str]] = {}
    pct, runs = [], []
    for _, row in out.iterrows():
        run = row["run_id"] if "run_id" in out else None
        key = (row["device"], run, row["sizes"], _precision_of(problem, row))
        if key not in floors:
            chosen = for_run(row["device"], run, ceilings)
            f = (measured_floor(problem, row["sizes"], key[3], chosen)
                 if key[3] in PRECISION_CEILING and not chosen.empty else None)
            floors[key] = ((f.floor_ms, run or str(chosen["run_id"].iloc[-1])) if f is not None
                           else (math.nan, ""))
        timed = "timer" not in out or row["timer"] == "cuda-events"
        ms = row["median_ms"]
        ok = timed and pd.notna(ms) and ms > 0 and math.isfinite(floors[key][0])
        pct.append(100.0 * floors[key][0] / ms if ok else math.nan)
        runs.append(floors[key][1] if ok else "")
    out["pct_of_measured"] = pd.Series(pct, index=out.index, dtype="float64")
    out["ceilings_run"] = pd.Series(runs, index=out.index, dtype="object")
    return out


def table(ceilings: pd.DataFrame, gpu: GpuSpec | None = None) -> pd.DataFrame:
    """Ceilings as a reader sees them: what, shape, rate, unit and the datasheet's figure with
    the share reached (``gpu``: the device's spec, default from the rows' device name)."""
    if ceilings.empty:
        return pd.DataFrame(columns=["ceiling", "shape", "rate", "unit", "datasheet", "% of datasheet"])
    gpu = gpu or match_device_name(str(ceilings["device"].iloc[0])) or spec(DEFAULT_GPU)
    rows = []
    for r in ceilings.itertuples(index=False):
        if r.kind == "gemm":
            shape, sheet = f"{r.m:.0f} x {r.n:.0f} x {r.k:.0f}", gpu.peak_tflops({"fp32": "fp32", "tf32": "tf32"}.get(r.operands, "bf16"))
            what = f"cuBLAS {r.operands}"
        else:
            shape, what = f"{r.bytes / 2**20:.0f} MiB", r.kind.replace("_", " ")
            sheet = math.nan if r.kind == "l2_read" else gpu.mem_gbps
        rows.append({"ceiling": what, "shape": shape, "rate": r.rate, "unit": r.unit,
                     "datasheet": sheet, "% of datasheet": 100 * r.rate / sheet})
    return pd.DataFrame(rows)
