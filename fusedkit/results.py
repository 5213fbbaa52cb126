"""Read measurements back from ``data/``, shaped for the notebooks' tables, the report index,
the export and the README.

**What a recorded result is.** A variant's *recorded* row is its newest *clean* measurement at
the sizes and device asked for (:func:`recorded`), and *the best* of a tier is chosen from those
rows by their speed-up (:func:`best_by_tier`). Every place that states a result (the notebooks'
steps and sentences, the report index, the results notebook, the export, the README) reads these
two functions, so they cannot disagree. A clean measurement (:func:`clean_rows`) is

- timed on a GPU (``timer == "cuda-events"``, the harness's one GPU timer; CPU-interpreter and
  wall-clock rows only show that the code runs);
- of committed code: a commit that ends in ``+dirty`` was measured with uncommitted changes, so
  nobody can re-run or read the code that was timed;
- of a ladder variant or a component, not an ``export:`` row (an exported file timed beside its
  variant, to check the export, not a result of its own);
- and, for a ladder variant, in a run that timed eager at the same sizes (so that its
  ``speedup``, eager's time over the variant's, is a ratio within one run: two runs differ in
  clocks, drivers and thermal state).

The newest, not the fastest, measurement counts: it is the code as it is now, not the luckiest
of several runs. Speed-ups are only ever taken within one run (one ``run_id``).

Views that truly need one run (a comparison of two variants on the same GPU state, a run-to-run
comparison) read it with :func:`same_run`, :func:`time_ratio`, :func:`latest_run` or
:func:`per_run`; components and their same-size copies with :func:`components` (several side by
side in one run: :func:`same_run_components`); sweeps with :func:`sweep_series` and
:func:`step_sweep`. :func:`of_steps` keeps the steps one notebook teaches; :func:`caption` says
where a table's rows come from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from fusedkit import records
from fusedkit.precision import KERNEL_TIERS, PRECISIONS
from fusedkit.problems import Problem, Sizes, fmt_sizes, parse_sizes

CLEAN_TIMER = "cuda-events"
"""The timer of a clean measurement: CUDA events on a GPU (:mod:`fusedkit.bench`)."""
DIRTY = "+dirty"
"""The suffix of a commit measured with uncommitted changes (:func:`fusedkit.records.current_commit`)."""
EXPORT = "export:"
"""The prefix of a row that timed an exported KernelBench file beside its variant."""
NOT_COMPONENT = "[@:]"
"""What a variant name holds when it is a probe's configuration or launch of a step, not a component."""
COPY_FOR = "d2d_copy_for_"
"""The prefix of a component's same-size copy, timed in the same run as the component."""

# Columns a recorded frame adds to the records' own.
_ADDED = {"speedup": float, "eager_ms": float, "step": float, "title": str}


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


def clean_rows(rec: pd.DataFrame) -> pd.DataFrame:
    """The rows of a records frame that are clean measurements (module docstring): a GPU
    timing (``timer == "cuda-events"``) with a time, of a commit without ``+dirty``, not an
    ``export:`` row. The same-run eager that a ladder row also needs is asked by
    :func:`newest_clean`, which takes speed-ups among clean rows only."""
    ok = ((rec["timer"] == CLEAN_TIMER) & (rec["median_ms"] > 0)
          & ~rec["commit"].str.endswith(DIRTY) & ~rec["variant"].str.startswith(EXPORT))
    return rec[ok]


def _as_utc(when: object) -> pd.Timestamp:
    t = pd.Timestamp(when)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def _with_steps(rows: pd.DataFrame, problem: Problem) -> pd.DataFrame:
    """``rows`` plus the ladder's ``step`` (number) and ``title`` of each variant (NaN and ""
    for a component)."""
    steps = {v.slug: (v.number, v.title) for v in problem.variants.values()}
    return rows.assign(step=rows["variant"].map(lambda s: steps.get(s, (None, ""))[0]).astype(float),
                       title=rows["variant"].map(lambda s: steps.get(s, (None, ""))[1]))


def _ladder_order(rows: pd.DataFrame, problem: Problem, *keys: str) -> pd.DataFrame:
    place = {v.slug: i for i, v in enumerate(problem.ladder())}   # eager first
    rows = rows.assign(_place=rows["variant"].map(place))
    return rows.sort_values([*keys, "_place"], kind="stable").drop(columns="_place")


def newest_clean(rec: pd.DataFrame, problem: Problem, *, as_of: object = None) -> pd.DataFrame:
    """The recorded rows of ``problem`` in a records frame: for each device, sizes and ladder
    variant, its newest clean measurement (:func:`clean_rows`) in a run that timed eager at the
    same sizes, with ``speedup`` (that run's eager time over the variant's), ``eager_ms`` (that
    eager time, ms), ``step`` and ``title``. Equal timestamps: the later row of the file.

    ``as_of`` (a time; UTC when it names no zone) keeps only measurements taken at or before
    it: the records as they stood then (to pair a time with counters profiled at that time).
    Components and device ceilings are left out (see :func:`components`). Sorted by device,
    sizes, then ladder order; empty with the same columns when nothing qualifies.
    """
    rows = clean_rows(rec[rec["problem"] == problem.key])
    if as_of is not None:
        rows = rows[rows["timestamp"] <= _as_utc(as_of)]
    rows = add_speedup(rows)     # among clean rows: a dirty eager gives no one a speed-up
    rows = rows[rows["variant"].isin(list(problem.variants)) & rows["speedup"].notna()]
    rows = rows.assign(eager_ms=rows["speedup"] * rows["median_ms"])
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
    """The recorded result of every ladder variant of ``problem``: one row per variant (and
    per device, when ``device`` matches several), its newest clean measurement at ``sizes``
    (default: the problem's) on a device whose name contains ``device``, read from the records
    file (``path``, default ``data/records.csv`` or ``$FUSEDKIT_RECORDS``).

    The one definition of a recorded result (module docstring, :func:`newest_clean`): the
    rows may come from several runs; each row's ``speedup`` is against eager *in its own run*
    (``eager_ms``), and ``run_id``, ``commit``, ``timestamp`` and ``device`` say where it comes
    from (:func:`caption` for a table, :func:`run_short_label` for a row). ``as_of``: the
    records as they stood at that time. ``pct_of_measured`` is the row's time against the floor
    of the ceilings measured in the row's own run, NaN where that run measured none
    (:func:`fusedkit.ceilings.add_pct_of_measured`; ``ceilings_run`` names it), beside
    ``pct_of_floor``, the datasheet's. Empty (same columns) when nothing is recorded.
    """
    from fusedkit.ceilings import add_pct_of_measured  # noqa: PLC0415 - ceilings reads records too

    rows = newest_clean(_at(_read(path), problem, sizes, device), problem, as_of=as_of)
    return add_pct_of_measured(rows, problem, path=path)


def recorded_by_precision(problem: Problem, precisions: Sequence[str] = (), sizes: Sizes | None = None, *,
                          device: str = "H200", path: str | Path | None = None) -> pd.DataFrame:
    """:func:`recorded` with each variant's arithmetic beside it: ``precision`` (the registry's:
    fp32, tf32x3, fp16x3, tf32, fp16, bf16) and ``problem`` (the key). ``precisions`` keeps only
    the variants of those precisions (default: every variant; a precision the problem has no
    variant of gives no rows), e.g. ``("tf32", "fp16",
    "bf16")`` for the variants that compute one rounded product per term. Ladder order kept."""
    unknown = [p for p in precisions if p not in PRECISIONS]
    if isinstance(precisions, str) or unknown:
        raise ValueError(f"precisions={precisions!r}: pass a list of precisions, e.g. ['fp16']; "
                         f"valid: {', '.join(PRECISIONS)}")
    rows = recorded(problem, sizes, device=device, path=path)
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
    """The one definition of "the best" in fusedkit: of ``rows`` (a :func:`recorded` frame, or
    one run's rows, with ``speedup``), for each tier a kernel of ours reaches
    (:data:`fusedkit.precision.KERNEL_TIERS`), the one with the highest same-run speed-up among
    the steps whose GEMM we wrote (:func:`ours`) that meet at least that tier: a stricter tier
    meets the looser ones. Whether the runner-up is level with it is :func:`level`'s to say.
    ``rows`` must be of one device and one sizes.
    """
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
    """The one noise rule: two timings differ only beyond their measured spread. True when the
    p10-p90 ranges of ``a`` and ``b`` (rows with ``p10_ms`` and ``p90_ms``, else their
    ``median_ms`` alone) overlap: then neither is faster, whatever their medians say."""
    lo = lambda r: r["p10_ms"] if pd.notna(r.get("p10_ms")) else r["median_ms"]   # noqa: E731
    hi = lambda r: r["p90_ms"] if pd.notna(r.get("p90_ms")) else r["median_ms"]   # noqa: E731
    return not (hi(a) < lo(b) or hi(b) < lo(a))


def page_device(problem: Problem, path: str | Path | None = None) -> str:
    """The device whose records a page of ``problem`` shows on a machine without a GPU: the
    newest device with Nsight counters of the problem (a step's evidence is its time and its
    counters, from one device), else the device of the newest clean record; "" when none."""
    from fusedkit.counters import read_counters  # noqa: PLC0415

    rows = clean_rows(_read(path))
    rows = rows[rows["problem"] == problem.key].sort_values("timestamp", kind="stable")
    counted = set(read_counters().query("problem == @problem.key")["device"])
    with_counters = rows[rows["device"].isin(counted)]
    pick = with_counters if not with_counters.empty else rows
    return str(pick["device"].iloc[-1]) if not pick.empty else ""


_TIER_ORDER = ("reference", *KERNEL_TIERS)


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
    best = best.assign(tier_rank=best["tier"].map(_TIER_ORDER.index))
    return best.sort_values(["device", "sizes", "tier_rank"])[cols].reset_index(drop=True)


def caption(rows: pd.DataFrame | pd.Series) -> str:
    """"NVIDIA H200, 2026-11-29 to 2026-11-30": the devices and the dates (or date range) of
    the measurements in a table or figure, the one short caption of where its numbers come
    from; "no recorded run" when there are none."""
    if isinstance(rows, pd.Series):
        rows = rows.to_frame().T
    if rows.empty:
        return "no recorded run"
    devices = " and ".join(dict.fromkeys(str(d) for d in rows["device"]))
    stamps = pd.to_datetime(rows["timestamp"], utc=True)
    first, last = f"{stamps.min():%Y-%m-%d}", f"{stamps.max():%Y-%m-%d}"
    return f"{devices}, {first}" if first == last else f"{devices}, {first} to {last}"


def same_run(problem: Problem, slugs: Sequence[str], sizes: Sizes | None = None, *,
             device: str = "H200", path: str | Path | None = None) -> pd.DataFrame:
    """Every row of the newest clean run (:func:`clean_rows`) that timed each of ``slugs``
    (ladder variants or components) at ``sizes`` (default: the problem's) on a device whose
    name contains ``device``, with ``speedup`` (NaN if that run did not time eager), ``step``
    and ``title``.

    For a comparison of two variants on the same GPU state (a ratio of two times is only
    honest within one run): ``same_run(p12, ["wgmma_fp16x3", "triton_fp16x3"])``. A result on
    its own is read with :func:`recorded`. Empty (same columns) when no run timed them all.
    """
    if isinstance(slugs, str):
        raise TypeError(f"slugs={slugs!r}: pass a list of names, e.g. [{slugs!r}]")
    rows = clean_rows(_at(_read(path), problem, sizes, device))
    timed = set(rows["run_id"])
    for slug in slugs:
        timed &= set(rows.loc[rows["variant"] == slug, "run_id"])
    if not timed:
        return _typed_empty(rows)
    runs = rows[rows["run_id"].isin(timed)].sort_values("timestamp", kind="stable")
    run = add_speedup(rows[rows["run_id"] == runs["run_id"].iloc[-1]])
    run = _with_steps(run, problem).assign(eager_ms=lambda d: d["speedup"] * d["median_ms"])
    return _ladder_order(run, problem).reset_index(drop=True)


def main_run_id(df: pd.DataFrame, problem: Problem) -> str | None:
    """Of the runs in ``df`` (one problem, sizes and device) that timed eager, the most complete
    one (most of the ladder's variants), the newest among equals. None when no run timed eager.

    For a view of one whole run (:func:`latest_run`); a result is read with :func:`recorded`."""
    runs = df.loc[df["variant"] == "eager", ["run_id", "timestamp"]]
    if runs.empty:
        return None
    counts = df[df["variant"].isin(list(problem.variants))].groupby("run_id")["variant"].nunique()
    runs = runs.assign(n=runs["run_id"].map(counts)).sort_values(["n", "timestamp"])
    return str(runs["run_id"].iloc[-1])


def latest_run(problem: Problem, sizes: Sizes | None = None, *, device: str = "",
               path: str | Path | None = None, having: Sequence[str] = (),
               newest: bool = False) -> pd.DataFrame:
    """Rows of the most complete clean recorded run of ``problem`` that timed its eager
    baseline (:func:`main_run_id`): a view of one whole run, e.g. to compare it with another.
    A variant's result is read with :func:`recorded` instead: the most complete run is old
    and lacks every step timed since.

    ``sizes`` defaults to the problem's defaults; ``device`` filters on a substring of the
    device name ("H200"); ``having`` keeps only runs that recorded every variant named there;
    ``newest`` takes the newest of those runs instead of the most complete (that is
    :func:`same_run`, which it calls). Adds ``speedup`` (eager's time over each variant's, same
    run), ``eager_ms``, and the ladder's ``step`` and ``title``. Empty when nothing matches.
    """
    if newest:
        return same_run(problem, ["eager", *having], sizes, device=device, path=path)
    df = clean_rows(_at(_read(path), problem, sizes, device))
    for slug in having:
        df = df[df["run_id"].isin(df.loc[df["variant"] == slug, "run_id"])]
    run_id = main_run_id(df, problem)
    if run_id is None:   # same columns as a real run, so callers need no special case
        return _typed_empty(df)
    run = _with_steps(add_speedup(df[df["run_id"] == run_id]), problem)
    return run.assign(eager_ms=run["speedup"] * run["median_ms"]).reset_index(drop=True)


def _typed_empty(like: pd.DataFrame) -> pd.DataFrame:
    """No rows, with a records frame's columns and those a recorded frame adds."""
    out = like.iloc[0:0].copy()
    for col, kind in _ADDED.items():
        out[col] = pd.Series(dtype=kind)
    return out


def run_spread(problem: Problem, sizes: Sizes | None = None, *, device: str = "H200",
               path: str | Path | None = None, min_runs: int = 3) -> pd.DataFrame:
    """Run to run: every clean measurement (:func:`clean_rows`) of each ladder variant of
    ``problem`` at ``sizes`` (default: the problem's) timed in at least ``min_runs`` runs on a
    device whose name contains ``device``, each against the variant's own median over those
    runs, so that variants of any speed share one scale.

    Columns: problem, device, variant, run_id, timestamp, commit, median_ms, runs (how many
    runs timed the variant), median_of_runs (ms), vs_median_pct (100 x (median_ms /
    median_of_runs - 1): above 0 slower than usual), recorded (True for the measurement that is
    the variant's recorded result, :func:`recorded`). Ladder order, then time. Times only: a
    ratio of two runs mixes two GPU states, which is why a result's speed-up is never one."""
    if min_runs < 2:
        raise ValueError(f"min_runs={min_runs}: a spread needs at least 2 runs")
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
    """The components of ``problem`` (an epilogue or a reduction timed alone, not a ladder
    variant), each with its same-size copy timed in the same run: its newest clean measurement
    (``every_run``: every clean run's, oldest first) at ``sizes`` (default: the problem's).

    Columns: variant, median_ms, gbps (GB/s), copy_ms and copy_gbps (the copy of the same bytes,
    ``d2d_copy_for_<variant>``, same run), pct_of_copy (the component's rate as % of that copy's),
    device_copy_gbps (the large device copy, ``d2d_copy``, of the same run: the memory
    ceiling), notes, sizes, run_id, commit, timestamp, device.
    """
    rec = _read(path)
    rows = clean_rows(_at(rec, problem, sizes, device))
    copies = rows[rows["variant"].str.startswith(COPY_FOR)]
    copies = copies.assign(variant=copies["variant"].str.removeprefix(COPY_FOR))
    copies = copies.set_index(["run_id", "variant"])[["median_ms", "gbps"]]
    copies.columns = ["copy_ms", "copy_gbps"]
    # A component is a plain name; a probe's config (step@config) or launch (step:launch) is not.
    parts = rows[~rows["variant"].isin(list(problem.variants))
                 & ~rows["variant"].str.startswith(COPY_FOR) & ~rows["variant"].str.contains(NOT_COMPONENT)]
    parts = parts.join(copies, on=["run_id", "variant"])
    ceilings = clean_rows(rec[(rec["problem"] == "device") & (rec["variant"] == "d2d_copy")])
    big = ceilings.groupby("run_id")["gbps"].last().rename("device_copy_gbps")
    parts = parts.join(big, on="run_id").assign(pct_of_copy=lambda d: 100 * d["gbps"] / d["copy_gbps"])
    parts = parts.sort_values("timestamp", kind="stable")
    if not every_run:
        parts = parts.groupby(["device", "variant"]).tail(1).sort_values("variant", kind="stable")
    return parts[["variant", "median_ms", "gbps", "copy_ms", "copy_gbps", "pct_of_copy",
                  "device_copy_gbps", "notes", "sizes", "run_id", "commit", "timestamp",
                  "device"]].reset_index(drop=True)


def same_run_components(problem: Problem, slugs: Sequence[str], sizes: Sizes | None = None, *,
                        device: str = "H200", path: str | Path | None = None) -> pd.DataFrame:
    """Components (``slugs``, e.g. three versions of one kernel) side by side on the same GPU
    state: the rows of :func:`components` (each beside its same-size copy) from the newest clean
    run that timed every one of them, in the order of ``slugs``; empty (same columns) when no
    run timed them all."""
    if isinstance(slugs, str):
        raise TypeError(f"slugs={slugs!r}: pass a list of names, e.g. [{slugs!r}]")
    every = components(problem, sizes, device=device, path=path, every_run=True)
    timed = set(every["run_id"])
    for slug in slugs:
        timed &= set(every.loc[every["variant"] == slug, "run_id"])
    if not timed:
        return every.iloc[0:0].reset_index(drop=True)
    newest = every[every["run_id"].isin(timed)].sort_values("timestamp", kind="stable")["run_id"].iloc[-1]
    run = every[(every["run_id"] == newest) & every["variant"].isin(list(slugs))]
    order = {s: i for i, s in enumerate(slugs)}
    return run.sort_values("variant", key=lambda v: v.map(order)).reset_index(drop=True)


def ladder_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The ladder's rows (a :func:`recorded` frame) as a reader compares them, in step order:
    the median with its p10 and p90 (the one noise rule reads them), the tier, the shares of the
    datasheet floor and of the floor measured in the row's own run, the error, the speed-up over
    eager in its own run, and when it was recorded (with the device where the rows hold several)."""
    rows = rows[rows["step"].notna()].sort_values(["step", "median_ms"], ascending=[True, False])
    one = rows["device"].nunique() <= 1
    rows = rows.assign(recorded=[f"{r['timestamp']:%Y-%m-%d}" if one else run_short_label(r) for _, r in rows.iterrows()],
                       pct_of_measured=rows.get("pct_of_measured", float("nan")))
    return rows.rename(columns={"median_ms": "ms", "pct_of_floor": "% of floor", "pct_of_measured": "% of measured",
                                "rel_error": "rel. error"})[
        ["step", "variant", "tier", "ms", "p10_ms", "p90_ms", "% of floor", "% of measured", "rel. error",
         "speedup", "recorded"]].reset_index(drop=True)


def _one_row(run: pd.DataFrame | pd.Series) -> pd.Series | None:
    """The row that labels ``run``: the row itself, or the first row of a frame of ONE run."""
    if isinstance(run, pd.Series):
        return run
    if run.empty:
        return None
    if "run_id" in run.columns and run["run_id"].nunique() > 1:
        raise ValueError(f"the rows come from {run['run_id'].nunique()} runs: label each row "
                         "(run_label(row)) or caption the table (results.caption(rows))")
    return run.iloc[0]


def run_label(run: pd.DataFrame | pd.Series) -> str:
    """"NVIDIA H200, 2026-11-29 09:21 UTC, commit 814a63c": where one run's numbers come from,
    from its rows or from one row. The one label of a run in fusedkit; a frame of rows from
    several runs is refused (ValueError): caption it with :func:`caption`."""
    row = _one_row(run)
    if row is None:
        return "no recorded run"
    return f"{row['device']}, {row['timestamp']:%Y-%m-%d %H:%M} UTC, commit {row['commit']}"


def run_short_label(run: pd.DataFrame | pd.Series) -> str:
    """"H200, 2026-11-30": :func:`run_label` for a table cell, the device and the day (the
    vendor's name, the time of day and the commit left out: a commit id is for the records and
    the report index, not for a reader's table); one row, or the rows of one run."""
    row = _one_row(run)
    if row is None:
        return "no recorded run"
    device = str(row["device"]).removeprefix("NVIDIA ")
    return f"{device}, {row['timestamp']:%Y-%m-%d}"


def run_ceilings(rows: pd.DataFrame, path: str | Path | None = None) -> dict[str, float]:
    """The device ceilings measured beside ``rows``: ``copy_gbps`` (a large device-to-device
    copy, GB/s) and ``bf16_tflops`` (a bf16 matmul, TFLOP/s), each from the newest of the
    rows' runs that measured it (for the rows of one run: that run's). Read through
    :func:`fusedkit.ceilings.ceilings_frame`, which knows both the ``ceiling_*`` rows and the
    older ``d2d_copy`` / ``bf16_matmul`` ones. ``{}`` for no rows."""
    from fusedkit.ceilings import ceilings_frame  # noqa: PLC0415 - ceilings reads records too

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


def sweep_series(problem: Problem, dim: str, device: str = "H200", path: str | Path | None = None,
                 *, fixed: Mapping[str, int] | None = None, having: Sequence[str] = (),
                 newest: bool = False) -> pd.DataFrame:
    """The most complete recorded size sweep of ``problem`` over ``dim``, one row per
    (variant, point), of clean measurements (:func:`clean_rows`).

    A sweep is a run (one ``run_id``) that recorded the problem at more than one ``sizes``;
    of the runs in which ``dim`` takes several values while every other dimension keeps one
    value, the one that timed the most variants is read, the newest among equals (as
    :func:`main_run_id` does: a short sweep of two new steps must not hide the full one).
    ``having`` keeps only runs that timed every variant named there (to read the sweep that
    measured a given step); ``fixed`` first narrows the rows to given values of the other
    dimensions, which picks a slice out of a cross-product sweep. ``device`` filters on a
    substring of the device name. ``newest`` reads the newest matching sweep instead of the
    most complete (a step whose kernel changed after the full sweep: its newest sweep).

    Columns: variant, ``dim``, median_ms, pct_of_floor (%), tflops (TFLOP/s), gbps (GB/s),
    speedup (eager's time at the same point over the variant's; NaN where eager was not
    timed), then step, tier, p10_ms, p90_ms, sizes and the run's run_id, device, timestamp
    and commit (so :func:`run_label` works on it). Sorted in ladder order, then by ``dim``.
    Empty (same columns) when no sweep matches.
    """
    df, runs = _sweep_runs(problem, dim, device, path, fixed, having)
    if runs.empty:
        return _empty_series(_series_columns(dim), dim)
    runs = runs.sort_values(["stamp"] if newest else ["variants", "stamp"])
    return _one_sweep(df, runs.index[-1], problem, dim)


def _series_columns(dim: str) -> list[str]:
    """The columns of a sweep series over ``dim`` (:func:`sweep_series`)."""
    return ["variant", dim, "median_ms", "pct_of_floor", "tflops", "gbps", "speedup", "step", "tier",
            "p10_ms", "p90_ms", "sizes", "run_id", "device", "timestamp", "commit"]


def _sweep_runs(problem: Problem, dim: str, device: str, path: str | Path | None,
                fixed: Mapping[str, int] | None, having: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows, runs) of the sweeps of ``problem`` over ``dim``: the clean rows of its ladder
    variants on a device whose name contains ``device``, with one column per size, narrowed to
    ``fixed``; and one row per run (index ``run_id``) in which ``dim`` takes several values
    while every other size keeps one and that timed every slug of ``having``, with its
    ``points``, newest timestamp (``stamp``) and number of ``variants``."""
    names = [d.name for d in problem.dims]
    if dim not in names:
        raise ValueError(f"dim={dim!r} is not a size of {problem.key}; valid: {', '.join(names)}")
    df = clean_rows(_read(path))
    df = df[(df["problem"] == problem.key) & df["device"].str.contains(device, regex=False)
            & df["variant"].isin(list(problem.variants))]
    if df.empty:
        return df, pd.DataFrame(columns=["points", "stamp", "variants"])
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
    return df, per_run[ok]


def _one_sweep(df: pd.DataFrame, run_id: str, problem: Problem, dim: str) -> pd.DataFrame:
    """The rows of one sweep run of ``df`` (:func:`_sweep_runs`) as a sweep series."""
    run = add_speedup(df[df["run_id"] == run_id])
    run["step"] = run["variant"].map({v.slug: v.number for v in problem.variants.values()})
    run[dim] = run[dim].astype(int)
    place = {v.slug: i for i, v in enumerate(problem.ladder())}   # ladder order: eager first
    run = run.assign(_place=run["variant"].map(place)).sort_values(["_place", dim])
    return run[_series_columns(dim)].reset_index(drop=True)


def step_sweep(problem: Problem, slug: str, dim: str = "batch_size", *, device: str = "H200",
               path: str | Path | None = None) -> pd.DataFrame:
    """One step across ``dim``: the points of ``slug`` in the newest sweep that timed it
    (:func:`sweep_series` with ``newest=True``: the step as its code is now, not the fullest
    sweep, which may predate a change), each with its speed-up over eager at that point in that
    run; where no sweep timed it, its one recorded point at the default sizes (:func:`recorded`).

    Columns as :func:`sweep_series`, plus ``sweep`` (True for points of a sweep). Sorted by
    ``dim``; empty (same columns) when nothing is recorded.
    """
    routed = _route_slugs(problem, slug) if problem.variant(slug).routes else []
    series = sweep_series(problem, dim, device, path, having=["eager", slug, *routed] if routed else [slug],
                          newest=True)
    points = series[series["variant"] == slug].assign(sweep=True)
    if not points.empty:
        return points.sort_values(dim).reset_index(drop=True)
    one = recorded(problem, device=device, path=path)
    one = one[one["variant"] == slug].assign(**{dim: problem.defaults[dim]}, sweep=False)
    return one.reindex(columns=[*series.columns, "sweep"]).reset_index(drop=True)


WIDE_SPREAD = 0.25
"""A measurement whose spread, (p90 - p10) / median, exceeds this is not one GPU time: a kernel
bound by the GPU repeats within a few percent, one whose host work per call is about as long
as its GPU work lands in two modes (the GPU waiting for the host, or not) and spreads wide."""


def every_sweep(problem: Problem, dim: str = "batch_size", *, having: Sequence[str] = (),
                device: str = "H200", path: str | Path | None = None) -> pd.DataFrame:
    """Every recorded sweep of ``problem`` over ``dim`` that timed each slug of ``having``
    (the runs :func:`sweep_series` chooses from), one after the other, oldest first: one row per
    sweep, variant and point with its median, p10 and p90 (ms) and its speed-up over eager at
    that point in that sweep. Columns as :func:`sweep_series`; empty (same columns) when no
    sweep matches. A step whose kernel changed between sweeps appears as it was in each."""
    df, runs = _sweep_runs(problem, dim, device, path, None, having)
    if runs.empty:
        return _empty_series(_series_columns(dim), dim)
    sweeps = [_one_sweep(df, run_id, problem, dim) for run_id in runs.sort_values("stamp").index]
    return pd.concat(sweeps, ignore_index=True)


def sweep_spread(sweeps: pd.DataFrame, dim: str = "batch_size",
                 among: Sequence[str] | None = None) -> pd.DataFrame:
    """Each variant at each point across the sweeps of ``sweeps`` (:func:`every_sweep`): in
    how many ``sweeps`` it was timed, its ``best_p10_ms`` (the lowest p10 of any sweep: the
    closest to its GPU time alone), ``median_ms`` (the median of the sweeps' medians),
    ``lowest_ms`` and ``highest_ms`` (of the sweeps' medians), ``worst_p90_ms`` (the highest
    p90: its slow calls), ``wins``, the sweeps whose fastest median among ``among``
    (default: every variant but eager) at that point was this variant's, and ``wide``, the
    sweeps in which its spread exceeded :data:`WIDE_SPREAD`. Sorted by ``dim``, then in the
    frame's variant order."""
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
    """The step the by-batch step ``slug`` sends a batch of ``rows`` rows to (its routes as
    registered now), on a device that could run the steps in ``timed``: the first slug of the
    band that holds ``rows`` found among ``timed``. None when none of that band's is there."""
    v = problem.variant(slug)
    if not v.routes:
        raise ValueError(f"slug={slug!r} routes nothing; the by-batch step of {problem.key} is "
                         f"{', '.join(x.slug for x in problem.ladder() if x.routes) or 'none'}")
    band = next(r for r in v.routes if r.max_rows is None or rows <= r.max_rows)
    return next((s for s in band.slugs if s in set(timed)), None)


def _route_slugs(problem: Problem, slug: str) -> list[str]:
    """Every step the routes of ``slug`` name, each once, in route order."""
    return list(dict.fromkeys(s for r in problem.variant(slug).routes for s in r.slugs))


def route_check(problem: Problem, slug: str, dim: str = "batch_size", *, device: str = "H200",
                path: str | Path | None = None) -> pd.DataFrame:
    """The by-batch step ``slug`` against the step each point routes to (:func:`route_for`),
    in the newest sweep that timed it, eager and every step its routes name, point by point.

    Columns: ``dim``; ``routed`` (slug) and ``routed_step`` (its number); the by-batch step's
    ``ms``, ``p10_ms``, ``p90_ms`` and ``speedup`` (over eager, same sweep); the routed step's
    ``routed_ms``, ``routed_p10_ms``, ``routed_p90_ms``, ``routed_speedup``; ``eager_ms``;
    ``ratio`` (the by-batch median over the routed one); ``verdict``: "as fast" where each
    step's median lies within the other's p10-p90 (no difference the timings can tell; a wide,
    bimodal spread of one step does not swallow the other's median), else
    "1.68x slower" / "2.46x faster";
    ``wide``: True where either spread exceeds :data:`WIDE_SPREAD`; and the sweep's run_id,
    device, timestamp and commit (for :func:`caption`). The routes are read as registered now:
    in the newest sweep they are the code that ran unless they changed after it. Empty when no
    sweep timed them all.
    """
    candidates = _route_slugs(problem, slug)
    series = sweep_series(problem, dim, device, path, having=["eager", slug, *candidates], newest=True)
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


def route_rule(problem: Problem, slug: str, dim: str = "batch_size", *, device: str = "H200",
               path: str | Path | None = None) -> pd.DataFrame:
    """The one routing rule of both problems' by-batch steps, read from the records: at each
    point of the newest sweep that timed eager and every step the routes of ``slug`` name, the
    step whose slowest tenth of calls is fastest (``chosen``: the lowest p90), beside the step
    the point routes to now (``routed``, :func:`route_for`) and each candidate's p90 (ms).
    Empty when no sweep timed them all."""
    candidates = _route_slugs(problem, slug)
    series = sweep_series(problem, dim, device, path, having=["eager", *candidates], newest=True)
    rows = []
    for point, g in series[series["variant"].isin(candidates)].groupby(dim):
        rows.append({dim: int(point), "routed": route_for(problem, slug, int(point), list(g["variant"])),
                     "chosen": g.loc[g["p90_ms"].idxmin(), "variant"],
                     **{f"{v} p90 ms": p90 for v, p90 in zip(g["variant"], g["p90_ms"])}})
    out = pd.DataFrame(rows)
    if not out.empty:
        out.attrs["caption"] = caption(series)
    return out


def by_batch_range(problem: Problem, slug: str = "faithful_by_batch", *, device: str = "H200",
                   path: str | Path | None = None) -> dict[str, float] | None:
    """The one statement of a by-batch step's speed-up over eager across batch sizes: the
    lowest and highest, and at how many points, in the newest sweep that timed eager, the step
    and every step it routes to (:func:`step_sweep`). None when no such sweep is recorded."""
    points = step_sweep(problem, slug, device=device, path=path)
    points = points[points["sweep"]]
    if points.empty:
        return None
    return {"lo": float(points["speedup"].min()), "hi": float(points["speedup"].max()),
            "points": len(points), "at_lo": int(points.loc[points["speedup"].idxmin(), "batch_size"]),
            "caption": caption(points)}


def _empty_series(cols: list[str], dim: str) -> pd.DataFrame:
    """A sweep series with no rows, typed like a real one."""
    out = pd.DataFrame({c: pd.Series(dtype=str) for c in cols})
    for c in (dim, "step"):
        out[c] = pd.Series(dtype="int64")
    for c in ("median_ms", "pct_of_floor", "tflops", "gbps", "speedup", "p10_ms", "p90_ms"):
        out[c] = pd.Series(dtype=float)
    return out
