"""The results dashboard's data: every record in ``data/``, shaped per problem.

Three views, all computed from the typed frame that :func:`fusedkit.records.read_records`
returns, so they work the same on the committed records and on a synthetic frame:

- :func:`best_per_tier`: per device and sizes, the best variant of each precision tier among
  every variant's newest clean measurement (:func:`fusedkit.results.newest_clean`), with its
  speed-up over the eager baseline *of its own run*;
- :func:`runs_comparison`: every run's time of every variant, for comparisons across runs,
  commits and devices (times only; ratios stay within a run);
- :func:`nearest_records`: the recorded rows whose sizes are nearest to some sizes (the
  live widgets show them beside what ran on the CPU).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from fusedkit import records
from fusedkit.precision import TIERS
from fusedkit.results import add_speedup, best_by_tier, newest_clean, run_label
from fusedkit.problems import Problem, SizeError, Sizes, fmt_sizes, parse_sizes



def read_all(folder: str | os.PathLike[str] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Every records-schema CSV file in ``folder`` (default: the folder of the records file),
    concatenated, and one note per ``*.csv`` left out because it has another schema.

    Each file is read (and validated) by :func:`fusedkit.records.read_records`.
    """
    folder = Path(folder) if folder is not None else records.default_path().parent
    frames, skipped = [], []
    for path in sorted(folder.glob("*.csv")):
        with path.open(encoding="utf-8") as f:
            header = f.readline().strip().split(",")
        if tuple(header) != records.COLUMNS:
            skipped.append(f"{path.name}: not a records file (columns {', '.join(header[:4])}, ...)")
            continue
        frames.append(records.read_records(path))
    if not frames:
        # read_records gives a missing file as an empty frame with the typed columns
        return records.read_records(folder / ".no-records.csv"), skipped
    return pd.concat(frames, ignore_index=True), skipped


def _key(problem: Problem | str) -> str:
    return problem.key if isinstance(problem, Problem) else str(problem)


def _check_frame(rec: pd.DataFrame) -> None:
    missing = [c for c in records.COLUMNS if c not in rec.columns]
    if missing:
        raise ValueError(f"records is missing column(s) {', '.join(missing)}; "
                         "pass the frame from fusedkit.records.read_records")


def best_per_tier(rec: pd.DataFrame, problem: Problem | str, sizes: Sizes | None = None) -> pd.DataFrame:
    """Per device and sizes, eager (the reference) and the best of our kernels per tier, for
    ``problem``: among every variant's newest clean measurement
    (:func:`fusedkit.results.newest_clean`, the one definition of a recorded result), the one
    with the highest same-run speed-up meeting each tier (:func:`fusedkit.results.best_by_tier`,
    the definition the report index, the export and the README use). ``speedup`` is eager's
    time in the row's own run over the variant's; the reference row is eager's newest
    measurement. ``sizes`` keeps only rows at those sizes. Columns: device, sizes, tier,
    variant, median_ms, speedup, rel_error, tflops, pct_of_floor, run_id, commit, timestamp,
    variant_tier (the variant's own tier: an fp32-faithful kernel can be the best kb-pass one).
    Empty (same columns) when nothing is recorded.
    """
    _check_frame(rec)
    from fusedkit import problems  # noqa: PLC0415

    p = problems.get(problem) if isinstance(problem, str) else problem
    df = rec[rec["problem"] == p.key]
    if sizes is not None:
        df = df[df["sizes"] == fmt_sizes(sizes)]
    cols = ["device", "sizes", "tier", "variant", "median_ms", "speedup", "rel_error", "tflops",
            "pct_of_floor", "run_id", "commit", "timestamp", "variant_tier"]
    out = []
    for _, group in newest_clean(df, p).groupby(["device", "sizes"]):
        eager = group[group["variant"] == "eager"]
        if eager.empty:
            continue
        ref = eager.iloc[0].copy()
        ref["variant_tier"] = ref["tier"] = "reference"
        out.append(ref)
        for tier, r in best_by_tier(group, p).items():
            r = r.copy()
            r["variant_tier"], r["tier"] = r["tier"], tier   # a stricter kernel can fill a slot
            out.append(r)
    if not out:
        return pd.DataFrame({c: pd.Series(dtype=rec[c].dtype if c in rec else float) for c in cols})
    best = pd.DataFrame(out)
    best = best.assign(tier_rank=best["tier"].map(TIERS.index))
    return best.sort_values(["device", "sizes", "tier_rank"])[cols].reset_index(drop=True)


def runs_comparison(rec: pd.DataFrame, problem: Problem | str, *,
                    variants: list[str] | None = None) -> pd.DataFrame:
    """Every recorded time of ``problem``'s ladder variants, one row per (run, sizes, variant).

    ``variants`` defaults to the problem's ladder (its registered variants; components and
    device ceilings are left out) when ``problem`` is a Problem, else every checked row.
    Adds ``run`` (see :func:`run_label`) and ``speedup`` (within the run). Sorted by time.
    """
    _check_frame(rec)
    df = add_speedup(rec[rec["problem"] == _key(problem)])   # before choosing: needs eager
    if variants is None:
        keep = (df["variant"].isin(list(problem.variants)) if isinstance(problem, Problem)
                else df["tier"].isin(TIERS))
    else:
        keep = df["variant"].isin(variants)
    df = df[keep].sort_values(["timestamp", "variant"])
    df["run"] = [run_label(r) for _, r in df.iterrows()] if not df.empty else pd.Series(dtype=str)
    cols = ["run", "run_id", "timestamp", "commit", "device", "sizes", "variant", "tier",
            "median_ms", "p10_ms", "p90_ms", "speedup", "rel_error"]
    return df[cols].reset_index(drop=True)


def runs_pivot(comparison: pd.DataFrame, value: str = "median_ms") -> pd.DataFrame:
    """``comparison`` (from :func:`runs_comparison`) as a table: one row per (sizes, variant),
    one column per run in time order, cells ``value`` (empty where a run skipped a variant)."""
    if value not in comparison.columns:
        raise ValueError(f"value={value!r} is not a column; valid: {', '.join(comparison.columns)}")
    order = list(dict.fromkeys(comparison.sort_values("timestamp")["run"]))
    table = comparison.pivot_table(index=["sizes", "variant"], columns="run", values=value,
                                   aggfunc="first")
    return table.reindex(columns=order)


def size_distance(a: Sizes, b: Sizes) -> float:
    """Distance between two sizes of one problem: the Euclidean norm of the log-ratios of
    each dimension (natural log; 0 for equal sizes, ln 2 for one dimension doubled)."""
    if set(a) != set(b):
        raise ValueError(f"sizes {fmt_sizes(a)} and {fmt_sizes(b)} name different dimensions")
    return math.sqrt(sum(math.log(a[k] / b[k]) ** 2 for k in a))


def nearest_records(rec: pd.DataFrame, problem: Problem, sizes: Sizes,
                    variants: list[str]) -> pd.DataFrame:
    """For each of ``variants``, its recorded result (its newest clean measurement,
    :func:`fusedkit.results.newest_clean`) at the recorded sizes nearest to ``sizes``
    (:func:`size_distance`), the newest among equals.

    Columns: variant, sizes, distance, device, date, commit, run_id, tier, median_ms,
    rel_error, speedup (within its run). A variant never cleanly recorded on a GPU has no row.
    """
    _check_frame(rec)
    sizes = problem.sizes(sizes)
    df = newest_clean(rec, problem)
    df = df[df["variant"].isin(variants)]

    def distance(text: str) -> float:
        try:
            return size_distance(problem.sizes(parse_sizes(text)), sizes)
        except (SizeError, ValueError):
            return np.inf   # sizes of another shape of the problem: never "near"

    df = df.assign(distance=df["sizes"].map(distance).astype(float))
    df = df[np.isfinite(df["distance"])]
    df = df.sort_values(["distance", "timestamp"], ascending=[True, False]).groupby("variant").head(1)
    df = df.assign(date=df["timestamp"].dt.strftime("%Y-%m-%d %H:%M UTC"))
    order = {v: i for i, v in enumerate(variants)}
    df = df.assign(_o=df["variant"].map(order)).sort_values("_o")
    return df[["variant", "sizes", "distance", "device", "date", "commit", "run_id", "tier",
               "median_ms", "rel_error", "speedup"]].reset_index(drop=True)
