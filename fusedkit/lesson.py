"""What one notebook step shows after its explanation and prediction: the code, the hardware
counters, then the check and the time, where this machine can, with the recorded GPU numbers
next to whatever ran here.

Live numbers and recorded numbers are always labelled as such, each recorded row with its
run's device and date; nothing is shown without saying where it came from. The
recorded frame every function here takes is :func:`fusedkit.results.recorded`: each variant's
newest clean measurement, with its speed-up against eager in its own run. Numbers are written
by :mod:`fusedkit.present`, so they read the same in every table and sentence, and :func:`say`
builds a sentence's numbers from the records instead of the prose carrying them.
"""

from __future__ import annotations

import math
import string
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
import torch

from fusedkit import present
from fusedkit.check import device_refusal
from fusedkit.hardware import GpuSpec
from fusedkit.kernels import step_path
from fusedkit.measure import SEEDS, measure
from fusedkit.mode import Mode
from fusedkit.problems import Problem, SizeError, Sizes, fmt_sizes, parse_sizes, presets
from fusedkit.results import caption, run_short_label
from fusedkit.roofline import ridge_point


def header(source: str) -> str:
    """The three opening comment lines of a step's kernel file (what, what changed, bound)."""
    lines = kernel_path(source).read_text().splitlines()[:3]
    return "\n".join(line.lstrip("/# ").rstrip() for line in lines)


def small_sizes(problem: Problem) -> Sizes:
    """Odd, small sizes for checks in Triton's CPU interpreter (seconds, not hours): the
    problem's "small, odd" preset (:mod:`fusedkit.problems.presets`)."""
    return presets.sizes(problem, presets.SMALL)


def lab_sizes(problem: Problem, sizes: Sizes, rows: int, device: str = "cpu") -> tuple[Sizes, str]:
    """``sizes`` cut to at most ``rows`` rows of the batch, for a measurement that needs only a few
    (errors are per element); where even those cannot run on ``device``
    (:meth:`~fusedkit.problems.Problem.check_runnable`: memory, or a CPU's FLOP budget), KernelBench's
    other dimensions at those rows. Returns the sizes and one line saying why they are not
    ``sizes`` ("" when they are), so that a notebook runs at any size its picker accepts."""
    batch = problem.dims[0].name
    capped = problem.sizes(sizes, **{batch: min(problem.sizes(sizes)[batch], rows)})
    try:
        problem.check_runnable(capped, device)
    except SizeError as e:
        fallback = problem.sizes(**{batch: min(rows, problem.defaults[batch])})
        return fallback, f"{e}\n-> measured at {fmt_sizes(fallback)} instead (KernelBench's other sizes)"
    cut = capped != problem.sizes(sizes)
    return capped, f"measured at {fmt_sizes(capped)}: at most {rows} rows of the batch" if cut else ""


def ridge_side(intensity: float, gpu: GpuSpec, precisions: Sequence[str] = ("fp32", "tf32", "bf16")
               ) -> tuple[str, str]:
    """Where ``intensity`` (FLOP/B) lies against ``gpu``'s datasheet ridge points of ``precisions``
    (:func:`fusedkit.roofline.ridge_point`), as two phrases of a sentence: the side, naming the
    ridge point that decides it, and what sets the floor in which precision. A sentence about a
    roofline holds at any sizes only if it is computed from them: at KernelBench's sizes problem 12
    lies right of every ridge point, at 17 x 33 x 65 left of every one."""
    ridges = {p: ridge_point(gpu, p) for p in precisions}
    left = [p for p, r in ridges.items() if intensity < r]
    right = [p for p in ridges if p not in left]
    at = lambda ps: " and ".join(f"{present.count(ridges[p])}" for p in ps) + " FLOP/B"
    names = lambda ps: " and ".join(f"{p}'s" for p in ps)
    if not left:
        top = max(ridges, key=ridges.get)
        return (f"right of every ridge point ({top}'s, the highest, at {at([top])})",
                "the arithmetic, not the bytes, sets the floor in every precision")
    if not right:
        low = min(ridges, key=ridges.get)
        return (f"left of every ridge point ({low}'s, the lowest, at {at([low])})",
                "the bytes, not the arithmetic, set the floor in every precision")
    return (f"right of {names(right)} ridge point{'s' * (len(right) > 1)} ({at(right)}) and left of "
            f"{names(left)} ({at(left)})",
            f"the arithmetic sets the floor in {' and '.join(right)}, the bytes in {' and '.join(left)}")


def short_sizes(sizes: Sizes | str) -> str:
    """``"batch_size=1024,in_features=8192,out_features=8192"`` as ``"1024 × 8192 × 8192"``
    (the problem's dimensions in their usual order)."""
    values = parse_sizes(sizes) if isinstance(sizes, str) else sizes
    return " × ".join(str(v) for v in values.values())


# -- one step's check and time -------------------------------------------------------------------

STEP_COLUMNS = ("sizes", "tier", "rel. error", "ms", "TFLOP/s", "% of floor", "% of measured",
                "speedup")


def step_rows(problem: Problem, slug: str, sizes: Sizes, mode: Mode,
              recorded: pd.DataFrame) -> list[dict[str, Any]]:
    """The raw rows behind :func:`run_step`: what ran here (if anything) and the recorded row
    of ``slug`` in ``recorded`` (:func:`fusedkit.results.recorded`), labelled with its own run."""
    v = problem.variant(slug)
    rows: list[dict[str, Any]] = []
    refusal = device_refusal(problem, v, sizes, torch.device("cuda")) if mode.gpu else ""
    if refusal:
        rows.append({"source": f"not run on {mode.device}", "tier": refusal})
    elif mode.gpu:
        rows.append(live_row(problem, slug, sizes, "cuda", label=f"live on {mode.device}"))
    elif v.triton:
        small = small_sizes(problem)
        m = measure(problem, v, small, device="cpu", time_it=False)
        rows.append({"source": "live: Triton's CPU interpreter (the logic, not the precision)",
                     "sizes": short_sizes(small),
                     "tier": ((m.tier or "logic right") if m.ok else
                              ("not run: " if m.skipped else "FAILED: ") + m.failure),
                     "rel. error": m.check.rel_error})
    hit = recorded[recorded["variant"] == slug] if not recorded.empty else recorded
    if not hit.empty:
        r = hit.iloc[0]
        rows.append({"source": "recorded: " + run_short_label(r), "where": "recorded: " + caption(r),
                     "sizes": short_sizes(r["sizes"]),
                     "tier": r["tier"], "rel. error": r["rel_error"], "ms": r["median_ms"],
                     "TFLOP/s": r["tflops"], "% of floor": r["pct_of_floor"],
                     "% of measured": r.get("pct_of_measured", math.nan),
                     "speedup": r["speedup"], "run_id": r["run_id"], "p10_ms": r["p10_ms"],
                     "p90_ms": r["p90_ms"], "repeats": r["repeats"]})
    elif not rows:
        rows.append({"source": "no GPU here and no recorded run of this step yet"})
    return rows


def run_step(problem: Problem, slug: str, sizes: Sizes, mode: Mode,
             recorded: pd.DataFrame) -> pd.DataFrame:
    """Check (and on a GPU, time) one variant; return live and recorded rows, one row per
    source, formatted by :mod:`fusedkit.present` (ms to 3 decimals, errors as 1.6e-06...).

    GPU: measured at ``sizes`` through :func:`fusedkit.measure.measure`. CPU: Triton steps are
    checked in the interpreter at :func:`small_sizes` through the same path; CUDA steps cannot
    run. Either way the recorded GPU row of ``slug`` (its newest clean measurement, from
    :func:`fusedkit.results.recorded`) is shown below, labelled with its run.
    """
    return _step_frame(step_rows(problem, slug, sizes, mode, recorded))


def _step_frame(rows: list[dict[str, Any]], variant: bool = False) -> pd.DataFrame:
    cols = (["variant"] if variant else []) + ["source", *STEP_COLUMNS]
    df = pd.DataFrame(rows).reindex(columns=cols)
    if "timer" in df.columns:
        df = df.drop(columns="timer")
    df = present.format_frame(df)
    return df.set_index(["variant", "source"] if variant else "source")


def live_row(problem: Problem, slug: str, sizes: Sizes, device: str, *, label: str,
             seeds: int = SEEDS) -> dict:
    """Measure ``slug`` at ``sizes`` on ``device`` (check, then time) as one table row of raw
    numbers (format it with :func:`fusedkit.present.format_frame`)."""
    m = measure(problem, slug, sizes, device=device, seeds=seeds)
    row = {"source": label, "sizes": short_sizes(sizes), "tier": m.tier,
           "rel. error": m.check.rel_error}
    if not m.ok:
        row["tier"] = "FAILED: " + m.failure
        return row
    row.update({"ms": m.timing.median_ms, "timer": m.timing.timer, "TFLOP/s": m.tflops,
                "% of floor": m.pct_of_floor,
                # No ceilings are measured beside a live time, and another run's (other clocks,
                # another power state) would not judge it: `fusedkit ceilings` measures them.
                "% of measured": math.nan})
    return row


def kernel_path(source: str) -> Path:
    """Absolute path of a step's kernel file (``source`` as in ``Variant.source``), validated."""
    problem, _, filename = source.partition("/")
    return step_path(problem, filename)


# -- hardware counters ---------------------------------------------------------------------------

COUNTER_VIEW = {"launch": "launch", "kernel": "kernel", "duration_us": "duration µs", "sm_pct": "SM %",
                "tensor_pct": "tensor %", "fma_pct": "FMA %", "dram_pct": "DRAM %",
                "dram_gb": "DRAM GB", "occupancy_pct": "occupancy %", "registers": "registers",
                "local_bytes": "local bytes", "l2_hit_pct": "L2 hit %", "grid": "grid",
                "block": "block", "smem_kb": "smem KB", "gld_sectors_per_request": "sectors/request",
                "l1_hit_pct": "L1 hit %", "l2_l1_gb": "L2→L1 GB", "smem_ld_conflicts": "smem ld conflicts",
                "smem_st_conflicts": "smem st conflicts"}


def short_kernel(name: str) -> str:
    """A kernel's name without namespaces, template arguments and parameter lists, the rest of
    it whole (a table wraps a long name, never cuts it: two cuBLAS kernels often differ only
    in their tile sizes, near the end); a PyTorch elementwise or reduce kernel keeps the
    operation it runs (``vectorized_elementwise_kernel: Abs``)."""
    import re  # noqa: PLC0415

    text = name.replace("void ", "", 1).strip()
    cut = min([i for i in (text.find("<"), text.find("(")) if i >= 0], default=len(text))
    base = text[:cut].split("::")[-1].strip()
    rest = text[cut:]
    ops = [m for m in re.findall(r"(CUDAFunctor_\w+|\w+Functor|\w+_kernel_cuda|\w+_kernel)\b", rest)
           if m != base]
    if ops and rest.startswith("<"):
        op = re.sub(r"_kernel(_cuda)?$|Functor$|^CUDAFunctor_", "", ops[-1])
        out = f"{base}: {op}"
    else:
        out = base
    return out


def counters(problem: Problem | str, slug: str, sizes: Sizes | str | None = None) -> pd.DataFrame:
    """The recorded Nsight Compute counters of one step, one row per kernel launch of one call
    (:func:`fusedkit.counters.step_counters`), with readable column names; ``attrs["label"]``
    says where they come from ("no counters recorded" when none are)."""
    from fusedkit.counters import step_counters  # noqa: PLC0415

    raw = step_counters(problem, slug, sizes)
    view = raw.reindex(columns=list(COUNTER_VIEW)).rename(columns=COUNTER_VIEW)
    if not raw.empty:
        view["kernel"] = [short_kernel(str(k)) for k in raw["kernel"]]
    view.attrs["label"] = raw.attrs.get("label", "no counters recorded")
    return view


def show_counters(problem: Problem | str, slugs: str | Sequence[str],
                  sizes: Sizes | str | None = None) -> Any:
    """The counters of one or several steps, formatted, in the three tables of
    :data:`COUNTER_TABLES` under one label, or one line saying none are recorded."""
    slugs = [slugs] if isinstance(slugs, str) else list(slugs)
    frames, labels = [], []
    for slug in slugs:
        c = counters(problem, slug, sizes)
        if not c.empty:
            frames.append(c.assign(variant=slug) if len(slugs) > 1 else c)
            labels.append(c.attrs["label"])
    if not frames:
        return present.md(f"*Hardware counters:* none recorded for "
                          f"{', '.join(f'`{s}`' for s in slugs)} yet (they are collected on a GPU "
                          f"with `python -m fusedkit.counters collect`).")
    df = pd.concat(frames, ignore_index=True)
    keys = ["variant", "launch"] if "variant" in df.columns else ["launch"]
    label = "; ".join(dict.fromkeys(labels))
    return _Captioned(f"Hardware counters, one row per kernel launch of one call, launches numbered "
                      f"in order ({label})",
                      *[(title, present.table(df[keys + [c for c in cols if c in df.columns]]))
                        for title, cols in COUNTER_TABLES])


COUNTER_TABLES = (
    ("the launches", ["kernel", "duration µs", "grid", "block"]),
    ("what each kept busy", ["SM %", "tensor %", "FMA %", "DRAM %", "DRAM GB", "L2 hit %", "L1 hit %",
                             "sectors/request", "L2→L1 GB"]),
    ("what each held", ["registers", "occupancy %", "smem KB", "local bytes", "smem ld conflicts",
                        "smem st conflicts"]),
)
"""The counters of :func:`show_counters` in three tables of one row per launch each, so that
each fits a page about 820 px wide and a kernel's long name has room: the kernels and their
times, the units they kept busy, the resources they held; the launch's number ties the rows of
the three together. A counter recorded for no launch is left out (:func:`fusedkit.present.table`)."""


def counter_summary(problem: Problem | str, slug: str, sizes: Sizes | str | None = None
                    ) -> dict[str, Any] | None:
    """The recorded counters of one step reduced to its main kernel (the launch that took the
    longest) and the totals of one call; None when none are recorded. Keys: ``kernel``,
    ``launches``, ``total_us`` (all launches), ``share`` (the main kernel's share of it),
    ``dram_gb_total`` and the main kernel's counters by their column names (``duration_us``,
    ``sm_pct``, ``tensor_pct``, ``fma_pct``, ``dram_pct``, ``dram_gb``, ``occupancy_pct``,
    ``registers``, ``local_bytes``, ``l2_hit_pct``, ``grid``, ``block``, ``smem_kb``), its
    ``label`` and the profile's ``timestamp``."""
    from fusedkit.counters import COUNTER_COLUMNS, step_counters  # noqa: PLC0415

    raw = step_counters(problem, slug, sizes)
    if raw.empty:
        return None
    durations = raw["duration_us"].fillna(0.0)
    main = raw.loc[durations.idxmax()]
    total = float(durations.sum())
    out = {c: main[c] for c in COUNTER_COLUMNS}
    out.update(kernel=short_kernel(str(main["kernel"])), launches=len(raw), total_us=total,
               share=float(main["duration_us"]) / total if total > 0 else math.nan,
               dram_gb_total=float(raw["dram_gb"].sum(min_count=1)), label=raw.attrs.get("label", ""),
               timestamp=main["timestamp"])
    return out


def timed_with_counters(problem: Problem, slug: str, *, device: str = "H200",
                        path: str | Path | None = None) -> pd.Series | None:
    """The clean measurement of ``slug`` that its recorded counters go with: the newest one
    taken at or before the profile (:func:`fusedkit.results.recorded` with ``as_of``), so that
    a time and the counters describe the same code, even where the step was re-timed since.
    None without counters or without such a measurement."""
    from fusedkit import results  # noqa: PLC0415

    c = counter_summary(problem, slug)
    if c is None:
        return None
    then = results.recorded(problem, device=device, path=path, as_of=c["timestamp"])
    hit = then[then["variant"] == slug]
    return hit.iloc[0] if not hit.empty else None


def counter_overview(problem: Problem, recorded: pd.DataFrame,
                     steps: Iterable[int] | None = None) -> Any:
    """One row per ladder step of ``recorded`` that has recorded counters (every step with
    counters when ``recorded`` is empty; ``steps``: only those step numbers): its % of floor, %
    of measured ceiling and time (``recorded``, each step's newest measurement), the time
    measured when the counters were taken (:func:`timed_with_counters`: the same code), the time
    its kernels took under the profiler and the difference, "recorded − profiled" (the GPU
    running none of the step's kernels, such as a wait for the host, and any difference of clocks
    between the timed loop and the profiler's replay of each kernel: it is not idle time alone
    and can be negative) and the DRAM bytes of the whole call; then, in two more tables of the
    same rows (each fits a page about 820 px wide), its main kernel with its share of the
    kernels' time, and that kernel's counters. ``body`` is the first table. One line when no
    counters are recorded."""
    shown = set(recorded["variant"]) if recorded is not None and not recorded.empty else None
    wanted = None if steps is None else {int(n) for n in steps}
    rows, labels = [], []
    for v in problem.ladder():
        if (shown is not None and v.slug not in shown) or (wanted is not None and v.number not in wanted):
            continue
        c = counter_summary(problem, v.slug)
        if c is None:
            continue
        labels.append(c["label"])
        then = timed_with_counters(problem, v.slug)
        then_ms = float(then["median_ms"]) if then is not None else math.nan
        rows.append({"step": v.number, "variant": v.slug,
                     "% of floor": value(recorded, v.slug, "pct_of_floor"),
                     "% of measured": value(recorded, v.slug, "pct_of_measured"),
                     "ms": value(recorded, v.slug), "ms when profiled": then_ms,
                     "kernels ms": c["total_us"] / 1e3,
                     RECORDED_MINUS_PROFILED: then_ms - c["total_us"] / 1e3,
                     "launches": c["launches"], "main kernel": c["kernel"],
                     "its share": 100.0 * c["share"], "SM %": c["sm_pct"],
                     "tensor %": c["tensor_pct"], "FMA %": c["fma_pct"], "DRAM %": c["dram_pct"],
                     "occupancy %": c["occupancy_pct"], "registers": c["registers"],
                     "L2 hit %": c["l2_hit_pct"], "sectors/request": c["gld_sectors_per_request"],
                     "L1 hit %": c["l1_hit_pct"], "L2→L1 GB": c["l2_l1_gb"],
                     "DRAM GB": c["dram_gb_total"]})
    if not rows:
        return present.md("*Hardware counters:* none recorded for this problem yet (they are "
                          "collected on a GPU with `python -m fusedkit.counters collect`).")
    df = pd.DataFrame(rows)
    label = "; ".join(dict.fromkeys(labels))
    formats = {"its share": present.pct, "launches": present.count, "kernels ms": present.ms,
               RECORDED_MINUS_PROFILED: present.ms_diff, "ms when profiled": present.ms}
    keys = ["step", "variant"]
    times = ["% of floor", "% of measured", "ms", "ms when profiled", "kernels ms",
             RECORDED_MINUS_PROFILED, "launches", "DRAM GB"]
    main = ["main kernel", "its share"]
    busy = [c for c in df.columns if c not in keys + times + main]
    return _Captioned(f"Each step: its recorded time (ms, newest measurement), the time measured "
                      f"with the code that was profiled (ms when profiled), the time its kernels "
                      f"took under the profiler (kernels ms), the difference ("
                      f"{RECORDED_MINUS_PROFILED}: time the GPU ran none of them, plus any clock "
                      f"difference between the timed loop and the profiler's replay) and the DRAM "
                      f"bytes of one call; below, its main kernel and that kernel's counters ({label})",
                      ("times", present.table(df[keys + times], formats=formats)),
                      ("the main kernel (the launch that took longest) and its share of the kernels' time",
                       present.table(df[keys + main], formats=formats)),
                      ("what the main kernel kept busy and held", present.table(df[keys + busy], formats=formats)))


RECORDED_MINUS_PROFILED = "recorded − profiled ms"
"""The overview's column: the time measured with the profiled code minus its kernels' time
under the profiler (:func:`idle_ms`): idle GPU time and clock differences together."""


def idle_ms(problem: Problem, slug: str) -> float:
    """The time measured with the code that was profiled (:func:`timed_with_counters`) minus
    the time its kernels took under the profiler, ms per call: how long the GPU ran none of
    ``slug``'s kernels, plus any difference of clocks between the timed loop and the
    profiler's replay (so it can be negative); NaN without counters or such a measurement."""
    then = timed_with_counters(problem, slug)
    c = counter_summary(problem, slug)
    return float(then["median_ms"]) - c["total_us"] / 1e3 if then is not None else math.nan


class _Captioned:
    """A caption line above one displayable table or several (HTML and plain text): each of
    ``parts`` a table, or a (title, table) pair whose title is shown above it. ``body`` is the
    first table."""

    def __init__(self, caption: str, *parts: Any) -> None:
        if not parts:
            raise ValueError("a captioned display needs at least one table")
        self.caption = caption
        self.parts = [p if isinstance(p, tuple) else ("", p) for p in parts]
        self.body = self.parts[0][1]

    def _repr_html_(self) -> str:
        import html  # noqa: PLC0415

        out = [f'<div style="font-size:12px; color:#57606a; margin:6px 0 2px 0;">'
               f'{html.escape(self.caption)}</div>']
        for title, body in self.parts:
            inner = body.to_html() if hasattr(body, "to_html") else body._repr_html_()
            if title:
                out.append(f'<div style="font-size:12px; font-style:italic; margin:4px 0 1px 0;">'
                           f'{html.escape(title)}</div>')
            out.append(f'<div style="overflow-x:auto; max-width:100%;">{inner}</div>')
        return "".join(out)

    def __repr__(self) -> str:
        texts = [self.caption]
        for title, body in self.parts:
            data = getattr(body, "data", body)
            texts += [title] if title else []
            texts.append(data.to_string() if hasattr(data, "to_string") else str(data))
        return "\n".join(texts)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


# -- one step, in the order a reader needs it ----------------------------------------------------

TIME_HIT = 1.10
"""A predicted *time* (no baseline) counts as right when the measurement lies within this factor
of it, either way; outside, the verdict names the miss and its direction."""
EFFECT_HIT = 1.5
"""A predicted *effect* (the change from a baseline step) has the right size when the measured
change has its sign and lies within this factor of it, either way."""


def prediction_verdict(predicted_ms: float, measured_ms: float, where: str = "", *,
                       baseline_ms: float = math.nan, baseline: str = "",
                       noise_ms: float = 0.0) -> str:
    """One sentence comparing a prediction with a measurement of the same step (both ms).

    With ``baseline_ms`` (the time of the step the prediction changes, named ``baseline``), the
    prediction is of an *effect*, ``predicted_ms - baseline_ms``, and the verdict says whether the
    measured change, ``measured_ms - baseline_ms``, had its sign and its size (within
    :data:`EFFECT_HIT`); a measured change within ``noise_ms`` (the noise of the difference of
    the two medians) is said to be too small to tell a sign. Without a baseline the prediction is
    of the time itself, right within :data:`TIME_HIT` either way; otherwise the miss is named with
    its direction."""
    if not (math.isfinite(predicted_ms) and predicted_ms > 0):
        raise ValueError(f"predicted_ms={predicted_ms!r}: a prediction is a time in ms > 0")
    if not (math.isfinite(measured_ms) and measured_ms > 0):
        return f"Predicted {present.ms(predicted_ms)} ms; nothing measured yet to hold it against."
    told = f"Predicted {present.ms(predicted_ms)} ms, measured {present.ms(measured_ms)} ms{where}"
    if math.isfinite(baseline_ms) and baseline_ms > 0:
        return told + ": " + _effect_verdict(predicted_ms - baseline_ms, measured_ms - baseline_ms,
                                             baseline_ms, baseline or "the baseline", noise_ms)
    ratio = measured_ms / predicted_ms
    if 1 / TIME_HIT <= ratio <= TIME_HIT:
        return f"{told}: right to within {present.pct(100 * (TIME_HIT - 1))} ({present.share(ratio)} of it)."
    way = (f"{present.speedup(ratio)} slower" if ratio > 1 else f"{present.speedup(1 / ratio)} faster")
    return f"{told}: **{way} than predicted**, a miss the next cell explains."


def _change(ms: float, base: float) -> str:
    """"0.046 ms slower (+7.4%)" or "4.0 µs faster (-1.6%)"."""
    size = f"{present.us(1e3 * abs(ms))} µs" if abs(ms) < 0.1 else f"{present.ms(abs(ms))} ms"
    return f"{size} {'slower' if ms > 0 else 'faster'} ({100 * ms / base:+.1f}%)"


def _effect_verdict(predicted: float, measured: float, base_ms: float, base: str, noise: float) -> str:
    """The verdict on a predicted change from a baseline time (all ms)."""
    said = f"against {base}'s {present.ms(base_ms)} ms it predicted {_change(predicted, base_ms)}"
    if predicted == 0:
        return f"{said}; no change was predicted, and the step came out {_change(measured, base_ms)}."
    if abs(measured) <= noise:
        return (f"{said} and measured {_change(measured, base_ms) if measured else 'no change'}, "
                f"within the noise of the two medians ({present.us(1e3 * noise)} µs): **no measurable "
                "effect**, so neither its sign nor its size held.")
    said += f", measured {_change(measured, base_ms)}"
    if (predicted > 0) != (measured > 0):
        return f"{said}: **the sign was wrong**, a miss the next cell explains."
    size = measured / predicted
    if 1 / EFFECT_HIT <= size <= EFFECT_HIT:
        return f"{said}: the sign and the size were right ({present.share(size)} of the predicted change)."
    return (f"{said}: the sign was right, **the size was not**: {present.share(size)} of the predicted "
            "change, a miss the next cell explains.")


def _measured(rows: list[dict[str, Any]]) -> tuple[float, str, dict[str, Any]]:
    """The time a prediction is held against: the live GPU time where one ran, else the
    recorded one, with where it comes from and the row itself."""
    for r in rows:
        ms = r.get("ms")
        if ms is not None and not present._missing(ms) and r.get("timer", "cuda-events") == "cuda-events":
            # The table row above names the run; the sentence keeps the device and date.
            return float(ms), f" ({r.get('where', r['source'])})", r
    return math.nan, "", {}


def _median_error(row: Mapping[str, Any]) -> float:
    """The standard error of a recorded row's median (ms), from its p10-p90 width and its number
    of timed calls: 1.2533 sigma / sqrt(n), sigma = (p90 - p10) / 2.5631 for a normal spread;
    0 where the row has none."""
    lo, hi, n = row.get("p10_ms"), row.get("p90_ms"), row.get("repeats")
    if any(v is None or present._missing(v) for v in (lo, hi, n)) or n < 1:
        return 0.0
    return 1.2533 * (hi - lo) / 2.5631 / math.sqrt(n)


def _baseline(problem: Problem, against: str, measured: Mapping[str, Any],
              recorded: pd.DataFrame) -> tuple[float, str, float]:
    """The baseline of an effect: ``against``'s recorded time, its name (saying so when its run
    is not the measurement's), and the noise of the difference of the two medians (ms)."""
    hit = recorded[recorded["variant"] == against] if not recorded.empty else recorded
    if hit.empty or present._missing(hit.iloc[0]["median_ms"]):
        return math.nan, "", 0.0
    b = hit.iloc[0]
    v = problem.variant(against)
    name = f"step {v.number} (`{against}`)" if v.number else f"`{against}`"
    same = measured.get("run_id") == b["run_id"]
    if not same:
        name += f", recorded in another run ({caption(b)})"
    # Two standard errors of the difference of the two medians: a smaller change has no sign.
    noise = 2 * math.hypot(_median_error(measured), _median_error(b)) if same else 0.0
    return float(b["median_ms"]), name, noise


def step(problem: Problem, slugs: str | Sequence[str], sizes: Sizes, mode: Mode,
         recorded: pd.DataFrame, *, previous: str | None = None, code: bool = True,
         names: Iterable[str] | None = None, fold: Iterable[str] = (),
         extra: Sequence[tuple[str, Sequence[str]]] = (),
         predict: float | Mapping[str, float] | None = None, basis: str = "",
         against: str | Mapping[str, str] | None = None) -> None:
    """Display one ladder step after its explanation (a markdown cell above it), in the order
    a reader needs it: the code that matters (:func:`fusedkit.source_view.show_step`, marked
    against the previous step), the prediction, the hardware counters (:func:`show_counters`),
    then the check and the time (:func:`run_step`, through :func:`fusedkit.measure.measure`)
    beside the recorded GPU numbers, and last the prediction held against the measurement.

    ``slugs`` is one variant or several that share one kernel file (shown once); ``previous``,
    ``names``, ``fold`` (functions shown folded) and ``extra`` go to the code view; ``code=False``
    leaves the code out (a step whose file was shown just above). ``predict`` is the predicted
    time in ms (one number, or one per slug), computed in the cell from numbers the page has
    shown; ``basis`` says in a few words how (shown beside it). The prediction is held against
    the live time on a GPU, else the recorded one where ``recorded`` holds the step at ``sizes``.
    ``against`` names the step a prediction changes (one for all slugs, or one per slug; its
    recorded time in ``recorded`` the baseline): the verdict then judges the predicted *effect*,
    its sign and its size (:func:`prediction_verdict`), not the time alone.
    The counters shown are those collected at ``sizes`` where there are any, else at the defaults.
    """
    from IPython.display import display  # noqa: PLC0415

    from fusedkit import source_view  # noqa: PLC0415

    slugs = [slugs] if isinstance(slugs, str) else list(slugs)
    predicted = _predictions(slugs, predict)
    if code:
        with_source = [s for s in slugs if problem.variant(s).source]
        if with_source:
            display(present.md("**The code**"))
            display(source_view.show_step(problem.key, with_source[0], previous,
                                          names=names, fold=fold, extra=extra))
    if predicted:
        told = ", ".join(f"`{s}` {present.ms(ms)} ms" if len(slugs) > 1 else f"{present.ms(ms)} ms"
                         for s, ms in predicted.items())
        display(present.md(f"**Prediction:** {told}" + (f" ({basis})" if basis else "") + "."))
    # The counters at the step's own sizes where they were collected there, else at the defaults.
    here = problem.sizes(sizes)
    profiled = here if any(not counters(problem, s, here).empty for s in slugs) else problem.defaults
    display(present.md(f"**What the hardware did** (Nsight Compute, at {short_sizes(profiled)})"))
    display(show_counters(problem, slugs, profiled))
    display(present.md("**Check and time**"))
    rows = {s: step_rows(problem, s, sizes, mode, recorded) for s in slugs}
    if len(slugs) == 1:
        table = _step_frame(rows[slugs[0]])
    else:
        table = _step_frame([dict(r, variant=s) for s in slugs for r in rows[s]], variant=True)
    display(present.Scroll(present.styled(table, ["sizes", "tier"])))
    if predicted:
        # Held against the live time, else a recorded one at the sizes predicted for.
        lines = []
        for s, ms in predicted.items():
            here_rows = [r for r in rows[s] if str(r.get("source", "")).startswith("live")
                         or r.get("sizes") == short_sizes(here)]
            measured, where, row = _measured(here_rows)
            base_slug = against.get(s) if isinstance(against, Mapping) else against
            base_ms, base, noise = (_baseline(problem, base_slug, row, recorded) if base_slug and row
                                    else (math.nan, "", 0.0))
            verdict = prediction_verdict(ms, measured, where, baseline_ms=base_ms, baseline=base,
                                         noise_ms=noise)
            lines.append(f"`{s}`: {verdict}" if len(slugs) > 1 else verdict)
        display(present.md("\n\n".join(lines)))


def _predictions(slugs: Sequence[str], predict: float | Mapping[str, float] | None) -> dict[str, float]:
    """``predict`` as one predicted time (ms) per slug; {} for none; one line for a bad value."""
    if predict is None:
        return {}
    if isinstance(predict, Mapping):
        unknown = [s for s in predict if s not in slugs]
        if unknown:
            raise ValueError(f"predict names {', '.join(unknown)}, not among this step's slugs "
                             f"({', '.join(slugs)})")
        out = {s: float(v) for s, v in predict.items()}
    else:
        out = {s: float(predict) for s in slugs}
    bad = [f"{s}={v!r}" for s, v in out.items() if not (math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"predict: {', '.join(bad)}; a prediction is a time in ms > 0")
    return out


# -- numbers from the records, in sentences ------------------------------------------------------

class RowView:
    """One recorded variant's numbers, formatted, for :func:`say` templates: ``{eager.ms}``
    gives ``2.724 ms``. Every field of a missing row is an en dash."""

    FIELDS = {"ms": ("median_ms", present.ms, " ms"), "us": ("median_ms", None, " µs"),
              "tflops": ("tflops", present.tflops, " TFLOP/s"), "pct": ("pct_of_floor", present.pct, ""),
              "mpct": ("pct_of_measured", present.pct, ""),
              "err": ("rel_error", present.err, ""), "speedup": ("speedup", present.speedup, ""),
              "gbps": ("gbps", present.gbps, " GB/s"), "mb": ("peak_mem_mb", present.mb, " MB"),
              "tier": ("tier", str, ""), "title": ("title", str, ""), "variant": ("variant", str, ""),
              "date": ("timestamp", lambda t: f"{t:%Y-%m-%d}", ""), "commit": ("commit", str, ""),
              "eager": ("eager_ms", present.ms, " ms")}

    # Counters of the step's main kernel (see counter_summary): field -> (key, format, unit).
    COUNTER_FIELDS = {"sm": ("sm_pct", present.pct, ""), "tensor": ("tensor_pct", present.pct, ""),
                      "fma": ("fma_pct", present.pct, ""), "dram": ("dram_pct", present.pct, ""),
                      "occupancy": ("occupancy_pct", present.pct, ""),
                      "l2": ("l2_hit_pct", present.pct, ""),
                      "registers": ("registers", present.count, ""),
                      "spill": ("local_bytes", present.count, " bytes"),
                      "grid": ("grid", present.count, ""), "block": ("block", present.count, ""),
                      "smem": ("smem_kb", present.mb, " KB"),
                      "kernel": ("kernel", str, ""), "launches": ("launches", present.count, ""),
                      "kernel_us": ("duration_us", present.us, " µs"),
                      "total_us": ("total_us", present.us, " µs"),
                      "share": ("share", present.share, ""),
                      "dram_gb": ("dram_gb_total", present.gb, " GB"),
                      "sectors": ("gld_sectors_per_request", present.ratio, ""),
                      "l1": ("l1_hit_pct", present.pct, ""), "l2_l1_gb": ("l2_l1_gb", present.gb, " GB"),
                      "ld_conflicts": ("smem_ld_conflicts", present.count, ""),
                      "st_conflicts": ("smem_st_conflicts", present.count, "")}

    def __init__(self, row: pd.Series | None, missing: list[str] | None = None, name: str = "",
                 problem: Problem | None = None) -> None:
        self._row, self._missing, self._name, self._problem = row, missing, name, problem
        self._counters: dict[str, Any] | None = None

    def _counter(self, key: str) -> str:
        col, fmt, unit = self.COUNTER_FIELDS[key]
        if self._counters is None and self._problem is not None:
            self._counters = counter_summary(self._problem, self._name) or {}
        got = (self._counters or {}).get(col)
        if got is None or (not isinstance(got, str) and present._missing(got)):
            if self._missing is not None:
                self._missing.append(f"{self._name} (counters)")
            return present.MISSING
        return fmt(got) + unit

    def __getattr__(self, key: str) -> str:
        if key in self.COUNTER_FIELDS:
            return self._counter(key)
        if key.startswith("_") or key not in self.FIELDS:
            raise AttributeError(f"{key!r}: a recorded row offers {', '.join(self.FIELDS)}; its "
                                 f"counters offer {', '.join(self.COUNTER_FIELDS)}")
        col, fmt, unit = self.FIELDS[key]
        if self._row is None or col not in self._row.index or present._missing(self._row[col]):
            if self._missing is not None:
                self._missing.append(self._name)
            return present.MISSING
        value = self._row[col]
        if key == "us":
            return present.us(1000.0 * float(value)) + unit
        return fmt(value) + unit


class _Numbers(dict):
    def __init__(self, recorded: pd.DataFrame, values: Mapping[str, Any], missing: list[str],
                 problem: Problem | None = None):
        super().__init__(values)
        self._recorded, self._missing, self._problem = recorded, missing, problem

    def __missing__(self, key: str) -> RowView:
        rec = self._recorded
        hit = rec[rec["variant"] == key] if not rec.empty and "variant" in rec.columns else rec.iloc[0:0]
        return RowView(hit.iloc[0] if not hit.empty else None, self._missing, key, self._problem)


def say(template: str, recorded: pd.DataFrame | None = None, problem: Problem | None = None,
        *, needs: Sequence[str] = (), **values: Any) -> present.Markdown:
    """Markdown whose numbers come from the records: ``{slug.field}`` is the recorded row of
    ``slug`` in ``recorded`` (fields: ms, us, tflops, pct (of floor), err, speedup, gbps, mb,
    tier, title, the date and commit of its run, and eager: eager's time in that run), already
    formatted with its unit; with ``problem`` given, the recorded counters of the step's main
    kernel too (``{tiled.fma}``: sm, tensor, fma, dram, occupancy, l2, registers, spill, grid,
    block, smem, kernel, launches, kernel_us, total_us, share, dram_gb; see
    :func:`counter_summary`). Other ``{name}`` fields come from ``values`` (format
    them with :mod:`fusedkit.present`). When a row is missing (no recorded run, no counters),
    its numbers read as an en dash and a note says so. ``needs`` names steps whose counters the
    sentence cannot do without: when one has none, one line says so instead of the sentence."""
    if needs and problem is not None:
        absent = [s for s in needs if counter_summary(problem, s) is None]
        if absent:
            return present.Markdown(f"*No counters recorded for {', '.join(f'`{s}`' for s in absent)}: "
                                    f"this explanation waits for them.*")
    missing: list[str] = []
    rec = recorded if recorded is not None else pd.DataFrame()
    text = string.Formatter().vformat(template, (), _Numbers(rec, values, missing, problem))
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        text += f"\n\n*(No recorded numbers for {names}: shown as –.)*"
    return present.Markdown(text)


def value(recorded: pd.DataFrame, slug: str, column: str = "median_ms") -> float:
    """One recorded number of ``slug`` (NaN when the run or the row is missing)."""
    if recorded is None or recorded.empty or column not in recorded.columns:
        return math.nan
    hit = recorded.loc[recorded["variant"] == slug, column]
    return float(hit.iloc[0]) if not hit.empty and not present._missing(hit.iloc[0]) else math.nan
