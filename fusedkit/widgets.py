"""ipywidgets controls for the notebooks: pick a problem's sizes, see mistakes explained,
and run chosen variants of its ladder live.

The picker is the first cell of each notebook after its parameters cell (``SIZES``, which
``python -m fusedkit report --sizes`` fills); it starts at ``SIZES.get(key)`` and later cells
read ``picker.sizes``. A button per preset (KernelBench's, small and odd) sets all boxes at
once. A bad value never raises inside a widget callback: the message appears
under the inputs, and ``picker.sizes`` keeps the last valid sizes. The explorer
(:class:`LadderExplorer`) reuses the picker and adds a variant list and a Run button. Each is
displayed with its picture (:mod:`fusedkit.widget_pictures`), which a reopened notebook shows
once the kernel that drew the widget has ended.
"""

from __future__ import annotations

import base64
import functools
import html
import io
import os
import threading
import time
from datetime import datetime, timezone

import ipywidgets as w
import matplotlib.pyplot as plt
import pandas as pd
import torch

from fusedkit import records, widget_pictures
from fusedkit.check import SEEDS, device_refusal, evaluations, one_line
from fusedkit.dashboard import nearest_records
from fusedkit.hardware import detect_gpu
from fusedkit.mode import Mode
from fusedkit.plots import variant_bars
from fusedkit.present import format_frame
from fusedkit.problems import Problem, SizeError, Sizes, fmt_sizes, presets
from fusedkit.interpreter_cost import RUN_SECONDS_BUDGET
from fusedkit.isolation import CALL_TIMEOUT_S
from fusedkit.interrupts import route_kernel_interrupt, stoppable
from fusedkit.interpreter_cost import run_seconds
from fusedkit.measure import REP_MS, WARMUP_MS, measure
from fusedkit.results import add_speedup
from fusedkit.roofline import fused_floor, readable, table



def _step_order(problem: Problem) -> list:
    """The ladder's variants, the references first, then by step number (stable)."""
    return sorted(problem.variants.values(), key=lambda v: (not v.baseline, v.number))


@functools.cache
def _cpu_flops_per_s(dtype: torch.dtype) -> float:
    """This CPU's GEMM rate in ``dtype``, measured once at 1024 x 1024 x 1024 (best of three
    after a warm-up: smaller products run several times slower and would say too little)."""
    a = torch.randn(1024, 1024, dtype=dtype)
    a @ a
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t0)
    return 2 * 1024**3 / max(best, 1e-9)


def _run_seconds(problem: Problem, v, sizes: Sizes, gpu: bool, seeds: int) -> float:
    """Predicted seconds the explorer spends on one variant: on a GPU its timing budgets plus
    its checks; on a CPU, Triton's interpreter model, or the check's evaluations (a third of
    them the float64 references, the rest eager and the variant in fp32) at this CPU's
    measured GEMM rates."""
    if gpu:
        return (WARMUP_MS + REP_MS) / 1e3 + 0.5
    if v.triton:
        return run_seconds(problem, v, sizes, seeds=seeds, time_it=False)
    per_eval = problem.flops(sizes) * (1 / _cpu_flops_per_s(torch.float64)
                                       + 2 / _cpu_flops_per_s(torch.float32)) / 3
    return evaluations(seeds) * per_eval


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s >= 1.5 else "a second or less"

# Layouts that fit a 1280-pixel page (and a narrower notebook): fixed widths never exceed
# their column, rows wrap, and the output area scrolls a wide table instead of the page.
_ROW = dict(flex_flow="row wrap", max_width="100%")


def _fixed(width: str) -> w.Layout:
    """A widget ``width`` wide, or as wide as its column when that is narrower."""
    return w.Layout(width=width, max_width="100%")


class SizePicker:
    """One integer box per dimension of ``problem``, and a button per preset of sizes.

    The boxes start at ``sizes`` (validated: a bad value raises :class:`SizeError` here; a
    dimension left out keeps KernelBench's value), or KernelBench's sizes when ``sizes`` is None,
    which is what ``SIZES.get("p12")`` gives a notebook run without ``report --sizes``.
    ``presets`` holds one button per named preset of the problem
    (:mod:`fusedkit.problems.presets`), ``reset`` is KernelBench's.
    """

    #: The class of the picker's outer box, and with ``-p12`` its problem's: a report reads the
    #: sizes a notebook ran at from the boxes of its first picker of each problem.
    DOM_CLASS = "fusedkit-size-picker"

    def __init__(self, problem: Problem, sizes: Sizes | None = None, *,
                 to_use: str = "re-run the cells below to use them") -> None:
        self.problem = problem
        self.to_use = to_use           # what the reader does next with accepted sizes
        start = problem.sizes(sizes)   # refused before any widget exists
        self._valid: Sizes = dict(start)
        style = {"description_width": "110px"}
        self.boxes = {d.name: w.IntText(value=start[d.name], description=d.name, style=style,
                                        tooltip=d.description,
                                        layout=_fixed("260px"))
                      for d in problem.dims}
        self.message = w.HTML()
        # width "auto": the whole label shows ("KernelBench si…" at ipywidgets' default width).
        self.presets = {label: w.Button(description=f"{label} sizes", icon="undo" if i == 0 else "",
                                        tooltip=f"{preset.about}: {fmt_sizes(values)}",
                                        layout=w.Layout(width="auto", max_width="100%"))
                        for i, ((label, values), preset)
                        in enumerate(zip(presets.of(problem).items(), presets.PRESETS))}
        for label, button in self.presets.items():
            button.on_click(lambda _, chosen=presets.of(problem)[label]: self.set_sizes(chosen))
        self.reset = self.presets[presets.KERNELBENCH.label]
        for box in self.boxes.values():
            box.observe(self._changed, names="value")
        hints = "".join(f"<li><code>{d.name}</code>: {d.description}, default {d.default}, "
                        f"1 to {d.maximum}</li>" for d in problem.dims)
        self.widget = w.VBox([
            w.HTML(f"<b>Sizes for {problem.key}: {problem.title}</b><ul>{hints}</ul>"),
            w.HBox(list(self.boxes.values())[:2], layout=w.Layout(**_ROW)),
            w.HBox(list(self.boxes.values())[2:], layout=w.Layout(**_ROW)),
            w.HBox([w.HTML("presets:"), *self.presets.values()], layout=w.Layout(**_ROW)),
            self.message,
        ], layout=w.Layout(max_width="100%"))
        self.widget.add_class(self.DOM_CLASS)
        self.widget.add_class(f"{self.DOM_CLASS}-{problem.key}")   # whose sizes it holds
        self._changed()

    def _changed(self, _change: object = None) -> None:
        raw = {name: box.value for name, box in self.boxes.items()}
        try:
            self._valid = self.problem.sizes(raw)
        except SizeError as e:
            self.message.value = f"<span style='color:#b00'>⚠ {e}. Still using the last valid sizes.</span>"
            return
        preset = presets.matching(self.problem, self._valid)
        named = f" (the {html.escape(preset.label)} preset)" if preset else ""
        # Valid sizes may still be too big to check here (memory for every copy the harness
        # holds, int32 indexing, a CPU's FLOP budget): say so now, not when a cell refuses.
        try:
            self.problem.check_runnable(self._valid, "cuda" if torch.cuda.is_available() else "cpu")
        except SizeError as e:
            self.message.value = (f"<span style='color:#a60'>⚠ sizes accepted{named}, but too big to "
                                  f"measure here: {html.escape(str(e))}. Cells that only read "
                                  "records still use them.</span>")
            return
        self.message.value = (f"<span style='color:#070'>✓ sizes accepted{named}; "
                              f"{html.escape(self.to_use)}.</span>")

    def set_sizes(self, sizes: Sizes) -> None:
        """Set the boxes (validated first: a bad value raises SizeError here)."""
        sizes = self.problem.sizes(sizes)
        for name, value in sizes.items():
            self.boxes[name].value = value

    @property
    def sizes(self) -> Sizes:
        """The last valid sizes the boxes held."""
        return dict(self._valid)

    @property
    def error(self) -> str:
        """The current problem with the boxes' values, or "" when they are valid."""
        try:
            self.problem.sizes({n: b.value for n, b in self.boxes.items()})
        except SizeError as e:
            return str(e)
        return ""

    def _ipython_display_(self) -> None:
        widget_pictures.show(self.widget, f"the sizes picker for {self.problem.key}")


class LadderExplorer:
    """Pick sizes, a precision and some variants of ``problem``, press Run, see what they do.

    GPU (``mode.gpu``): each chosen variant (and eager, the baseline of the speed-ups) is
    checked on fresh seeds, then timed; a table and a bar chart appear in :attr:`output`.
    Nothing is written to ``data/``: use ``python -m fusedkit bench`` for records.

    CPU: the roofline and each variant's predicted floor on the GPU the notebooks plan for
    are recomputed for the sizes; Triton variants are checked in Triton's interpreter when
    the whole check fits its budget; CUDA variants are reported as needing a GPU; and the
    recorded GPU measurements at the nearest sizes (from ``recorded_path``, default the
    records file) are shown, labelled with device, date and their sizes.

    The Run button starts :meth:`start`: the run works in a thread of its own, so the kernel
    stays free to hear the Cancel button (or the toolbar's interrupt, routed by
    :func:`fusedkit.interrupts.route_kernel_interrupt`); Run is disabled until it ends, and
    the status beside the bar ends as done, failed or interrupted. Before it starts, the
    message gives one estimate of the whole run, the figure a refusal of it would quote.
    :meth:`run` does the same in the caller's thread (scripts and tests); the last result is
    kept on :attr:`result`. A mistake (bad sizes, sizes that do not fit, nothing selected) is
    explained in :attr:`message`; nothing here raises.
    """

    SEEDS_CPU = 2   # builds checked per variant on a CPU (each on two inputs, plus an odd shape)
    SEEDS_GPU = SEEDS

    def __init__(self, problem: Problem, mode: Mode, recorded_path: str | os.PathLike[str] | None = None) -> None:
        self.problem, self.mode = problem, mode
        self.recorded_path = recorded_path
        self.picker = SizePicker(problem, to_use="press Run to use them")
        self.result = pd.DataFrame()
        self.status = "idle"           # idle, running, done, failed or interrupted
        self._refused = False          # the message says why the last Run did not start
        self._ran: tuple[Sizes, tuple[str, ...]] | None = None   # what the tables below show
        self._device = "cuda" if mode.gpu else "cpu"   # where live checks run
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        ladder = _step_order(problem)
        precisions = list(dict.fromkeys(v.precision for v in ladder))
        self.precision = w.Dropdown(options=["all", *precisions], value="all", description="precision")
        self.variants = w.SelectMultiple(options=self._options("all"), value=(),
                                         description="variants", rows=len(ladder),
                                         layout=_fixed("640px"))
        self.precision.observe(self._filter, names="value")
        for box in self.picker.boxes.values():   # after the picker's own: its sizes are current
            box.observe(self._choices_changed, names="value")
        self.variants.observe(self._choices_changed, names="value")
        self.button = w.Button(description="Run", icon="play", button_style="primary",
                               tooltip="check (and on a GPU, time) the chosen variants")
        self.button.on_click(lambda _: self.start())
        self.cancel = w.Button(description="Cancel", icon="stop", disabled=True,
                               tooltip="stop the run after the kernel call now running")
        self.cancel.on_click(lambda _: self.request_stop())
        self.progress = w.IntProgress(value=0, min=0, max=1, description="idle",
                                      style={"description_width": "initial"},
                                      layout=_fixed("420px"))
        self.message = w.HTML()
        self.output = w.Output(layout=w.Layout(max_width="100%", overflow="auto"))
        where = (f"live on {mode.device}: checked and timed, not recorded" if mode.gpu else
                 "no GPU here: roofline, Triton's interpreter at small sizes, and the nearest "
                 "recorded GPU runs")
        self.widget = w.VBox([
            self.picker.widget,
            w.HTML(f"<b>Variants</b> ({where}); ctrl- or shift-click to choose several"),
            w.HBox([self.precision], layout=w.Layout(**_ROW)), self.variants,
            w.HBox([self.button, self.cancel, self.progress], layout=w.Layout(**_ROW)),
            self.message, self.output,
        ], layout=w.Layout(max_width="100%"))

    # -- choices -------------------------------------------------------------------------
    def _options(self, precision: str) -> list[tuple[str, str]]:
        """(label, slug) of the ladder's variants of ``precision`` ("all": every one), in step
        order, the references first."""
        out = []
        for v in _step_order(self.problem):
            if precision in ("all", v.precision):
                kind = "CUDA, GPU only" if v.needs_gpu else ("Triton" if v.triton else "PyTorch")
                step = "reference" if v.baseline else f"step {v.number}"
                out.append((f"{step}: {v.slug} ({v.precision}, {kind})", v.slug))
        return out

    def _filter(self, _change: object = None) -> None:
        keep = self.variants.value
        self.variants.options = self._options(self.precision.value)
        allowed = {slug for _, slug in self.variants.options}
        self.variants.value = tuple(s for s in keep if s in allowed)

    def select(self, slugs: list[str] | tuple[str, ...]) -> None:
        """Choose ``slugs`` (setting the precision filter to "all" first, so all can show)."""
        unknown = [s for s in slugs if s not in self.problem.variants]
        if unknown:
            raise ValueError(f"slugs={unknown!r} are not variants of {self.problem.key}; "
                             f"valid: {', '.join(self.problem.variants)}")
        self.precision.value = "all"
        self.variants.value = tuple(slugs)

    def _choices_changed(self, _change: object = None) -> None:
        """Sizes or variants changed between runs: a refusal of the last Run no longer applies
        (it is cleared), and tables of a finished run are labelled as that run's."""
        if self.status == "running":
            return
        if self._refused:
            self._refused = False
            self.message.value = ""
        elif self._ran is not None and self.output.outputs and \
                self._ran != (self.picker.sizes, tuple(self.variants.value)):
            sizes, slugs = self._ran
            self.message.value = ("<span style='color:#a60'>⚠ the tables below are from the last "
                                  f"run ({len(slugs)} variant(s) at {html.escape(fmt_sizes(sizes))}); "
                                  "press Run for the sizes and variants chosen now.</span>")

    def _refuse(self, text: str) -> None:
        """Say why Run did not start; the bar and the tables of an earlier run are cleared, so
        that nothing under the message looks like its result."""
        self._say(text)
        self._refused, self._ran = True, None
        self.output.outputs, self.result = (), pd.DataFrame()
        self.status = "idle"
        self.progress.value, self.progress.bar_style, self.progress.description = 0, "", "not run"

    def _say(self, text: str, ok: bool = False) -> None:
        colour, mark = ("#070", "✓") if ok else ("#b00", "⚠")
        self.message.value = f"<span style='color:{colour}'>{mark} {html.escape(text)}</span>"

    # -- output area (written directly, so it works with or without a running kernel) -----
    def _show_table(self, title: str, df: pd.DataFrame) -> None:
        df = format_frame(df)   # the workbook's one number formatting (fusedkit.present)
        self.output.outputs += ({"output_type": "display_data", "metadata": {},
                                 "data": {"text/html": f"<b>{html.escape(title)}</b><div "
                                          "style='overflow-x:auto;max-width:100%'>"
                                          f"{df.to_html()}</div>",
                                          "text/plain": f"{title}\n{df.to_string()}"}},)

    def _show_line(self, text: str) -> None:
        self.output.append_stdout(text.rstrip("\n") + "\n")

    def _show_figure(self, fig: plt.Figure) -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)   # shown once, here, not again by the inline backend
        self.output.outputs += ({"output_type": "display_data", "metadata": {},
                                 "data": {"image/png": base64.b64encode(buf.getvalue()).decode(),
                                          "text/plain": "<bar chart>"}},)

    # -- the estimate, the same figure a refusal quotes ------------------------------------
    def estimate(self, sizes: Sizes, chosen: list[str]) -> tuple[float, dict[str, str]]:
        """Predicted seconds of the whole run of ``chosen`` at ``sizes``, and, per variant this
        run leaves out, why (a GPU step on a CPU, a check over the interpreter's budget)."""
        device = torch.device(self._device)
        total, left_out = 0.0, {}
        for slug in self._with_baseline(chosen):
            v = self.problem.variant(slug)
            reason = device_refusal(self.problem, v, sizes, device, seeds=self._seeds,
                                    time_it=self.mode.gpu)
            seconds = 0.0
            if not reason:
                seconds = _run_seconds(self.problem, v, sizes, self.mode.gpu, self._seeds)
                if not self.mode.gpu and not v.triton and seconds > RUN_SECONDS_BUDGET:
                    reason = (f"would take about {seconds:.0f} s checked on this CPU "
                              f"({evaluations(self._seeds)} evaluations); allowed: "
                              f"{RUN_SECONDS_BUDGET:.0f} s; pick smaller sizes")
            if reason:
                left_out[slug] = reason
            else:
                total += seconds
        return total, left_out

    @property
    def _seeds(self) -> int:
        return self.SEEDS_GPU if self.mode.gpu else self.SEEDS_CPU

    def _with_baseline(self, chosen: list[str]) -> list[str]:
        """On a GPU, eager is measured too: the speed-ups need it."""
        return ["eager", *chosen] if self.mode.gpu and "eager" not in chosen else list(chosen)

    # -- the run -------------------------------------------------------------------------
    def _plan(self) -> tuple[Sizes, list[str], float, dict[str, str]] | None:
        """The sizes, the chosen variants, the estimate and the variants left out; or None after
        saying what is wrong (bad sizes, sizes that do not fit, nothing selected)."""
        if self.picker.error:
            self._refuse(f"{self.picker.error}. Fix the sizes above, then press Run again.")
            return None
        chosen = list(self.variants.value)
        if not chosen:
            self._refuse("no variant is selected: choose one or more in the list (ctrl- or "
                         "shift-click for several; the precision menu filters the list).")
            return None
        sizes = self.picker.sizes
        try:
            self.problem.check_runnable(sizes, self._device)   # memory for every harness copy
        except SizeError as e:
            self._refuse(f"{e}. Pick smaller sizes, then press Run again.")
            return None
        total, left_out = self.estimate(sizes, chosen)
        return sizes, chosen, total, left_out

    def start(self) -> None:
        """What the Run button does: check the choices, then run in a thread of its own (one
        run at a time); Cancel or the kernel's interrupt stops it between kernel calls."""
        if self._thread is not None and self._thread.is_alive():
            self._say("a run is already working: wait for it, or press Cancel.")
            return
        plan = self._plan()
        if plan is None:
            return
        route_kernel_interrupt()   # in the main thread, inside the click's message handler
        self._begin(plan)
        self._thread = threading.Thread(target=self._execute, args=plan, daemon=True,
                                        name=f"fusedkit explorer {self.problem.key}")
        self._thread.start()

    def wait(self, timeout: float | None = None) -> pd.DataFrame:
        """Wait for a run begun by :meth:`start` (or the Run button) to end; its result."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.result

    def request_stop(self) -> None:
        """What Cancel does: the run stops after the kernel call now running."""
        if self.status == "running":
            self._stop.set()
            self.progress.description = "cancelling"
            self._say("cancelling: the run stops after the kernel call now running.")

    def run(self) -> pd.DataFrame:
        """Check (on a GPU: and time) the chosen variants at the chosen sizes, in this thread;
        show and return one row per variant (also kept on :attr:`result`). Invalid choices give
        an empty frame and a message; nothing here raises."""
        plan = self._plan()
        if plan is None:
            self.output.outputs, self.result = (), pd.DataFrame()
            return self.result
        self._begin(plan)
        self._execute(*plan)
        return self.result

    def _begin(self, plan: tuple[Sizes, list[str], float, dict[str, str]]) -> None:
        sizes, chosen, total, left_out = plan
        self.output.outputs, self.result = (), pd.DataFrame()
        self._refused, self._ran = False, (dict(sizes), tuple(chosen))
        self._stop.clear()
        self.status = "running"
        self.button.disabled, self.cancel.disabled = True, False
        self.progress.description, self.progress.bar_style = "running", ""
        runs = len(self._with_baseline(chosen)) - len(left_out)
        skipped = f"; {len(left_out)} left out (see the table)" if left_out else ""
        self._say(f"running {runs} variant(s) of {self.problem.key} at {fmt_sizes(sizes)}: "
                  f"about {_seconds(total)} in all (estimated){skipped}; each kernel runs in a "
                  f"process of its own, and a call that takes over {CALL_TIMEOUT_S:g} s counts "
                  "as hung", ok=True)

    def _execute(self, sizes: Sizes, chosen: list[str], total: float,
                 left_out: dict[str, str]) -> None:
        t0 = time.perf_counter()
        self._rows: list[dict] = []
        try:
            with stoppable(self._stop):
                self.result = (self._run_live(sizes, chosen, left_out) if self.mode.gpu
                               else self._run_cpu(sizes, chosen, left_out))
            failed = [r["variant"] for r in self._rows
                      if any(str(r.get(c, "")).startswith(("FAILED", "ERROR"))
                             for c in ("tier", "live here"))]
            took = f"{time.perf_counter() - t0:.0f} s (estimated {_seconds(total)})"
            ran = sum(r["variant"] not in left_out for r in self._rows)
            what = f"{ran} of {len(self._rows)} variant(s)" if left_out else f"{ran} variant(s)"
            if left_out:   # what ran, and what did not and why: the table has a row for each
                why: dict[str, list[str]] = {}
                for slug, reason in left_out.items():
                    why.setdefault(reason, []).append(slug)
                what += " ran; left out: " + "; ".join(f"{', '.join(slugs)} ({reason})"
                                                       for reason, slugs in why.items())
            if failed:
                self._end("failed", f"failed: {', '.join(failed)} (see the table); {what}; took {took}")
            else:
                self._end("done", f"done: {what} in {took}" if not left_out else
                          f"done: {what}; took {took}")
        except KeyboardInterrupt:   # Cancel, or the kernel's interrupt (interrupts.Interrupted)
            finished = len(self._rows)
            self.result = pd.DataFrame(self._rows)
            if finished:
                self._show_table(f"{finished} variant(s) finished before the interrupt",
                                 self.result.set_index("variant"))
            self._end("interrupted", f"interrupted: nothing recorded ({finished} variant(s) had "
                                     "finished; their rows are below)" if finished else
                                     "interrupted: nothing recorded")
        except Exception as e:  # noqa: BLE001 - a widget callback must never show a traceback
            self._show_line(f"run failed: {one_line(e)}")
            self._end("failed", "failed: the run stopped; see the line below.")

    def _end(self, status: str, text: str) -> None:
        self.status = status
        self.progress.description = status
        self.progress.bar_style = {"done": "success", "failed": "danger"}.get(status, "warning")
        self.button.disabled, self.cancel.disabled = False, True
        if status == "done":
            self._say(text, ok=True)
        else:
            colour = "#b00" if status == "failed" else "#a60"
            self.message.value = f"<span style='color:{colour}'>⚠ {html.escape(text)}</span>"

    def _start(self, total: int) -> None:
        self.progress.max, self.progress.value = max(total, 1), 0

    def _step(self, slug: str) -> None:
        self.progress.description = slug

    def _run_live(self, sizes: Sizes, chosen: list[str], left_out: dict[str, str]) -> pd.DataFrame:
        """GPU mode: measure every chosen variant plus eager; table and bar chart."""
        problem, device = self.problem, self._device
        slugs = self._with_baseline(chosen)   # speed-ups need eager
        gpu = detect_gpu().spec
        self._start(len(slugs))
        rows = self._rows
        for slug in slugs:
            self._step(slug)
            v = problem.variant(slug)
            row: dict = {"variant": slug, "precision": v.precision}
            if slug in left_out:
                row["tier"] = f"not run: {left_out[slug]}"
                rows.append(row)
                self.progress.value += 1
                continue
            try:
                m = measure(problem, v, sizes, device=device, gpu=gpu, seeds=self._seeds)
                if m.skipped:
                    row["tier"] = "not run: " + m.failure
                elif not m.ok:
                    row["tier"] = "FAILED: " + m.failure
                else:
                    row.update(tier=m.tier, rel_error=m.check.rel_error, median_ms=m.timing.median_ms,
                               p10_ms=m.timing.p10_ms, p90_ms=m.timing.p90_ms, timer=m.timing.timer,
                               tflops=m.tflops, pct_of_floor=m.pct_of_floor, build_s=m.build_s,
                               call_memory_mb=m.peak_mem_mb)
            except Exception as e:  # noqa: BLE001 - one variant's failure must not stop the rest
                row["tier"] = f"ERROR: {one_line(e)}"
                self._show_line(f"{slug}: {row['tier']}")
            rows.append(row)
            self.progress.value += 1
        df = add_speedup(pd.DataFrame(rows), by=())
        timed = df[df["median_ms"].notna()] if "median_ms" in df else df.iloc[0:0]
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        title = f"{problem.key} at {fmt_sizes(sizes)}, live on {self.mode.device}, {stamp} (not recorded)"
        self._show_table(title, df.set_index("variant"))
        if not timed.empty and "eager" in set(timed["variant"]):
            self._show_figure(variant_bars(timed, title=title))
        return df

    def _run_cpu(self, sizes: Sizes, chosen: list[str], left_out: dict[str, str]) -> pd.DataFrame:
        """CPU mode: roofline and floors, interpreter checks where affordable, nearest records."""
        problem = self.problem
        detected = detect_gpu()
        gpu = detected.spec
        precision = self.precision.value if self.precision.value != "all" else "fp32"
        self._show_line(f"{detected.reason}\nRoofline at {fmt_sizes(sizes)}, {precision} GEMMs:")
        self._show_table(f"roofline on {gpu.name} ({precision}; each column in the unit that shows "
                         "its values)", readable(table(problem, sizes, gpu, precision)))
        self._start(len(chosen))
        device = torch.device(self._device)
        rows = self._rows
        for slug in chosen:
            self._step(slug)
            v = problem.variant(slug)
            row = {"variant": slug, "precision": v.precision,
                   "floor_ms": fused_floor(problem, sizes, gpu, v.precision).floor_ms}
            if slug in left_out:
                row["live here"] = left_out[slug]
            else:
                try:
                    m = measure(problem, v, sizes, device=device, seeds=self.SEEDS_CPU, time_it=False)
                    where = ("checked in Triton's CPU interpreter (precision flags ignored: logic, "
                             "not precision)" if v.triton else "checked on the CPU")
                    row["live here"] = f"{where}, {m.check.calls} calls"
                    if m.ok:
                        row.update(tier=m.tier or "logic right", rel_error=m.check.rel_error)
                    else:
                        row["tier"] = "FAILED: " + m.failure
                except Exception as e:  # noqa: BLE001 - one variant's failure must not stop the rest
                    row["live here"] = f"ERROR: {one_line(e)}"
                    self._show_line(f"{slug}: {row['live here']}")
            rows.append(row)
            self.progress.value += 1
        df = pd.DataFrame(rows)
        self._show_table(f"{problem.key} at {fmt_sizes(sizes)} on this CPU ({self.mode.device}); "
                         f"floor_ms: the fused roofline floor on {gpu.name}", df.set_index("variant"))
        path = self.recorded_path if self.recorded_path is not None else records.default_path()
        near = nearest_records(records.read_records(path), problem, sizes, chosen)
        if near.empty:
            self._show_line(f"no GPU measurement of these variants is recorded in {path}")
        else:
            other = near["distance"] > 0
            note = (f"; {other.sum()} of them at other sizes than {fmt_sizes(sizes)} (see sizes)"
                    if other.any() else "")
            self._show_table(f"recorded on a GPU at the nearest recorded sizes, from {path} "
                             f"(speed-up within its own run{note})", near.set_index("variant"))
        rec = near.rename(columns={c: f"recorded_{c}" for c in near.columns if c != "variant"})
        return df.merge(rec, on="variant", how="left")

    def _ipython_display_(self) -> None:
        widget_pictures.show(self.widget, f"the {self.problem.key} explorer")
