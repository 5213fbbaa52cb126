"""Read measurements back from ``data/``: the latest run of a ladder, and the ceilings
measured in that run, shaped for the notebooks' tables and plots.

Speed-ups are only ever taken within one run (one ``run_id``), against that run's eager.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from fusedkit import records
from fusedkit.precision import KERNEL_TIERS
from fusedkit.problems import Problem, Sizes, fmt_sizes, parse_sizes


def add_speedup(df: pd.DataFrame, by: tuple[str, ...] = ("run_id", "sizes")) -> pd.DataFrame:
    """``df`` plus ``speedup``: eager's time in the same group (by default the same run and
    sizes) over each row's ``median_ms``; NaN where the group has no timed eager row.

    The one definition of a speed-up in fusedkit: every table, plot and report uses it.
    """
    keys = [c for c in by if c in df.columns]
    if df.empty or "median_ms" not in df.columns or "variant" not in df.columns:
        return df.assign(speedup=pd.Series(dtype=float, index=df.index))
    eager = df[(df["variant"] == "eager") & df["median_ms"].notna()]
    if not keys:
        base = float(eager["median_ms"].iloc[0]) if not eager.empty else float("nan")
        return df.assign(speedup=base / df["median_ms"])
    first = eager.groupby(keys)["median_ms"].first().rename("_eager_ms")
    out = df.join(first, on=keys)
    return out.assign(speedup=out["_eager_ms"] / out["median_ms"]).drop(columns="_eager_ms")


def main_run_id(df: pd.DataFrame, problem: Problem) -> str | None:
    """Of the runs in ``df`` (one problem, sizes and device) that timed eager, the most complete
    one (most of the ladder's variants), the newest among equals: a partial re-run of two steps
    must not hide the full ladder. None when no run timed eager."""
    runs = df.loc[df["variant"] == "eager", ["run_id", "timestamp"]]
    if runs.empty:
        return None
    counts = df[df["variant"].isin(list(problem.variants))].groupby("run_id")["variant"].nunique()
    runs = runs.assign(n=runs["run_id"].map(counts)).sort_values(["n", "timestamp"])
    return str(runs["run_id"].iloc[-1])


def best_of_run(run: pd.DataFrame, problem: Problem) -> dict[str, pd.Series]:
    """The one definition of "the best" in fusedkit: in one run's rows (with ``speedup``), for
    each tier a kernel of ours reaches (:data:`fusedkit.precision.KERNEL_TIERS`), the fastest of
    our variants (PyTorch's baselines never count) that meets at least that tier: a stricter
    tier meets the looser ones. Tiers no variant reaches are left out."""
    ours = {v.slug for v in problem.variants.values() if not v.baseline}
    rows = run[run["variant"].isin(ours) & run["median_ms"].notna()]
    best = {}
    for rank, tier in enumerate(KERNEL_TIERS):
        meets = rows[rows["tier"].isin(KERNEL_TIERS[:rank + 1])]
        if not meets.empty:
            best[tier] = meets.loc[meets["median_ms"].idxmin()]
    return best


def latest_run(problem: Problem, sizes: Sizes | None = None, *, device: str = "",
               path: str | Path | None = None, having: Sequence[str] = (),
               newest: bool = False) -> pd.DataFrame:
    """Rows of the most complete recorded run of ``problem`` that timed its eager baseline.

    ``sizes`` defaults to the problem's defaults; ``device`` filters on a substring of the
    device name ("H200"); ``having`` keeps only runs that recorded every variant named there
    (the run that timed a given step, when the most complete run did not); ``newest`` takes
    the newest of those runs instead of the most complete (a step whose kernel changed since a
    fuller run timed it). Adds ``speedup`` (eager's time over each variant's, same run) and the
    ladder's ``step`` and ``title``. Empty when nothing matches.
    """
    df = records.read_records(path or records.default_path())
    want = fmt_sizes(problem.sizes(sizes or problem.defaults))
    df = df[(df["problem"] == problem.key) & (df["sizes"] == want)
            & df["device"].str.contains(device, regex=False)]
    for slug in having:
        df = df[df["run_id"].isin(df.loc[df["variant"] == slug, "run_id"])]
    run_id = main_run_id(df, problem)
    if newest and run_id is not None:
        timed = df.loc[df["variant"] == "eager", ["run_id", "timestamp"]].sort_values("timestamp")
        run_id = str(timed["run_id"].iloc[-1])
    if run_id is None:   # same columns as a real run, so callers need no special case
        return df.iloc[0:0].assign(speedup=pd.Series(dtype=float), step=pd.Series(dtype=float),
                                   title=pd.Series(dtype=str))
    run = add_speedup(df[df["run_id"] == run_id])
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


def run_label(run: pd.DataFrame | pd.Series) -> str:
    """"NVIDIA H200, 2026-11-29 09:21 UTC, commit 814a63c": where a run's numbers come from,
    from a run's rows or from one of them. The one label of a run in fusedkit."""
    if isinstance(run, pd.DataFrame):
        if run.empty:
            return "no recorded run"
        run = run.iloc[0]
    return f"{run['device']}, {run['timestamp']:%Y-%m-%d %H:%M} UTC, commit {run['commit']}"


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


def sweep_series(problem: Problem, dim: str, device: str = "H200", path: str | Path | None = None,
                 *, fixed: Mapping[str, int] | None = None, having: Sequence[str] = (),
                 newest: bool = False) -> pd.DataFrame:
    """The most complete recorded size sweep of ``problem`` over ``dim``, one row per
    (variant, point).

    A sweep is a run (one ``run_id``) that recorded the problem at more than one ``sizes``;
    of the runs in which ``dim`` takes several values while every other dimension keeps one
    value, the one that timed the most variants is read, the newest among equals (as
    :func:`main_run_id` does: a short sweep of two new steps must not hide the full one).
    ``having`` keeps only runs that timed every variant named there (to read the sweep that
    measured a given step); ``fixed`` first narrows the rows to given values of the other
    dimensions, which picks a slice out of a cross-product sweep. ``device`` filters on a
    substring of the device name. ``newest`` reads the newest matching sweep instead of the
    most complete (a step whose kernel changed after the full sweep, as :func:`latest_run`).

    Columns: variant, ``dim``, median_ms, pct_of_floor (%), tflops (TFLOP/s), gbps (GB/s),
    speedup (eager's time at the same point over the variant's; NaN where eager was not
    timed), then step, tier, p10_ms, p90_ms, sizes and the run's run_id, device, timestamp
    and commit (so :func:`run_label` works on it). Sorted in ladder order, then by ``dim``.
    Empty (same columns) when no sweep matches.
    """
    names = [d.name for d in problem.dims]
    if dim not in names:
        raise ValueError(f"dim={dim!r} is not a size of {problem.key}; valid: {', '.join(names)}")
    cols = ["variant", dim, "median_ms", "pct_of_floor", "tflops", "gbps", "speedup", "step", "tier",
            "p10_ms", "p90_ms", "sizes", "run_id", "device", "timestamp", "commit"]
    df = records.read_records(path or records.default_path())
    df = df[(df["problem"] == problem.key) & df["device"].str.contains(device, regex=False)
            & df["variant"].isin(list(problem.variants))]
    if df.empty:
        return _empty_series(cols, dim)
    parsed = pd.DataFrame([parse_sizes(s) for s in df["sizes"]], index=df.index)
    df = pd.concat([df, parsed.reindex(columns=names)], axis=1)
    others = [n for n in names if n != dim]
    for name, value in (fixed or {}).items():
        if name not in others:
            raise ValueError(f"fixed={{{name!r}: {value!r}}}: fixed names the other sizes of "
                             f"{problem.key}; valid: {', '.join(others)}")
        df = df[df[name] == value]
    per_run = df.groupby("run_id").agg(points=(dim, "nunique"), stamp=("timestamp", "max"),
                                       variants=("variant", "nunique"),
                                       **{f"n_{o}": (o, "nunique") for o in others})
    ok = (per_run["points"] > 1)
    for o in others:
        ok &= per_run[f"n_{o}"] == 1
    for slug in having:
        ok &= per_run.index.isin(df.loc[df["variant"] == slug, "run_id"])
    runs = per_run[ok].sort_values(["stamp"] if newest else ["variants", "stamp"])
    if runs.empty:
        return _empty_series(cols, dim)
    run = add_speedup(df[df["run_id"] == runs.index[-1]])
    run["step"] = run["variant"].map({v.slug: v.number for v in problem.variants.values()})
    run[dim] = run[dim].astype(int)
    place = {v.slug: i for i, v in enumerate(problem.ladder())}   # ladder order: eager first
    run = run.assign(_place=run["variant"].map(place)).sort_values(["_place", dim])
    return run[cols].reset_index(drop=True)


def sweep_summary(series: pd.DataFrame, dim: str, flat: float = 1.25) -> pd.DataFrame:
    """One row per variant of a sweep series (:func:`sweep_series`): its time at the smallest
    and the largest ``dim``, ``flat_up_to`` (the largest ``dim`` whose time is within ``flat``
    times the variant's fastest point: up to there more work is nearly free, the kernel pays a
    fixed cost, a launch or the weights' bytes; a maximum rather than the first rise, so one
    noisy small point does not end it), its best % of floor with the ``dim`` where it was
    reached, and its speed-up over eager at the largest point. Ladder order kept.
    """
    if series.empty:
        raise ValueError("series is empty: no recorded sweep to summarise (see sweep_series)")
    if flat <= 1:
        raise ValueError(f"flat={flat}: a time ratio above 1 (1.25 = 25% above the fastest point)")
    lo, hi = int(series[dim].min()), int(series[dim].max())   # the series' ends (NaN if skipped)
    rows = []
    for variant, g in series.groupby("variant", sort=False):
        at = g.set_index(dim)
        cheap = g.loc[g["median_ms"] <= flat * g["median_ms"].min(), dim]
        best = g.loc[g["pct_of_floor"].idxmax()] if g["pct_of_floor"].notna().any() else None
        rows.append({"variant": variant,
                     f"ms_at_{lo}": at["median_ms"].get(lo, float("nan")),
                     f"ms_at_{hi}": at["median_ms"].get(hi, float("nan")),
                     "flat_up_to": int(cheap.max()),
                     "best_pct_of_floor": None if best is None else best["pct_of_floor"],
                     f"best_at_{dim}": None if best is None else int(best[dim]),
                     "speedup_at_largest": at["speedup"].get(hi, float("nan"))})
    return pd.DataFrame(rows).set_index("variant")


def _empty_series(cols: list[str], dim: str) -> pd.DataFrame:
    """A sweep series with no rows, typed like a real one."""
    out = pd.DataFrame({c: pd.Series(dtype=str) for c in cols})
    for c in (dim, "step"):
        out[c] = pd.Series(dtype="int64")
    for c in ("median_ms", "pct_of_floor", "tflops", "gbps", "speedup", "p10_ms", "p90_ms"):
        out[c] = pd.Series(dtype=float)
    return out
