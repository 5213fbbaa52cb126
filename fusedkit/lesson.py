"""One notebook page's numbers and one ladder step as a reader needs it. A :class:`Page` takes its
numbers from one device: on a GPU the one at hand, measured live; on a CPU the records of
:func:`fusedkit.results.page_device`, each labelled with its device and date. Every number of a
sentence comes from them (:meth:`Page.say`), never typed into the prose.
"""

from __future__ import annotations

import base64
import html
import io
import math
import string
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
import torch

from fusedkit import ceilings, clocks, counters, hardware, present, records, results, source_view
from fusedkit.device import time_ceilings
from fusedkit.harness import measure
from fusedkit.mode import Mode
from fusedkit.problems import Problem, SizeError, Sizes, fmt_sizes, parse_sizes, presets

HELD = 0.10   # a predicted time holds when the measured median lies within this share of it


def small_sizes(problem: Problem) -> Sizes:
    """The problem's "small, odd" preset: sizes Triton's CPU interpreter checks in seconds."""
    return presets.sizes(problem, presets.SMALL)


def short_sizes(sizes: Sizes | str) -> str:
    """``1024 × 8192 × 8192``: the sizes' values in the problem's order."""
    return present.sizes(sizes if isinstance(sizes, str) else fmt_sizes(sizes))


def lab_sizes(problem: Problem, sizes: Sizes, rows: int, device: str = "cpu") -> tuple[Sizes, str]:
    """``sizes`` cut to at most ``rows`` rows of the batch (else KernelBench's other sizes at those
    rows, where even those do not run on ``device``), and one line saying why ("" when unchanged)."""
    batch = problem.dims[0].name
    cut = problem.sizes(sizes, **{batch: min(problem.sizes(sizes)[batch], rows)})
    try:
        problem.check_runnable(cut, device)
    except SizeError as e:
        cut = problem.sizes(**{batch: min(rows, problem.defaults[batch])})
        return cut, f"{e}\n-> measured at {fmt_sizes(cut)} instead (KernelBench's other sizes)"
    return cut, (f"measured at {fmt_sizes(cut)}: at most {rows} rows of the batch"
                 if cut != problem.sizes(sizes) else "")


# -- the ceilings one run measured ---------------------------------------------------------------

@dataclass(frozen=True)
class Rates:
    """The ceilings one run measured (:mod:`fusedkit.ceilings`), at a problem's sizes: what a
    prediction is computed from. Every method gives NaN where the run measured no such ceiling."""

    problem: Problem
    sizes: Sizes
    frame: pd.DataFrame
    run_id: str = ""

    def rate(self, kind: str, operands: str = "", mnk: tuple[int, int, int] | None = None) -> float:
        """GB/s (copy, dram_read, l2_read) or TFLOP/s (gemm of ``operands``, at ``mnk``, default
        the problem's first GEMM at these sizes)."""
        if kind == "gemm" and mnk is None:
            mnk = ceilings.gemm_shapes(self.problem, self.sizes)[0]
        return ceilings.rate(self.frame, kind, operands, mnk)

    def copy_ms(self, nbytes: float) -> float:
        """``nbytes`` moved at the copy rate, ms."""
        return nbytes / (self.rate("copy") * 1e6)

    def gemm_ms(self, operands: str) -> float:
        """Every GEMM stage of the problem at cuBLAS's rate of ``operands`` at its own shape, ms."""
        return sum(2 * m * n * k / (self.rate("gemm", operands, (m, n, k)) * 1e9)
                   for m, n, k in ceilings.gemm_shapes(self.problem, self.sizes))

    def floor_ms(self, precision: str) -> float:
        """The measured floor of a fused kernel in ``precision`` (:func:`ceilings.measured_floor`)."""
        f = ceilings.measured_floor(self.problem, self.sizes, precision, self.frame)
        return f.floor_ms if f is not None else math.nan


# -- a page ----------------------------------------------------------------------------------------

class Page:
    """One notebook page's numbers for ``problem``: one device, its ceilings and its steps."""

    def __init__(self, problem: Problem, sizes: Sizes, mode: Mode) -> None:
        self.problem, self.mode = problem, mode
        if mode.gpu:
            self.device, self.gpu = torch.cuda.get_device_name(), hardware.detect_gpu().spec
        else:
            self.device = results.page_device(problem)
            self.gpu = hardware.match_device_name(self.device) or hardware.spec(hardware.DEFAULT_GPU)
        here = results.recorded(problem, sizes, device=self.device)
        self.sizes = problem.sizes(sizes) if mode.gpu or not here.empty else problem.defaults
        self.recorded = here if self.sizes == problem.sizes(sizes) else results.recorded(
            problem, self.sizes, device=self.device)
        self._ceilings = ceilings.read_ceilings()
        self._live: Rates | None = None
        where = (f"live on {self.device}" if mode.gpu else
                 f"the records of {present.device(self.device)}, {results.caption(self.recorded).split(', ', 1)[-1]}")
        self.label = f"{problem.key} at {short_sizes(self.sizes)}: {where}"

    def __repr__(self) -> str:
        return self.label

    def row(self, slug: str) -> pd.Series | None:
        hit = self.recorded[self.recorded["variant"] == slug]
        return hit.iloc[0] if len(hit) else None

    def t(self, slug: str, column: str = "median_ms") -> float:
        """One recorded number of ``slug`` (NaN where it is not recorded)."""
        r = self.row(slug)
        return float(r[column]) if r is not None and pd.notna(r[column]) else math.nan

    def rates(self, slug: str | None = None) -> Rates:
        """The ceilings of the run that timed ``slug`` (default: eager's), at the page's sizes;
        on a GPU those measured here."""
        if self.mode.gpu:
            if self._live is None:
                rows = time_ceilings(records.RunContext.collect(), ceilings.gemm_shapes(self.problem, self.sizes))
                self._live = Rates(self.problem, self.sizes, ceilings.ceilings_frame(pd.DataFrame(rows)))
            return self._live
        r = self.row(slug or "eager")
        run = str(r["run_id"]) if r is not None else ""
        frame = ceilings.for_problem(self.problem, ceilings.of_run(run, ceilings=self._ceilings), self.sizes)
        return Rates(self.problem, self.sizes, frame, run)

    def say(self, template: str, **values: Any) -> present.Markdown:
        """Markdown whose ``{slug.field}`` are the page's recorded numbers (:class:`RowView`), other
        ``{names}`` from ``values``; a missing number reads as a dash, and a note says so."""
        missing: list[str] = []
        text = string.Formatter().vformat(template, (), _Numbers(self, values, missing))
        if missing:
            text += f"\n\n*(Not recorded on {present.device(self.device)}: {', '.join(dict.fromkeys(missing))}.)*"
        return present.Markdown(text)

    def step(self, slugs: str | Sequence[str], *, predict: Any = None, basis: str = "",
             against: str | None = None, counters: Sequence[str] = (), code: bool = True,
             previous: str | None = None, extra: Sequence[tuple[str, Sequence[str]]] = ()) -> None:
        """Show one step (or several variants of one file): the code it changed, the prediction (ms,
        or a function of the :class:`Rates` it is held against; a mapping per slug), the ``counters``
        that decide it, the measured time and the verdict; with ``against``, whether the predicted
        *change* from that step is beyond the two timings' spread (:func:`fusedkit.results.level`)."""
        from IPython.display import HTML, display  # noqa: PLC0415

        slugs = [slugs] if isinstance(slugs, str) else list(slugs)
        unknown = [s for s in slugs if s not in self.problem.variants]
        if unknown:
            raise ValueError(f"slugs={unknown}: not variants of {self.problem.key}")
        if code and self.problem.variant(slugs[0]).source:
            display(source_view.show_step(self.problem.key, slugs[0], previous, extra=extra))
        lines = []
        for i, slug in enumerate(slugs):
            name = f"`{slug}`: " if len(slugs) > 1 else ""
            measured, row, text = self._measure(slug, interpret=i == 0)
            guess = predict.get(slug) if isinstance(predict, Mapping) else predict
            ms = self._predicted(guess, slug)
            if ms is not None:
                lines.append(f"{name}**Prediction:** {_ms_text(ms)}" + (f" ({basis})" if basis else ""))
            if counters:
                lines.append(name + counter_line(self.problem, slug, counters, self.sizes))
            lines.append(f"{name}**Measured:** {text}")
            if ms is not None:
                lines.append(f"{name}**Verdict:** " + self._verdict(ms, measured, row, against))
        display(present.Markdown("\n\n".join(lines)))
        if counters:
            folded = counter_tables(self.problem, slugs, self.sizes)
            if folded:
                display(HTML(folded))

    def _measure(self, slug: str, interpret: bool = True) -> tuple[float, pd.Series | None, str]:
        """(ms, row, text) of the time a step is held against: live on a GPU, else its recorded row; on a
        CPU the first variant of a Triton file is also checked in the interpreter at small sizes."""
        v = self.problem.variant(slug)
        if self.mode.gpu:
            m = measure(self.problem, v, self.sizes, device="cuda")
            if not m.ok:
                return math.nan, None, f"not measured here: {m.failure}"
            row = pd.Series(m.row())
            return m.timing.median_ms, row, _timing_text(row, f"live on {self.device}")
        live = ""
        if v.triton and interpret:
            small = small_sizes(self.problem)
            m = measure(self.problem, v, small, device="cpu", time_it=False, seeds=1)
            live = (f"; in Triton's CPU interpreter at {short_sizes(small)}: "
                    + (f"{m.tier or 'logic right'}" if m.ok else ("not run: " if m.skipped else "FAILED: ") + m.failure))
        r = self.row(slug)
        if r is None:
            return math.nan, None, f"not recorded on {present.device(self.device)} at {short_sizes(self.sizes)}{live}"
        return float(r["median_ms"]), r, _timing_text(r, results.run_short_label(r)) + live

    def _predicted(self, guess: Any, slug: str) -> float | None:
        if guess is None:
            return None
        ms = float(guess(self.rates(slug)) if callable(guess) else guess)
        return ms if math.isfinite(ms) and ms > 0 else None

    def _verdict(self, predicted: float, ms: float, row: pd.Series | None, against: str | None) -> str:
        if not math.isfinite(ms):
            return "nothing measured to hold it against."
        if against is None:
            ratio = ms / predicted
            return f"measured {ratio:.2f}x the prediction: " + (
                f"**held** (within ±{HELD:.0%})." if abs(ratio - 1) <= HELD else "**missed**.")
        base = self.row(against)
        if base is None or row is None:
            return f"no recorded `{against}` to measure the change from."
        change, told = ms - float(base["median_ms"]), predicted - float(base["median_ms"])
        where = "" if row.get("run_id") == base.get("run_id") else " (another run)"
        said = f"predicted {present.ms_diff(told)} ms against `{against}`{where}, measured {present.ms_diff(change)} ms"
        if results.level(row, base):
            return f"{said}: **no measurable change**, the two p10–p90 ranges overlap."
        if (told > 0) != (change > 0):
            return f"{said}: **the sign was wrong**."
        return f"{said}: the sign held, {change / told:.0%} of the predicted size."


def _ms_text(ms: float) -> str:
    return f"{present.ms(ms)} ms" if ms >= 0.01 else f"{present.us(1e3 * ms)} µs"


def _timing_text(r: pd.Series, where: str) -> str:
    """``0.617 ms (p10 0.598, p90 0.645), 4.41x eager fp32, fp32-faithful, rel. error 1.1e-07 (H200, 2026-12-04)``."""
    spread = (f" (p10 {present.ms(r['p10_ms'])}, p90 {present.ms(r['p90_ms'])})"
              if pd.notna(r.get("p10_ms")) else "")
    speed = f", {present.speedup(r['speedup'])} eager fp32" if pd.notna(r.get("speedup")) else ""
    return (f"{_ms_text(float(r['median_ms']))}{spread}{speed}, {r['tier']}, rel. error "
            f"{present.err(r['rel_error'])} ({where})")


# -- counters --------------------------------------------------------------------------------------

COUNTER_FIELDS = {
    "sm": ("sm_pct", present.pct, "SM busy {}"), "tensor": ("tensor_pct", present.pct, "tensor pipe {}"),
    "fma": ("fma_pct", present.pct, "FMA pipe {}"), "dram": ("dram_pct", present.pct, "DRAM busy {}"),
    "occupancy": ("occupancy_pct", present.pct, "occupancy {}"),
    "registers": ("registers", present.count, "{} registers a thread"),
    "l1": ("l1_hit_pct", present.pct, "L1 hit {}"), "l2": ("l2_hit_pct", present.pct, "L2 hit {}"),
    "sectors": ("gld_sectors_per_request", present.ratio, "{} sectors per request"),
    "dram_gb": ("dram_gb", present.gb, "{} GB from DRAM"), "l2_l1_gb": ("l2_l1_gb", present.gb, "{} GB L2→L1"),
    "smem": ("smem_kb", present.mb, "{} KB shared memory"),
    "st_conflicts": ("smem_st_conflicts", present.count, "{} shared-store conflicts"),
    "ld_conflicts": ("smem_ld_conflicts", present.count, "{} shared-load conflicts"),
    "grid": ("grid", present.count, "{} blocks"),
}
"""Counter keys a step names: (column of ``data/counters.csv``, format, what it is)."""


def _step_counters(problem: Problem, slug: str, sizes: Sizes | None) -> pd.DataFrame:
    """The newest counters of ``slug`` at ``sizes``, else at the defaults."""
    raw = counters.step_counters(problem, slug, sizes)
    return raw if not raw.empty or sizes is None else counters.step_counters(problem, slug)


def counter_summary(problem: Problem, slug: str, sizes: Sizes | None = None) -> dict[str, Any] | None:
    """The newest counters of ``slug`` (at ``sizes``, else the defaults) of its main kernel, the
    longest launch, and the call's totals; a share above 100% (Nsight can say so) NaN; None if none."""
    raw = _step_counters(problem, slug, sizes)
    if raw.empty:
        return None
    main = raw.loc[raw["duration_us"].fillna(0.0).idxmax()]
    out = {c: (math.nan if c.endswith("_pct") and main[c] > 100 else main[c]) for c in counters.COUNTER_COLUMNS}
    out.update(kernel=counters.short_kernel(str(main["kernel"])), launches=len(raw),
               total_us=float(raw["duration_us"].sum()), dram_gb=float(raw["dram_gb"].sum(min_count=1)),
               label=f"{present.device(main['device'])}, {main['timestamp']:%Y-%m-%d}",
               timestamp=main["timestamp"], sizes=main["sizes"], device=main["device"])
    return out


def counter_line(problem: Problem, slug: str, keys: Sequence[str], sizes: Sizes | None = None) -> str:
    """One line: the main kernel's time under Nsight Compute and the counters ``keys``, with
    the time measured with the same build beside the profiled one."""
    bad = [k for k in keys if k not in COUNTER_FIELDS]
    if bad:
        raise ValueError(f"counters={bad}: not counter keys; valid: {', '.join(COUNTER_FIELDS)}")
    c = counter_summary(problem, slug, sizes)
    if c is None:
        return "**Counters:** none recorded (collected on a GPU with `python -m fusedkit.counters collect`)."
    said = ", ".join(COUNTER_FIELDS[k][2].format(COUNTER_FIELDS[k][1](c[COUNTER_FIELDS[k][0]])) for k in keys
                     if not present._missing(c[COUNTER_FIELDS[k][0]]))
    then = results.recorded(problem, parse_sizes(c["sizes"]), device=c["device"], as_of=c["timestamp"])
    then = then[then["variant"] == slug]
    same = (f"; timed − profiled, same build: {present.ms(then['median_ms'].iloc[0])} − "
            f"{present.ms(c['total_us'] / 1e3)} = {present.ms_diff(then['median_ms'].iloc[0] - c['total_us'] / 1e3)} ms"
            if len(then) else "")
    return (f"**Counters** (Nsight Compute, {c['label']}): `{c['kernel']}` "
            f"{_ms_text(c['duration_us'] / 1e3)} of {c['launches']} launch{'es' * (c['launches'] > 1)}"
            f"{'; ' + said if said else ''}{same}.")


def counter_tables(problem: Problem, slugs: Sequence[str], sizes: Sizes | None = None) -> str:
    """Every counter of ``slugs``, one row per launch, as HTML folded in a ``<details>``."""
    frames = [raw.assign(variant=slug, kernel=[counters.short_kernel(str(k)) for k in raw["kernel"]])
              for slug in slugs if not (raw := _step_counters(problem, slug, sizes)).empty]
    if not frames:
        return ""
    df = pd.concat(frames, ignore_index=True)
    pct = [c for c in counters.COUNTER_COLUMNS if c.endswith("_pct")]
    df[pct] = df[pct].where(df[pct] <= 100)
    cols = ["variant"] * (len(slugs) > 1) + ["launch", "kernel", *counters.COUNTER_COLUMNS]
    table = present.table(df[cols]).to_html()
    return (f"<details><summary>Every counter, one row per launch of one call (Nsight Compute; a "
            f"share Nsight reported above 100% is left out)</summary><div style='overflow-x:auto'>"
            f"{table}</div></details>")


# -- numbers in sentences ----------------------------------------------------------------------------

class RowView:
    """One recorded step's numbers for :meth:`Page.say`: ``{eager.ms}`` gives ``2.724 ms``;
    ``{eager.fma}`` a counter of its main kernel (:data:`COUNTER_FIELDS`)."""

    FIELDS: dict[str, tuple[str, Callable[[Any], str], str]] = {
        "ms": ("median_ms", present.ms, " ms"), "p10": ("p10_ms", present.ms, " ms"),
        "p90": ("p90_ms", present.ms, " ms"), "speedup": ("speedup", present.speedup, ""),
        "pct": ("pct_of_floor", present.pct, ""), "mpct": ("pct_of_measured", present.pct, ""),
        "err": ("rel_error", present.err, ""), "tier": ("tier", str, ""),
        "tflops": ("tflops", present.tflops, " TFLOP/s"), "gbps": ("gbps", present.gbps, " GB/s"),
        "eager": ("eager_ms", present.ms, " ms")}

    def __init__(self, page: Page, slug: str, missing: list[str]) -> None:
        self._page, self._slug, self._missing = page, slug, missing

    def __getattr__(self, key: str) -> str:
        if key in COUNTER_FIELDS:
            c = counter_summary(self._page.problem, self._slug, self._page.sizes) or {}
            col, fmt, _ = COUNTER_FIELDS[key]
            value, unit = c.get(col, math.nan), ""
        elif key in self.FIELDS:
            col, fmt, unit = self.FIELDS[key]
            row = self._page.row(self._slug)
            value = row[col] if row is not None else math.nan
        else:
            raise AttributeError(f"{key!r}: a step offers {', '.join(self.FIELDS)} and the counters "
                                 f"{', '.join(COUNTER_FIELDS)}")
        if present._missing(value):
            self._missing.append(self._slug)
            return present.MISSING
        return fmt(value) + unit


class _Numbers(dict):
    def __init__(self, page: Page, values: Mapping[str, Any], missing: list[str]) -> None:
        super().__init__(values)
        self._page, self._missing = page, missing

    def __missing__(self, key: str) -> RowView:
        if key not in self._page.problem.variants:
            raise KeyError(f"{{{key}}}: neither a value given nor a variant of {self._page.problem.key}")
        return RowView(self._page, key, self._missing)


def details(summary: str, body: Any) -> Any:
    """``body`` folded under ``summary``: HTML text, anything with ``_repr_html_`` or
    ``to_html`` (a table), or a matplotlib figure (drawn here, closed, shown as a PNG)."""
    from IPython.display import HTML  # noqa: PLC0415

    if hasattr(body, "savefig"):
        import matplotlib.pyplot as plt  # noqa: PLC0415

        buf = io.BytesIO()
        body.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        plt.close(body)
        inner = f"<img src='data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}'>"
    else:
        inner = (body if isinstance(body, str) else body.to_html() if hasattr(body, "to_html")
                 else body._repr_html_())
    return HTML(f"<details><summary>{html.escape(summary)}</summary>"
                f"<div style='overflow-x:auto'>{inner}</div></details>")


# -- the clock over each timed loop --------------------------------------------------------------

def clock_table(page: Page, slugs: Sequence[str]) -> pd.DataFrame:
    """The one clocks computation: for cuBLAS's fp16 ceiling in the page's eager run and each of
    ``slugs``, the SM clock over its timed loop (:func:`fusedkit.clocks.over_window`), its share of
    the datasheet's rate, and that share at its own clock; a dash where a row has no timing window."""
    readings, rec = clocks.read_clocks(), results.clean_rows(results._read(None))
    hit = rec[(rec["run_id"] == page.rates().run_id) & (rec["variant"] == f"{ceilings.GEMM_PREFIX}fp16")]
    share = float(hit["tflops"].iloc[-1]) / page.gpu.peak_tflops("fp16") if len(hit) else math.nan
    rows = [("cuBLAS fp16 (ceiling)", hit.iloc[-1], "fp16", share)] if len(hit) else []
    for slug in slugs:
        r = page.row(slug)
        if r is not None:
            rows.append((slug, r, page.problem.variant(slug).precision, float(r["pct_of_floor"]) / 100))
    out = []
    for what, r, precision, share in rows:
        w = clocks.over_window(r, readings)
        mhz = w.sm_median_mhz if w else math.nan
        out.append({"what": what, "ms": r["median_ms"], "% of floor": 100 * share, "MHz over its loop": mhz,
                    "capped": 100 * w.capped_share if w else math.nan,
                    "% of floor at that clock": 100 * share * page.gpu.implied_clock_ghz(precision) * 1e3 / mhz})
    return pd.DataFrame(out)


def clock_verdict(table: pd.DataFrame) -> str:
    """What :func:`clock_table` lets a reader conclude, in one sentence."""
    known = table.dropna(subset=["MHz over its loop"])
    if known.empty:
        return ("None of these rows has a timing window (rows recorded before the harness kept one "
                "have none), so the clock over their loops is not known and this page draws no "
                "conclusion from clocks: a gap to the datasheet is the kernel's and the clock's together.")
    return "; ".join(f"`{r['what']}` ran its loop at {present.count(r['MHz over its loop'])} MHz: "
                     f"{present.pct(r['% of floor'])} of the datasheet floor is "
                     f"{present.pct(r['% of floor at that clock'])} of the floor at that clock"
                     for _, r in known.iterrows()) + ". What remains of each gap is the kernel's own."
