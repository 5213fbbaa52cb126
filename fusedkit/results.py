"""Read measurements back from ``data/``: the latest run of a ladder, and the ceilings
measured in that run, shaped for the notebooks' tables and plots.

Speed-ups are only ever taken within one run (one ``run_id``), against that run's eager.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fusedkit import records
from fusedkit.problems import Problem, Sizes, fmt_sizes


def latest_run(problem: Problem, sizes: Sizes | None = None, *, device: str = "",
               path: str | Path | None = None) -> pd.DataFrame:
    """Rows of the most complete recorded run of ``problem`` that timed its eager baseline.

    ``sizes`` defaults to the problem's defaults; ``device`` filters on a substring of the
    device name ("H200"). Adds ``speedup`` (eager's time over each variant's) and the
    ladder's ``step`` and ``title``. Empty when nothing matches.
    """
    df = records.read_records(path or records.default_path())
    want = fmt_sizes(problem.sizes(sizes or problem.defaults))
    df = df[(df["problem"] == problem.key) & (df["sizes"] == want)
            & df["device"].str.contains(device, regex=False)]
    runs = df.loc[df["variant"] == "eager", ["run_id", "timestamp"]]
    if runs.empty:   # same columns as a real run, so callers need no special case
        return df.iloc[0:0].assign(speedup=pd.Series(dtype=float), step=pd.Series(dtype=float),
                                   title=pd.Series(dtype=str))
    # The most complete run (most of the ladder's variants), the newest among equals: a
    # partial re-run of two steps must not hide the full ladder.
    counts = df[df["variant"].isin(list(problem.variants))].groupby("run_id")["variant"].nunique()
    runs = runs.assign(n=runs["run_id"].map(counts)).sort_values(["n", "timestamp"])
    run = df[df["run_id"] == runs["run_id"].iloc[-1]].copy()
    eager = float(run.loc[run["variant"] == "eager", "median_ms"].iloc[0])
    run["speedup"] = eager / run["median_ms"]
    steps = {v.slug: (v.number, v.title) for v in problem.variants.values()}
    run["step"] = run["variant"].map(lambda s: steps.get(s, (None, ""))[0])
    run["title"] = run["variant"].map(lambda s: steps.get(s, (None, ""))[1])
    return run.reset_index(drop=True)


def ladder_table(run: pd.DataFrame) -> pd.DataFrame:
    """The ladder's rows of a run as the notebooks show them (components left out)."""
    rows = run[run["step"].notna()].sort_values(["step", "median_ms"], ascending=[True, False])
    return rows.rename(columns={"median_ms": "ms", "tflops": "TFLOP/s", "pct_of_floor": "% of floor",
                                "rel_error": "rel. error", "peak_mem_mb": "call memory MB"})[
        ["step", "variant", "tier", "ms", "p10_ms", "p90_ms", "TFLOP/s", "% of floor",
         "rel. error", "speedup", "call memory MB"]].reset_index(drop=True)


def run_label(run: pd.DataFrame) -> str:
    """"NVIDIA H200, 2026-11-29 09:21 UTC, commit 814a63c": where a run's numbers come from."""
    if run.empty:
        return "no recorded run"
    r = run.iloc[0]
    return f"{r['device']}, {r['timestamp']:%Y-%m-%d %H:%M} UTC, commit {r['commit']}"


def run_ceilings(run: pd.DataFrame, path: str | Path | None = None) -> dict[str, float]:
    """Copy bandwidth (GB/s) and bf16 matmul rate (TFLOP/s) measured in the same run."""
    if run.empty:
        return {}
    df = records.read_records(path or records.default_path())
    same = df[df["run_id"] == run["run_id"].iloc[0]]
    out = {}
    for variant, col, key in (("d2d_copy", "gbps", "copy_gbps"), ("bf16_matmul", "tflops", "bf16_tflops")):
        hit = same.loc[same["variant"] == variant, col]
        if not hit.empty:
            out[key] = float(hit.iloc[0])
    return out
