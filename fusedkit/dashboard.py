"""The results dashboard's data: every record in ``data/``, shaped per problem.

Three views, all computed from the typed frame that :func:`fusedkit.records.read_records`
returns, so they work the same on the committed records and on a synthetic frame:

- :func:`best_per_tier`: per device and sizes, the best variant of each precision tier among
  every variant's newest clean measurement (:func:`fusedkit.results.newest_clean`), with its
  speed-up over the eager baseline *of its own run*;
- :func:`runs_comparison`: every run's time of every variant, for comparisons across runs,
  commits and devices (times only; ratios stay within a run);
- :func:`nearest_records`: the recorded rows whose sizes are nearest to some sizes (the
  live widgets show them beside what ran on the CPU);
- :func:`inventory`: what the records hold per problem, and how many rows are left out of
  every result (uncommitted code, no GPU timing, export checks).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from fusedkit import records
from fusedkit.precision import TIERS
from fusedkit.results import DIRTY, EXPORT, add_speedup, best_by_tier, clean_rows, newest_clean, run_label
from fusedkit.problems import Problem, SizeError, Sizes, fmt_sizes, parse_sizes



def read_all(folder: str | os.PathLike[str] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Every records-schema CSV file in ``folder`` (default: the folder of the records file),
    concatenated, and one note per ``*.csv`` left out because it has another schema.

    Each file is read (and validated) by :func:`fusedkit.records.read_records`.
    """
    folder = Path(folder) if folder is not None else records.default_path().parent
    frames, skipped = [], []
    for path in sorted(folder.glob("*.csv")):
        try:
            with path.open(encoding="utf-8") as f:
                header = f.readline().strip().split(",")
        except UnicodeDecodeError:
            records.read_records(path)   # a RecordsError naming the file and line
        if tuple(header) != records.COLUMNS:
            skipped.append(f"{path.name}: not a records file (columns {', '.join(header[:4])}, ...)")
            continue
        frames.append(records.read_records(path))
    if not frames:
        # read_records gives a missing file as an empty frame with the typed columns
        return records.read_records(folder / ".no-records.csv"), skipped
    return pd.concat(frames, ignore_index=True), skipped


def inventory(rec: pd.DataFrame) -> pd.DataFrame:
    """What a records frame holds, one row per problem (``device`` holds the device ceilings):
    ``rows``; ``clean`` (the rows a result may come from, :func:`fusedkit.results.clean_rows`);
    the rows left out, by reason: ``uncommitted`` (a ``+dirty`` commit: the code timed cannot be
    read back), ``not_gpu_timed`` (CPU or wall-clock timings, or no time), ``export_checks``
    (an exported file timed beside its variant); then, of the clean rows, ``runs``, ``variants``
    (distinct names), ``devices`` and the dates of the ``first`` and ``last`` (YYYY-MM-DD).
    A row may be left out for more than one reason. Empty (same columns) for no records."""
    _check_frame(rec)
    cols = ["rows", "clean", "uncommitted", "not_gpu_timed", "export_checks", "runs", "variants",
            "devices", "first", "last"]
    if rec.empty:
        return pd.DataFrame(columns=cols).rename_axis("problem")
    clean = clean_rows(rec)
    gpu = (rec["timer"] == "cuda-events") & (rec["median_ms"] > 0)
    out = pd.DataFrame({
        "rows": rec.groupby("problem").size(),
        "clean": clean.groupby("problem").size(),
        "uncommitted": rec[rec["commit"].str.endswith(DIRTY)].groupby("problem").size(),
        "not_gpu_timed": rec[~gpu].groupby("problem").size(),
        "export_checks": rec[rec["variant"].str.startswith(EXPORT)].groupby("problem").size(),
        "runs": clean.groupby("problem")["run_id"].nunique(),
        "variants": clean.groupby("problem")["variant"].nunique(),
    }).fillna(0).astype(int)
    out["devices"] = clean.groupby("problem")["device"].agg(lambda d: ", ".join(sorted(set(d))))
    stamps = clean.groupby("problem")["timestamp"]
    out["first"] = stamps.min().dt.strftime("%Y-%m-%d")
    out["last"] = stamps.max().dt.strftime("%Y-%m-%d")
    out = out.reindex(columns=cols)
    out[["devices", "first", "last"]] = out[["devices", "first", "last"]].fillna("")
    return out.rename_axis("problem")


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

    Columns, the numbers first so that a narrow page shows them: variant, tier, median_ms,
    rel_error, speedup (within its run), then where it was measured: sizes, distance, device
    and date (the day; the run and commit ids stay in the records, out of a reader's table). A
    variant never cleanly recorded on a GPU has no row.
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
    df = df.assign(date=df["timestamp"].dt.strftime("%Y-%m-%d"))
    order = {v: i for i, v in enumerate(variants)}
    df = df.assign(_o=df["variant"].map(order)).sort_values("_o")
    return df[["variant", "tier", "median_ms", "rel_error", "speedup", "sizes", "distance", "device",
               "date"]].reset_index(drop=True)
