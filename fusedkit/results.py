"""Read measurements back from ``data/``: one definition of a result, of the best, of the noise, of a
route and of the by-batch range, for the notebooks, the report index, the export and the README.

A variant's *result* is its newest *clean* measurement (a GPU timing with CUDA events, of a commit
without ``+dirty``, not an ``export:`` row) in a run that timed eager at the same sizes; its speed-up
is eager's time in that run over its own. Two times differ only beyond their spread (:func:`level`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from fusedkit import problems, records
from fusedkit.ceilings import add_pct_of_measured, ceilings_frame
from fusedkit.counters import read_counters
from fusedkit.precision import KERNEL_TIERS, PRECISIONS
from fusedkit.problems import Problem, Sizes, fmt_sizes, parse_sizes

COPY_FOR = "d2d_copy_for_"
"""The prefix of a component's same-size copy, timed in the same run as the component."""

def add_speedup(df: pd.DataFrame, by: tuple[str, ...] = ("run_id", "sizes")) -> pd.DataFrame:
    """``df`` plus ``speedup``: eager's time in the same group (run and sizes) over each row's; NaN
    where the group timed no eager."""
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


def clean_rows(rec: pd.DataFrame) -> pd.DataFrame:
    """The rows of a records frame that are clean measurements (module docstring)."""
    ok = ((rec["timer"] == "cuda-events") & (rec["median_ms"] > 0)
          & ~rec["commit"].str.endswith("+dirty") & ~rec["variant"].str.startswith("export:"))
    return rec[ok]


def _with_steps(rows: pd.DataFrame, problem: Problem) -> pd.DataFrame:
    """``rows`` (with ``speedup``) plus ``eager_ms`` and the ladder's ``step`` (number) and ``title``
    of each variant (NaN and "" for a component)."""
    steps = {v.slug: (v.number, v.title) for v in problem.variants.values()}
    return rows.assign(eager_ms=rows["speedup"] * rows["median_ms"],
                       step=rows["variant"].map(lambda s: steps.get(s, (None, ""))[0]).astype(float),
                       title=rows["variant"].map(lambda s: steps.get(s, (None, ""))[1]))


def _ladder_order(rows: pd.DataFrame, problem: Problem, *keys: str) -> pd.DataFrame:
    place = {v.slug: i for i, v in enumerate(problem.ladder())}   # eager first
    rows = rows.assign(_place=rows["variant"].map(place))
    return rows.sort_values([*keys, "_place"], kind="stable").drop(columns="_place")


def newest_clean(rec: pd.DataFrame, problem: Problem, *, as_of: object = None) -> pd.DataFrame:
    """Each device's, sizes' and ladder variant's result (module docstring), with ``speedup``,
    ``eager_ms``, ``step`` and ``title``; ``as_of`` keeps rows taken by then."""
    rows = clean_rows(rec[rec["problem"] == problem.key])
    if as_of is not None:
        t = pd.Timestamp(as_of)
        rows = rows[rows["timestamp"] <= (t if t.tzinfo else t.tz_localize("UTC"))]
    rows = add_speedup(rows)     # among clean rows: a dirty eager gives no one a speed-up
    rows = rows[rows["variant"].isin(list(problem.variants)) & rows["speedup"].notna()]
    newest = rows.sort_values("timestamp", kind="stable").groupby(["device", "sizes", "variant"]).tail(1)
    return _ladder_order(_with_steps(newest, problem), problem, "device", "sizes").reset_index(drop=True)


def _read(path: str | Path | None) -> pd.DataFrame:
    return records.read_records(path or records.default_path())


def _at(rec: pd.DataFrame, problem: Problem, sizes: Sizes | None, device: str) -> pd.DataFrame:
    """The rows of ``problem`` at ``sizes`` (default: the problem's) on a device whose name
    contains ``device``."""
    want = fmt_sizes(problem.sizes(sizes or problem.defaults))
    return rec[(rec["problem"] == problem.key) & (rec["sizes"] == want)
               & rec["device"].str.contains(device, regex=False)]


def recorded(problem: Problem, sizes: Sizes | None = None, *, device: str = "H200",
             path: str | Path | None = None, as_of: object = None) -> pd.DataFrame:
    """The result of every ladder variant of ``problem`` at ``sizes`` (default its own) on a device
    whose name contains ``device``, with ``pct_of_measured``; ``as_of``: the records as they stood."""
    rows = newest_clean(_at(_read(path), problem, sizes, device), problem, as_of=as_of)
    return add_pct_of_measured(rows, problem, path=path)


def recorded_by_precision(problem: Problem, precisions: Sequence[str] = (), *,
                          path: str | Path | None = None) -> pd.DataFrame:
    """:func:`recorded` with each variant's ``precision`` and ``problem``; ``precisions`` keeps
    those arithmetics only."""
    unknown = [p for p in precisions if p not in PRECISIONS]
    if isinstance(precisions, str) or unknown:
        raise ValueError(f"precisions={precisions!r}: pass a list of precisions, e.g. ['fp16']; "
                         f"valid: {', '.join(PRECISIONS)}")
    rows = recorded(problem, path=path)
    rows = rows.assign(precision=rows["variant"].map(lambda s: problem.variant(s).precision).astype(str),
                       problem=problem.key)
    if precisions:
        rows = rows[rows["precision"].isin(list(precisions))]
    return rows.reset_index(drop=True)


def ours(problem: Problem, slug: str) -> bool:
    """True for a step whose GEMM we wrote: not PyTorch's (a baseline) and not cuBLAS's
    (a ``cublas_`` step, ours only in its epilogue). Only these count as "the best" of a tier."""
    return not problem.variant(slug).baseline and not slug.startswith("cublas")


def best_by_tier(rows: pd.DataFrame, problem: Problem) -> dict[str, pd.Series]:
    """The one definition of "the best": for each tier of :data:`KERNEL_TIERS`, the step of ours
    meeting at least that tier with the highest same-run speed-up in ``rows`` (one device, sizes)."""
    if rows.empty:
        return {}
    for col in ("device", "sizes"):
        if col in rows.columns and rows[col].nunique() > 1:
            raise ValueError(f"rows hold {rows[col].nunique()} values of {col} "
                             f"({', '.join(sorted(set(rows[col])))}); pass rows of one {col}")
    mine = pd.Series([s in problem.variants and ours(problem, s) for s in rows["variant"]], index=rows.index)
    rows = rows[mine & rows["speedup"].notna()]
    best = {}
    for rank, tier in enumerate(KERNEL_TIERS):
        meets = rows[rows["tier"].isin(KERNEL_TIERS[:rank + 1])]
        if not meets.empty:
            best[tier] = meets.loc[meets["speedup"].idxmax()]
    return best


def level(a: pd.Series | Mapping, b: pd.Series | Mapping) -> bool:
    """The one noise rule: True when the p10-p90 ranges of ``a`` and ``b`` (else their ``median_ms``)
    overlap: then neither is faster, whatever their medians say."""
    lo = lambda r: r["p10_ms"] if pd.notna(r.get("p10_ms")) else r["median_ms"]   # noqa: E731
    hi = lambda r: r["p90_ms"] if pd.notna(r.get("p90_ms")) else r["median_ms"]   # noqa: E731
    return not (hi(a) < lo(b) or hi(b) < lo(a))


def page_device(problem: Problem, path: str | Path | None = None) -> str:
    """The device whose records a page of ``problem`` shows without a GPU: the newest with Nsight
    counters of the problem (time and counters from one device), else the newest; "" when none."""
    rows = clean_rows(_read(path))
    rows = rows[rows["problem"] == problem.key].sort_values("timestamp", kind="stable")
    counted = set(read_counters().query("problem == @problem.key")["device"])
    with_counters = rows[rows["device"].isin(counted)]
    pick = with_counters if not with_counters.empty else rows
    return str(pick["device"].iloc[-1]) if not pick.empty else ""


_TIER_ORDER = ("reference", *KERNEL_TIERS)


def best_per_tier(rec: pd.DataFrame, problem: Problem | str, sizes: Sizes | None = None) -> pd.DataFrame:
    """Per device and sizes, eager (the reference) and the best of ours per tier among the newest
    clean rows of ``rec`` (:func:`best_by_tier`); ``variant_tier`` is the kernel's own tier."""
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
    best = best.assign(tier_rank=best["tier"].map(_TIER_ORDER.index))
    return best.sort_values(["device", "sizes", "tier_rank"])[cols].reset_index(drop=True)


def caption(rows: pd.DataFrame | pd.Series) -> str:
    """"NVIDIA H200, 2026-11-29 to 2026-11-30": the devices and dates of a table's rows."""
    if isinstance(rows, pd.Series):
        rows = rows.to_frame().T
    if rows.empty:
        return "no recorded run"
    devices = " and ".join(dict.fromkeys(str(d) for d in rows["device"]))
    stamps = pd.to_datetime(rows["timestamp"], utc=True)
    first, last = f"{stamps.min():%Y-%m-%d}", f"{stamps.max():%Y-%m-%d}"
    return f"{devices}, {first}" if first == last else f"{devices}, {first} to {last}"


def _newest_run(rows: pd.DataFrame, slugs: Sequence[str]) -> str | None:
    """The newest run of ``rows`` that timed every one of ``slugs``; None when none did."""
    if isinstance(slugs, str):
        raise TypeError(f"slugs={slugs!r}: pass a list of names, e.g. [{slugs!r}]")
    timed = rows[rows["run_id"].isin(_runs_timing(rows, slugs))]
    return str(timed.sort_values("timestamp", kind="stable")["run_id"].iloc[-1]) if len(timed) else None


def _runs_timing(rows: pd.DataFrame, slugs: Sequence[str]) -> set[str]:
    """The runs of ``rows`` that timed every one of ``slugs``."""
    return set(rows["run_id"]).intersection(*(rows.loc[rows["variant"] == s, "run_id"] for s in slugs))


def same_run(problem: Problem, slugs: Sequence[str], sizes: Sizes | None = None, *,
             device: str = "H200", path: str | Path | None = None) -> pd.DataFrame:
    """Every row of the newest clean run that timed each of ``slugs`` at ``sizes`` (a comparison on
    one GPU state), with ``speedup``, ``step`` and ``title``; empty when none did."""
    rows = clean_rows(_at(_read(path), problem, sizes, device))
    run = _with_steps(add_speedup(rows[rows["run_id"] == _newest_run(rows, slugs)]), problem)
    return _ladder_order(run, problem).reset_index(drop=True)


def run_spread(problem: Problem, sizes: Sizes | None = None, *, device: str = "H200",
               path: str | Path | None = None) -> pd.DataFrame:
    """Every clean measurement of each variant timed in at least three runs, against the variant's
    median over them (``vs_median_pct``), ``recorded`` marking its result."""
    min_runs = 3
    rows = clean_rows(_at(_read(path), problem, sizes, device))
    rows = rows[rows["variant"].isin(list(problem.variants))]
    rows = rows.sort_values("timestamp", kind="stable").groupby(["device", "run_id", "variant"]).tail(1)
    runs = rows.groupby(["device", "variant"])["run_id"].transform("nunique")
    rows = rows[runs >= min_runs].assign(runs=runs[runs >= min_runs])
    typical = rows.groupby(["device", "variant"])["median_ms"].transform("median")
    rows = rows.assign(problem=problem.key, median_of_runs=typical,
                       vs_median_pct=100.0 * (rows["median_ms"] / typical - 1.0))
    chosen = recorded(problem, sizes, device=device, path=path)
    picked = set(zip(chosen["device"], chosen["variant"], chosen["run_id"]))
    rows = rows.assign(recorded=[k in picked for k in zip(rows["device"], rows["variant"], rows["run_id"])])
    cols = ["problem", "device", "variant", "run_id", "timestamp", "commit", "median_ms", "runs",
            "median_of_runs", "vs_median_pct", "recorded"]
    if rows.empty:
        return pd.DataFrame({c: pd.Series(dtype=bool if c == "recorded" else float if c in
                                          ("median_ms", "median_of_runs", "vs_median_pct") else object)
                             for c in cols})
    return _ladder_order(rows, problem, "device")[cols].reset_index(drop=True)


def components(problem: Problem, sizes: Sizes | None = None, *, device: str = "H200",
               path: str | Path | None = None, every_run: bool = False) -> pd.DataFrame:
    """The components of ``problem`` (a kernel timed alone), each with its same-size copy of the
    same run (``copy_ms``, ``copy_gbps``, ``pct_of_copy``): the newest, or every run's."""
    rows = clean_rows(_at(_read(path), problem, sizes, device))
    copies = rows[rows["variant"].str.startswith(COPY_FOR)]
    copies = copies.assign(variant=copies["variant"].str.removeprefix(COPY_FOR))
    copies = copies.set_index(["run_id", "variant"])[["median_ms", "gbps"]]
    copies.columns = ["copy_ms", "copy_gbps"]
    # A component is a plain name; a probe's config (step@config) or launch (step:launch) is not.
    parts = rows[~rows["variant"].isin(list(problem.variants))
                 & ~rows["variant"].str.startswith(COPY_FOR) & ~rows["variant"].str.contains("[@:]")]
    parts = parts.join(copies, on=["run_id", "variant"])
    parts = parts.assign(pct_of_copy=100 * parts["gbps"] / parts["copy_gbps"])
    parts = parts.sort_values("timestamp", kind="stable")
    if not every_run:
        parts = parts.groupby(["device", "variant"]).tail(1).sort_values("variant", kind="stable")
    return parts[["variant", "median_ms", "gbps", "copy_ms", "copy_gbps", "pct_of_copy", "notes", "sizes",
                  "run_id", "commit", "timestamp", "device"]].reset_index(drop=True)


def same_run_components(problem: Problem, slugs: Sequence[str], sizes: Sizes | None = None, *,
                        device: str = "H200", path: str | Path | None = None) -> pd.DataFrame:
    """Components side by side: those of the newest run that timed every one of ``slugs``, in that
    order."""
    every = components(problem, sizes, device=device, path=path, every_run=True)
    newest = _newest_run(every, slugs)
    if newest is None:
        return every.iloc[0:0].reset_index(drop=True)
    run = every[(every["run_id"] == newest) & every["variant"].isin(list(slugs))]
    order = {s: i for i, s in enumerate(slugs)}
    return run.sort_values("variant", key=lambda v: v.map(order)).reset_index(drop=True)


def ladder_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The ladder's rows (a :func:`recorded` frame) as a reader compares them, in step order, with
    when each was recorded (and where, when the rows hold several devices)."""
    rows = rows[rows["step"].notna()].sort_values(["step", "median_ms"], ascending=[True, False])
    one = rows["device"].nunique() <= 1
    rows = rows.assign(recorded=[f"{r['timestamp']:%Y-%m-%d}" if one else run_short_label(r) for _, r in rows.iterrows()],
                       pct_of_measured=rows.get("pct_of_measured", float("nan")))
    return rows.rename(columns={"median_ms": "ms", "pct_of_floor": "% of floor", "pct_of_measured": "% of measured",
                                "rel_error": "rel. error"})[
        ["step", "variant", "tier", "ms", "p10_ms", "p90_ms", "% of floor", "% of measured", "rel. error",
         "speedup", "recorded"]].reset_index(drop=True)


def _one_row(run: pd.DataFrame | pd.Series) -> pd.Series | None:
    """The row that labels ``run``: the row itself, or the first of the rows of one run (ValueError
    for several runs)."""
    if isinstance(run, pd.Series):
        return run
    if run.empty:
        return None
    if "run_id" in run.columns and run["run_id"].nunique() > 1:
        raise ValueError(f"the rows come from {run['run_id'].nunique()} runs: label each row "
                         "(run_label(row)) or caption the table (results.caption(rows))")
    return run.iloc[0]


def run_label(run: pd.DataFrame | pd.Series) -> str:
    """"NVIDIA H200, 2026-11-29 09:21 UTC, commit 814a63c": where one run's numbers come from."""
    row = _one_row(run)
    if row is None:
        return "no recorded run"
    return f"{row['device']}, {row['timestamp']:%Y-%m-%d %H:%M} UTC, commit {row['commit']}"


def run_short_label(run: pd.DataFrame | pd.Series) -> str:
    """"H200, 2026-11-30": a run's device and day, for a table cell."""
    row = _one_row(run)
    if row is None:
        return "no recorded run"
    device = str(row["device"]).removeprefix("NVIDIA ")
    return f"{device}, {row['timestamp']:%Y-%m-%d}"


def run_ceilings(rows: pd.DataFrame, path: str | Path | None = None) -> dict[str, float]:
    """``copy_gbps`` and ``bf16_tflops`` measured beside ``rows`` (the newest of their runs'); {}
    for none."""
    if rows.empty:
        return {}
    have = ceilings_frame(clean_rows(_read(path)))
    have = have[have["run_id"].isin(set(rows["run_id"]))].sort_values("timestamp", kind="stable")
    out = {}
    for key, pick in (("copy_gbps", have["kind"] == "copy"),
                      ("bf16_tflops", (have["kind"] == "gemm") & (have["operands"] == "bf16"))):
        hit = have.loc[pick, "rate"].dropna()
        if not hit.empty:
            out[key] = float(hit.iloc[-1])
    return out


def sweep_series(problem: Problem, dim: str, device: str | None = None, path: str | Path | None = None,
                 *, having: Sequence[str] = ()) -> pd.DataFrame:
    """The newest of :func:`every_sweep`: one row per variant and point, with speed-ups."""
    every = every_sweep(problem, dim, having=having, device=device, path=path)
    return every[every["run_id"] == every["run_id"].iloc[-1]].reset_index(drop=True) if len(every) else every


def _series_columns(dim: str) -> list[str]:
    """The columns of a sweep series over ``dim`` (:func:`sweep_series`)."""
    return ["variant", dim, "median_ms", "pct_of_floor", "tflops", "gbps", "speedup", "step", "tier",
            "p10_ms", "p90_ms", "sizes", "run_id", "device", "timestamp", "commit"]


def _empty_series(dim: str) -> pd.DataFrame:
    """A sweep series with no rows, typed like a real one."""
    numbers = ("median_ms", "pct_of_floor", "tflops", "gbps", "speedup", "p10_ms", "p90_ms")
    return pd.DataFrame({c: pd.Series(dtype="int64" if c in (dim, "step") else float if c in numbers else str)
                         for c in _series_columns(dim)})


def _one_sweep(df: pd.DataFrame, run_id: str, problem: Problem, dim: str) -> pd.DataFrame:
    """The rows of one sweep run of ``df`` (:func:`every_sweep`) as a sweep series."""
    run = add_speedup(df[df["run_id"] == run_id])
    run["step"] = run["variant"].map({v.slug: v.number for v in problem.variants.values()})
    run[dim] = run[dim].astype(int)
    return _ladder_order(run.sort_values(dim), problem)[_series_columns(dim)].reset_index(drop=True)


def step_sweep(problem: Problem, slug: str, dim: str = "batch_size", *, device: str | None = None,
               path: str | Path | None = None) -> pd.DataFrame:
    """``slug`` in the newest sweep that timed it (a by-batch step: with eager and every step it
    routes to), or its one recorded point; ``sweep`` says which."""
    routed = _route_slugs(problem, slug) if problem.variant(slug).routes else []
    series = sweep_series(problem, dim, device, path, having=["eager", slug, *routed] if routed else [slug])
    points = series[series["variant"] == slug].assign(sweep=True)
    if not points.empty:
        return points.sort_values(dim).reset_index(drop=True)
    one = recorded(problem, device=device or "", path=path)
    one = one[one["variant"] == slug].assign(**{dim: problem.defaults[dim]}, sweep=False)
    return one.reindex(columns=[*series.columns, "sweep"]).reset_index(drop=True)


WIDE_SPREAD = 0.25
"""A spread, (p90 - p10) / median, above this is not one GPU time: a kernel whose host work per call
is about as long as its GPU work lands in two modes (the GPU waiting for the host, or not)."""


def every_sweep(problem: Problem, dim: str = "batch_size", *, having: Sequence[str] = (),
                device: str | None = None, path: str | Path | None = None) -> pd.DataFrame:
    """Every recorded sweep over ``dim`` (a run that timed more than one point, only ``dim`` varying)
    that timed each slug of ``having``, oldest first, on ``device`` (a part of its name; None: the
    device of the newest such sweep, so a page of sweeps shows one device)."""
    names = [d.name for d in problem.dims]
    if dim not in names:
        raise ValueError(f"dim={dim!r} is not a size of {problem.key}; valid: {', '.join(names)}")
    df = clean_rows(_read(path))
    df = df[(df["problem"] == problem.key) & df["device"].str.contains(device or "", regex=False)
            & df["variant"].isin(list(problem.variants))]
    if df.empty:
        return _empty_series(dim)
    parsed = pd.DataFrame([parse_sizes(s) for s in df["sizes"]], index=df.index)
    df = pd.concat([df, parsed.reindex(columns=names)], axis=1)
    others = [n for n in names if n != dim]
    per_run = df.groupby("run_id").agg(points=(dim, "nunique"), stamp=("timestamp", "max"),
                                       gpu=("device", "first"), **{f"n_{o}": (o, "nunique") for o in others})
    ok = (per_run["points"] > 1) & (per_run[[f"n_{o}" for o in others]] == 1).all(axis=1)
    runs = per_run[ok & per_run.index.isin(_runs_timing(df, having))].sort_values("stamp").index
    if runs.empty:
        return _empty_series(dim)
    if device is None:
        runs = runs[(per_run.loc[runs, "gpu"] == per_run.loc[runs[-1], "gpu"]).to_numpy()]
    return pd.concat([_one_sweep(df, run_id, problem, dim) for run_id in runs], ignore_index=True)


def sweep_spread(sweeps: pd.DataFrame, dim: str = "batch_size",
                 among: Sequence[str] | None = None) -> pd.DataFrame:
    """Each variant at each point across ``sweeps``: their spread of times, ``wins`` (fastest median
    among ``among``) and ``wide`` (spread above :data:`WIDE_SPREAD`)."""
    if sweeps.empty:
        raise ValueError("sweeps is empty: no recorded sweep to read a spread from (see every_sweep)")
    among = list(among) if among is not None else [v for v in dict.fromkeys(sweeps["variant"])
                                                   if v != "eager"]
    contest = sweeps[sweeps["variant"].isin(among)]
    fastest = contest.loc[contest.groupby(["run_id", dim])["median_ms"].idxmin()]
    wins = fastest.groupby(["variant", dim]).size()
    order = {v: i for i, v in enumerate(dict.fromkeys(sweeps["variant"]))}
    out = (sweeps.groupby(["variant", dim])
           .agg(sweeps=("run_id", "nunique"), best_p10_ms=("p10_ms", "min"),
                median_ms=("median_ms", "median"), lowest_ms=("median_ms", "min"),
                highest_ms=("median_ms", "max"), worst_p90_ms=("p90_ms", "max"))
           .reset_index())
    out["wins"] = [int(wins.get((v, b), 0)) for v, b in zip(out["variant"], out[dim])]
    spread = (sweeps["p90_ms"] - sweeps["p10_ms"]) / sweeps["median_ms"]
    wide = sweeps[spread > WIDE_SPREAD].groupby(["variant", dim]).size()
    out["wide"] = [int(wide.get((v, b), 0)) for v, b in zip(out["variant"], out[dim])]
    out = out.assign(_place=out["variant"].map(order)).sort_values([dim, "_place"])
    return out.drop(columns="_place").reset_index(drop=True)


def route_for(problem: Problem, slug: str, rows: int, timed: Sequence[str]) -> str | None:
    """The step the by-batch step ``slug`` sends a batch of ``rows`` to: the first of its band's
    slugs among ``timed``."""
    v = problem.variant(slug)
    if not v.routes:
        raise ValueError(f"slug={slug!r} routes nothing; the by-batch step of {problem.key} is "
                         f"{', '.join(x.slug for x in problem.ladder() if x.routes) or 'none'}")
    band = next(r for r in v.routes if r.max_rows is None or rows <= r.max_rows)
    return next((s for s in band.slugs if s in set(timed)), None)


def _route_slugs(problem: Problem, slug: str) -> list[str]:
    """Every step the routes of ``slug`` name, each once, in route order."""
    return list(dict.fromkeys(s for r in problem.variant(slug).routes for s in r.slugs))


def route_check(problem: Problem, slug: str, dim: str = "batch_size", *, device: str | None = None,
                path: str | Path | None = None) -> pd.DataFrame:
    """The by-batch step against the step each point routes to, in the newest sweep that timed them
    all, point by point: both timings, ``ratio``, ``verdict`` and ``wide``."""
    candidates = _route_slugs(problem, slug)
    series = sweep_series(problem, dim, device, path, having=["eager", slug, *candidates])
    cols = [dim, "routed", "routed_step", "ms", "p10_ms", "p90_ms", "speedup", "routed_ms",
            "routed_p10_ms", "routed_p90_ms", "routed_speedup", "eager_ms", "ratio", "verdict",
            "wide", "run_id", "device", "timestamp", "commit"]
    if series.empty:
        return pd.DataFrame(columns=cols)
    at = series.set_index(["variant", dim])
    timed = set(series["variant"])
    rows = []
    for point in sorted(series.loc[series["variant"] == slug, dim]):
        routed = route_for(problem, slug, int(point), timed)
        own, there, eager = at.loc[(slug, point)], at.loc[(routed, point)], at.loc[("eager", point)]
        ratio = float(own["median_ms"] / there["median_ms"])
        inside = lambda m, r: r["p10_ms"] <= m <= r["p90_ms"]   # noqa: E731
        same = inside(own["median_ms"], there) and inside(there["median_ms"], own)
        verdict = ("as fast" if same else
                   f"{ratio:.2f}x slower" if ratio > 1 else f"{1 / ratio:.2f}x faster")
        spread = lambda r: (r["p90_ms"] - r["p10_ms"]) / r["median_ms"]   # noqa: E731
        rows.append({dim: int(point), "routed": routed, "routed_step": problem.variant(routed).number,
                     "ms": own["median_ms"], "p10_ms": own["p10_ms"], "p90_ms": own["p90_ms"],
                     "speedup": own["speedup"], "routed_ms": there["median_ms"],
                     "routed_p10_ms": there["p10_ms"], "routed_p90_ms": there["p90_ms"],
                     "routed_speedup": there["speedup"], "eager_ms": eager["median_ms"],
                     "ratio": ratio, "verdict": verdict,
                     "wide": bool(spread(own) > WIDE_SPREAD or spread(there) > WIDE_SPREAD),
                     "run_id": own["run_id"], "device": own["device"], "timestamp": own["timestamp"],
                     "commit": own["commit"]})
    return pd.DataFrame(rows, columns=cols)


def route_rule(problem: Problem, slug: str, dim: str = "batch_size", *, device: str | None = None,
               path: str | Path | None = None) -> pd.DataFrame:
    """The one routing rule: at each point of the newest sweep that timed eager and every candidate,
    the step with the lowest p90 (``chosen``), beside the one routed to now; ``agrees`` where the
    routed step is the chosen one or level with it (:func:`level`: one sweep cannot rank them)."""
    candidates = _route_slugs(problem, slug)
    series = sweep_series(problem, dim, device, path, having=["eager", *candidates])
    rows = []
    for point, g in series[series["variant"].isin(candidates)].groupby(dim):
        g = g.set_index("variant", drop=False)
        routed = route_for(problem, slug, int(point), list(g["variant"]))
        chosen = g["p90_ms"].idxmin()
        rows.append({dim: int(point), "routed": routed, "chosen": chosen,   # a step is level with itself
                     "agrees": level(g.loc[routed], g.loc[chosen]),
                     **{f"{v} p90 ms": p90 for v, p90 in zip(g["variant"], g["p90_ms"])}})
    out = pd.DataFrame(rows)
    if not out.empty:
        out.attrs["caption"] = caption(series)
    return out


def by_batch_range(problem: Problem, slug: str = "faithful_by_batch", *, device: str | None = None,
                   path: str | Path | None = None) -> dict[str, float] | None:
    """The one statement of a by-batch step's speed-up over eager across batch sizes: ``lo``,
    ``hi``, ``points``, ``at_lo`` and ``caption``; None without a sweep."""
    points = step_sweep(problem, slug, device=device, path=path)
    points = points[points["sweep"]]
    if points.empty:
        return None
    return {"lo": float(points["speedup"].min()), "hi": float(points["speedup"].max()),
            "points": len(points), "at_lo": int(points.loc[points["speedup"].idxmin(), "batch_size"]),
            "caption": caption(points)}
