"""Run a problem's ladder: every variant through the one measuring path
(:func:`fusedkit.measure.measure`: check, then time), each row recorded at once.

TFLOP/s, GB/s and % of floor stand beside every time, and on a GPU the % of the ceilings
measured in the same run (:mod:`fusedkit.ceilings`), with the SM clock and power read beside
the run (:mod:`fusedkit.clocks`). Each variant's record is appended as soon as it is
measured, so a run that dies half-way keeps what it finished.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from fusedkit import bench, clocks, records
from fusedkit import ceilings as device_ceilings
from fusedkit.check import device_refusal
from fusedkit.hardware import GpuSpec, detect_gpu
from fusedkit.interpreter_cost import run_seconds
from fusedkit.measure import REP_MS, SEEDS, WARMUP_MS, measure
from fusedkit.problems import Problem, Sizes, Variant, fmt_sizes
from fusedkit.results import add_speedup


def runnable(problem: Problem, names: Sequence[str] | None, sizes: Sizes,
             device: torch.device, seeds: int = SEEDS) -> tuple[list[Variant], list[str]]:
    """Variants that can run on ``device`` (each measured on ``seeds`` builds), and one note per
    variant left out (and why)."""
    chosen, skipped = [], []
    for v in problem.ladder(names):
        reason = device_refusal(problem, v, sizes, device, seeds=seeds)
        if reason:
            skipped.append(f"{v.slug}: {reason}")
        else:
            chosen.append(v)
    return chosen, skipped


def ladder(problem: Problem, sizes: Sizes, variants: Sequence[str] | None = None, *,
           device: str | torch.device | None = None, **options: object) -> Iterator:
    """Each chosen variant of ``problem`` (all, in ladder order, by default) measured at ``sizes``
    (:func:`fusedkit.harness.measure`, with ``options`` as :func:`fusedkit.harness.plan` takes
    them), one :class:`~fusedkit.harness.Measurement` at a time; a variant that cannot run here
    is yielded ``skipped``, with why. Every argument is checked before the first measurement."""
    from fusedkit.harness import measure as measure_plan, plan   # noqa: PLC0415 - facade for now

    plans = [plan(problem, v, sizes, device=device, **options) for v in problem.ladder(variants)]
    for p in plans:
        yield measure_plan(p)


def measure_ceilings(ctx: records.RunContext, gpu: GpuSpec, problem: Problem | None = None,
                     sizes: Sequence[Sizes] = ()) -> tuple[GpuSpec, list[dict]]:
    """Measure the device's ceilings for this run (:func:`fusedkit.ceilings.measure`: copy, DRAM
    and L2 reads, cuBLAS at ``problem``'s GEMM shapes at each of ``sizes``, default its own
    defaults); return ``gpu`` with the measured copy bandwidth in place of the datasheet's (the
    recorded % of floor uses it) and the rows, not yet appended."""
    shapes = device_ceilings.gemm_shapes(problem, list(sizes) or None) if problem is not None else []
    rows = device_ceilings.measure(ctx, shapes, say=tqdm.write, gpu=gpu)
    copy_gbps = next(float(r["gbps"]) for r in rows if r["variant"] == device_ceilings.COPY)
    return gpu.with_measurements(mem_gbps=copy_gbps), rows


def run_ladder(problem: Problem, sizes: Sizes, *, variants: Sequence[str] | None = None,
               device: str | torch.device | None = None, seeds: int = SEEDS,
               warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS,
               records_path: Path | None = None, ceilings: bool = True,
               components: Sequence[str] | None = None, progress: bool = True,
               ctx: records.RunContext | None = None, gpu: GpuSpec | None = None,
               clocks_beside: bool | None = None) -> pd.DataFrame:
    """Check and time the chosen variants of ``problem`` at ``sizes`` through
    :func:`fusedkit.measure.measure`; append each clean row to the records as it is measured.

    Returns one row per variant that was measured: the appended records plus ``speedup``
    against eager measured in this run; a variant whose check or timing found a fault is
    reported on the console and in the frame (``failure``), never recorded.
    ``records_path=None`` writes to :func:`fusedkit.records.path_for` the device.
    On a GPU the problem's memory-bound components are timed too, each against a copy of
    the same bytes (``components=[]`` skips them).

    ``ctx`` makes the rows part of an existing run (one ``run_id``, as a size sweep needs;
    default: a new run, whose SM clock and power are read beside it into the clocks file next
    to the records). ``gpu`` is the spec the floors are computed on (default: the detected
    GPU's datasheet with the copy bandwidth measured when ``ceilings`` is true on a GPU). A
    caller that shares ``ctx`` over several calls measures the ceilings once itself and passes
    ``ceilings=False``: a run records each ceiling once. On a GPU the frame also has
    ``pct_of_measured`` (:func:`fusedkit.ceilings.add_pct_of_measured`). ``clocks_beside`` says
    whether this call reads the clocks (default: when ``ctx`` is None); a caller that made
    ``ctx`` only to know the run's ``run_id`` (the command line, which counts the rows of its
    own run when stopped) passes True.
    """
    sizes = problem.sizes(sizes)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    problem.check_runnable(sizes, device)
    chosen, skipped = runnable(problem, variants, sizes, device, seeds)
    for note in skipped:
        tqdm.write(f"skipped {note}")
    if ctx is not None and not isinstance(ctx, records.RunContext):
        raise TypeError(f"ctx={ctx!r} is not a RunContext; use records.RunContext.collect()")
    owner = ctx is None if clocks_beside is None else clocks_beside   # the whole run: clocks beside it
    ctx = ctx or records.RunContext.collect()
    path = records.path_for(device, records_path)
    sampler = (clocks.sampling(ctx.run_id, clocks.path_for(path), say=tqdm.write)
               if owner and device.type == "cuda" else contextlib.nullcontext())
    with sampler:
        df = _run(problem, sizes, chosen, device, seeds, warmup_ms, rep_ms, path, ceilings,
                  components, progress, ctx, gpu)
    if device.type == "cuda" and not df.empty and "median_ms" in df:
        df = device_ceilings.add_pct_of_measured(df.assign(device=ctx.device, run_id=ctx.run_id),
                                          problem, path=path).drop(columns=["device", "run_id"])
    return df


def _run(problem: Problem, sizes: Sizes, chosen: list[Variant], device: torch.device, seeds: int,
         warmup_ms: float, rep_ms: float, path: Path, measure_ceilings_too: bool,
         components: Sequence[str] | None, progress: bool, ctx: records.RunContext,
         gpu: GpuSpec | None) -> pd.DataFrame:
    """The body of :func:`run_ladder`: ceilings, then each variant, then the components."""
    gpu = gpu or detect_gpu().spec
    if device.type == "cuda" and measure_ceilings_too:
        gpu, rows = measure_ceilings(ctx, gpu, problem, [sizes])
        records.append_rows(path, rows)
    out = []
    bar = tqdm(chosen, desc=f"{problem.key} ladder", unit="variant", disable=not progress)
    for v in bar:
        bar.set_postfix_str(v.slug)
        if v.triton and device.type == "cpu":
            seconds = run_seconds(problem, v, sizes, seeds=seeds, time_it=True)
            tqdm.write(f"{v.slug}: about {seconds:.0f} s in Triton's CPU interpreter (estimated)")
        m = measure(problem, v, sizes, device=device, seeds=seeds, warmup_ms=warmup_ms,
                    rep_ms=rep_ms, gpu=gpu)
        # Wall-clock cost of the harness itself, so a slow check or build shows up in the log
        # (both are recorded too: the seconds and build_s columns).
        tqdm.write(f"{m.summary()} ({m.seconds:.1f} s in all, first build and call "
                   f"{m.build_s:.1f} s)")
        if not m.timed:
            out.append(dict(problem=problem.key, sizes=fmt_sizes(sizes), variant=v.slug,
                            failure=m.failure))
            continue
        row = m.record_fields()
        records.append_rows(path, [records.make_row(ctx, **row)])
        out.append(row)
    df = add_speedup(pd.DataFrame(out), by=("sizes",))
    if device.type == "cuda" and (components is None or components):
        parts = [time_component(problem, comp, sizes, device, ctx, path, warmup_ms, rep_ms)
                 for comp in problem.components.values()
                 if components is None or comp.slug in components]
        df = pd.concat([df, pd.DataFrame(parts)], ignore_index=True)
    return df


def time_component(problem: Problem, comp, sizes: Sizes, device: torch.device,
                   ctx: records.RunContext, path: Path, warmup_ms: float, rep_ms: float) -> dict:
    """Time one memory-bound component and a device copy of the same bytes; record both."""
    fn, nbytes = comp.make(sizes, device)
    t = bench.time_fn(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, device=device)
    tc = bench.time_copy(nbytes, device, warmup_ms=warmup_ms, rep_ms=rep_ms)
    gbps, copy_gbps = nbytes / (t.median_ms * 1e-3) / 1e9, nbytes / (tc.median_ms * 1e-3) / 1e9
    pct = 100.0 * gbps / copy_gbps
    rows = [
        records.make_row(ctx, problem=problem.key, sizes=fmt_sizes(sizes), variant=comp.slug,
                         timer=t.timer, median_ms=t.median_ms, p10_ms=t.p10_ms, p90_ms=t.p90_ms,
                         repeats=t.repeats, gbps=gbps,
                         notes=f"component; {pct:.1f}% of a d2d copy of the same bytes ({copy_gbps:.0f} GB/s)"),
        records.make_row(ctx, problem=problem.key, sizes=fmt_sizes(sizes), variant=f"d2d_copy_for_{comp.slug}",
                         timer=tc.timer, median_ms=tc.median_ms, p10_ms=tc.p10_ms, p90_ms=tc.p90_ms,
                         repeats=tc.repeats, gbps=copy_gbps, notes=f"copy of {nbytes:.0f} bytes read + written"),
    ]
    records.append_rows(path, rows)
    tqdm.write(f"{comp.slug}: {t.median_ms:.4f} ms, {gbps:.0f} GB/s = {pct:.1f}% of a same-size copy "
               f"({copy_gbps:.0f} GB/s)")
    return {"variant": comp.slug, "median_ms": t.median_ms, "gbps": gbps, "pct_of_copy": pct}
