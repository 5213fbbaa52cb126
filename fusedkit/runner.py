"""Run a problem's ladder: every chosen variant through the one measuring path
(:func:`fusedkit.harness.measure`), each row recorded as soon as it is measured, so a run that
dies half-way keeps what it finished.

:func:`ladder` is the generator every driver consumes (this module's :func:`run_ladder`, the
size sweeps, the explorer, the lessons, the probes): every plan is made first, so a bad argument
is refused before anything runs, then each is measured in turn. On a GPU a recorded run also
measures the device's ceilings and reads its clocks beside it (:mod:`fusedkit.device`), and
times the problem's memory-bound components against a copy of the same bytes.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from fusedkit import device as beside, records
from fusedkit.ceilings import add_pct_of_measured
from fusedkit.clocks import path_for as clocks_path
from fusedkit.hardware import GpuSpec, detect_gpu
from fusedkit.harness import CANNOT_RUN, CPU_BUDGET_S, REP_MS, SEEDS, WARMUP_MS, Measurement, Plan, measure, plan
from fusedkit.problems import Problem, Sizes, fmt_sizes
from fusedkit.results import add_speedup


def plans(problem: Problem, sizes: Sizes, variants: Sequence[str] | None = None, *,
          device: str | torch.device | None = None, **options: object) -> list[Plan]:
    """The plan of each chosen variant (all, in ladder order, by default), every argument
    checked before anything runs (:func:`fusedkit.harness.plan`)."""
    return [plan(problem, v, sizes, device=device, **options) for v in problem.ladder(variants)]


def ladder(problem: Problem, sizes: Sizes, variants: Sequence[str] | None = None, *,
           device: str | torch.device | None = None, **options: object) -> Iterator[Measurement]:
    """Each chosen variant measured at ``sizes``, one :class:`~fusedkit.harness.Measurement` at
    a time; one that cannot run here is yielded ``skipped``, with why."""
    for p in plans(problem, sizes, variants, device=device, **options):
        yield measure(p)


def run_ladder(problem: Problem, sizes: Sizes, *, variants: Sequence[str] | None = None,
               device: str | torch.device | None = None, seeds: int = SEEDS,
               warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS,
               records_path: Path | None = None, ceilings: bool = True,
               components: Sequence[str] | None = None, progress: bool = True,
               ctx: records.RunContext | None = None, gpu: GpuSpec | None = None,
               clocks_beside: bool | None = None, budget_s: float = CPU_BUDGET_S) -> pd.DataFrame:
    """Measure the chosen variants at ``sizes`` and append each clean row to the records
    (``records_path``, default :func:`fusedkit.records.path_for` the device). Returns a row per
    variant measured, with ``speedup`` against eager of this run; a fault is named on the console
    and in ``failure``, never recorded. ``ctx`` makes the rows part of an existing run (a sweep);
    ``clocks_beside`` says whether this call reads the clocks (default: when it owns the run);
    ``ceilings=False`` when the caller measured them for the run; ``budget_s`` as
    :func:`fusedkit.harness.plan` takes it (an estimate above it is refused, not run)."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    chosen = plans(problem, sizes, variants, device=device, seeds=seeds, warmup_ms=warmup_ms,
                   rep_ms=rep_ms, budget_s=budget_s)
    owner = ctx is None if clocks_beside is None else clocks_beside
    ctx = ctx or records.RunContext.collect()
    path = records.path_for(device, records_path)
    gpu = gpu or detect_gpu().spec
    out = []
    run = [p for p in chosen if not p.refusal]
    for p in chosen:
        if p.refusal:
            tqdm.write(f"skipped {p.refusal.removeprefix(CANNOT_RUN + ': ')}")
    if run:
        tqdm.write(f"{problem.key} at {fmt_sizes(sizes)}: {len(run)} variant(s), about "
                   f"{sum(p.estimate_s for p in run):.0f} s here (estimated)")
    with (beside.sampling(ctx.run_id, clocks_path(path), say=tqdm.write)
          if owner and device.type == "cuda" else contextlib.nullcontext()):
        if device.type == "cuda" and ceilings and run:
            gpu, rows = beside.measure_ceilings(ctx, gpu, problem, [sizes])
            records.append_rows(path, rows)
        for p in tqdm(run, desc=f"{problem.key} ladder", unit="variant", disable=not progress):
            m = measure(replace(p, gpu=gpu))
            tqdm.write(f"{m.summary()} ({m.seconds:.1f} s in all, first build and call "
                       f"{m.build_s:.1f} s)")
            if not m.timed:
                out.append(dict(problem=problem.key, sizes=fmt_sizes(sizes), variant=m.variant.slug,
                                failure=m.failure))
                continue
            row = m.row()
            records.append_rows(path, [records.make_row(ctx, **row)])
            out.append(row)
        df = add_speedup(pd.DataFrame(out), by=("sizes",))
        if device.type == "cuda" and run and (components is None or components):
            parts = [time_component(problem, c, sizes, device, ctx, path, warmup_ms, rep_ms)
                     for c in problem.components.values() if components is None or c.slug in components]
            df = pd.concat([df, pd.DataFrame(parts)], ignore_index=True)
    if device.type == "cuda" and not df.empty and "median_ms" in df:
        df = add_pct_of_measured(df.assign(device=ctx.device, run_id=ctx.run_id), problem,
                                 path=path).drop(columns=["device", "run_id"])
    return df


def time_component(problem: Problem, comp, sizes: Sizes, device: torch.device,
                   ctx: records.RunContext, path: Path, warmup_ms: float, rep_ms: float) -> dict:
    """Time one memory-bound component and a device copy of the same bytes; record both."""
    fn, nbytes = comp.make(sizes, device)
    t, _ = beside.time_fn(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, device=device)
    tc = beside.time_copy(nbytes, device, warmup_ms=warmup_ms, rep_ms=rep_ms)
    gbps, copy_gbps = nbytes / (t.median_ms * 1e6), nbytes / (tc.median_ms * 1e6)
    pct = 100.0 * gbps / copy_gbps
    at = fmt_sizes(sizes)
    records.append_rows(path, [
        records.make_row(ctx, problem=problem.key, sizes=at, variant=comp.slug, timer=t.timer,
                         median_ms=t.median_ms, p10_ms=t.p10_ms, p90_ms=t.p90_ms, repeats=t.repeats,
                         gbps=gbps, notes=f"component; {pct:.1f}% of a d2d copy of the same bytes "
                                          f"({copy_gbps:.0f} GB/s)"),
        records.make_row(ctx, problem=problem.key, sizes=at, variant=f"d2d_copy_for_{comp.slug}",
                         timer=tc.timer, median_ms=tc.median_ms, p10_ms=tc.p10_ms, p90_ms=tc.p90_ms,
                         repeats=tc.repeats, gbps=copy_gbps, notes=f"copy of {nbytes:.0f} bytes read + written")])
    tqdm.write(f"{comp.slug}: {t.median_ms:.4f} ms, {gbps:.0f} GB/s = {pct:.1f}% of a same-size copy "
               f"({copy_gbps:.0f} GB/s)")
    return {"variant": comp.slug, "median_ms": t.median_ms, "gbps": gbps, "pct_of_copy": pct}
