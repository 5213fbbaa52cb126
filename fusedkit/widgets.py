"""ipywidgets controls for the notebooks: pick a problem's sizes, and run chosen steps live.

Each size box takes text and accepts a whole number only (an integer box would read "3.5" as 35); a
bad value never raises inside a callback: a line under the boxes names the value and what is
allowed, and ``picker.sizes`` keeps the last valid sizes. Each widget is displayed with its picture
(:mod:`fusedkit.widget_pictures`), which a reopened notebook shows once its kernel has ended.
"""

from __future__ import annotations

import base64
import html
import io
import threading
import time

import ipywidgets as w
import matplotlib.pyplot as plt
import pandas as pd

from fusedkit import present, results, widget_pictures
from fusedkit.harness import measure, plan
from fusedkit.hardware import detect_gpu
from fusedkit.interrupts import route_kernel_interrupt, stoppable
from fusedkit.mode import Mode
from fusedkit.plots import variant_bars
from fusedkit.problems import Problem, SizeError, Sizes, fmt_sizes, presets
from fusedkit.roofline import fused_floor, readable, table

SEEDS_CPU = 2   # builds checked per step on a CPU (each on two inputs, plus an odd shape)

_ROW = dict(flex_flow="row wrap", max_width="100%")
STATUS_CLASS = "fusedkit-status"
"""The class of a widget's status line: hidden once its kernel has stopped (widget_pictures)."""


def _seconds(s: float) -> str:
    return f"about {s:.0f} s" if s >= 1.5 else "a second or less"


def _ms(ms: float) -> str:
    """A floor in the unit that shows it: ``12.3 µs`` or ``2.724 ms`` (never ``0.000``)."""
    return present.MISSING if present._missing(ms) else (f"{present.us(1e3 * ms)} µs" if ms < 0.1
                                                         else f"{present.ms(ms)} ms")


def _html_line(text: str, colour: str, mark: str) -> str:
    return f"<span class='{STATUS_CLASS}' style='color:{colour}'>{mark} {html.escape(text)}</span>"


class SizePicker:
    """One text box per dimension of ``problem`` (a whole number each), and a button per preset."""

    DOM_CLASS = "fusedkit-size-picker"   # and with "-p12" its problem's: a report reads the sizes here

    def __init__(self, problem: Problem, sizes: Sizes | None = None, *,
                 to_use: str = "re-run the cells below to use them") -> None:
        self.problem, self.to_use = problem, to_use
        start = problem.sizes(sizes)   # refused before any widget exists
        self._valid: Sizes = dict(start)
        self.boxes = {d.name: w.Text(value=str(start[d.name]), description=d.name, tooltip=d.description,
                                     continuous_update=False, style={"description_width": "110px"},
                                     layout=w.Layout(width="260px", max_width="100%"))
                      for d in problem.dims}
        self.message = w.HTML()
        self.presets = {label: w.Button(description=f"{label} sizes", icon="undo" if i == 0 else "",
                                        tooltip=f"{preset.about}: {fmt_sizes(values)}",
                                        layout=w.Layout(width="auto", max_width="100%"))
                        for i, ((label, values), preset) in enumerate(zip(presets.of(problem).items(), presets.PRESETS))}
        for label, button in self.presets.items():
            button.on_click(lambda _, chosen=presets.of(problem)[label]: self.set_sizes(chosen))
        self.reset = self.presets[presets.KERNELBENCH.label]
        for box in self.boxes.values():
            box.observe(self._changed, names="value")
        hints = "".join(f"<li><code>{d.name}</code>: {d.description}, default {d.default}, 1 to {d.maximum}</li>"
                        for d in problem.dims)
        boxes = list(self.boxes.values())
        self.widget = w.VBox([w.HTML(f"<b>Sizes for {problem.key}: {problem.title}</b><ul>{hints}</ul>"),
                              w.HBox(boxes[:2], layout=w.Layout(**_ROW)), w.HBox(boxes[2:], layout=w.Layout(**_ROW)),
                              w.HBox([w.HTML("presets:"), *self.presets.values()], layout=w.Layout(**_ROW)),
                              self.message], layout=w.Layout(max_width="100%"))
        self.widget.add_class(self.DOM_CLASS)
        self.widget.add_class(f"{self.DOM_CLASS}-{problem.key}")
        self._changed()

    def _read(self) -> Sizes:
        """The boxes as sizes; SizeError naming a value that is not a whole number."""
        raw = {}
        for name, box in self.boxes.items():
            text = box.value.strip()
            if not text.isdigit():
                d = next(d for d in self.problem.dims if d.name == name)
                raise SizeError(f"{name}={text!r} is not a whole number; allowed: 1 to {d.maximum}")
            raw[name] = int(text)
        return self.problem.sizes(raw)

    def _changed(self, _change: object = None) -> None:
        try:
            self._valid = self._read()
        except SizeError as e:
            self.message.value = _html_line(f"{e}. Still using the last valid sizes.", "#b00", "⚠")
            return
        preset = presets.matching(self.problem, self._valid)
        named = f" (the {preset.label} preset)" if preset else ""
        try:   # valid sizes may still be too big to check here: say so now
            self.problem.check_runnable(self._valid, "cuda" if detect_gpu().present else "cpu")
        except SizeError as e:
            self.message.value = _html_line(f"sizes accepted{named}, but too big to measure here: {e}. "
                                            "Cells that only read records still use them.", "#a60", "⚠")
            return
        self.message.value = _html_line(f"sizes accepted{named}; {self.to_use}.", "#070", "✓")

    def set_sizes(self, sizes: Sizes) -> None:
        """Set the boxes (validated first: a bad value raises SizeError here)."""
        for name, value in self.problem.sizes(sizes).items():
            self.boxes[name].value = str(value)

    @property
    def sizes(self) -> Sizes:
        """The last valid sizes the boxes held."""
        return dict(self._valid)

    @property
    def error(self) -> str:
        """What is wrong with the boxes' values now, or "" when they are valid."""
        try:
            self._read()
        except SizeError as e:
            return str(e)
        return ""

    def _ipython_display_(self) -> None:
        widget_pictures.show(self.widget, f"the sizes picker for {self.problem.key}")


class LadderExplorer:
    """Pick sizes, a precision and some steps of ``problem``, press Run, see what they do."""

    def __init__(self, problem: Problem, mode: Mode) -> None:
        self.problem, self.mode = problem, mode
        self.picker = SizePicker(problem, to_use="press Run to use them")
        self.result, self.status = pd.DataFrame(), "idle"
        self._device, self._seeds = ("cuda", 3) if mode.gpu else ("cpu", SEEDS_CPU)
        self._stop, self._thread = threading.Event(), None
        self._steps = sorted(problem.variants.values(), key=lambda v: (not v.baseline, v.number))
        self.precision = w.Dropdown(options=["all", *dict.fromkeys(v.precision for v in self._steps)],
                                    value="all", description="precision")
        self.variants = w.SelectMultiple(options=self._options("all"), value=(), description="steps",
                                         rows=len(self._steps), layout=w.Layout(width="640px", max_width="100%"))
        self.precision.observe(lambda _: self._filter(), names="value")
        for box in [*self.picker.boxes.values(), self.variants]:
            box.observe(self._choices_changed, names="value")
        self._refused, self._ran, self._call_timeout_s = False, None, 0.0
        self.button = w.Button(description="Run", icon="play", button_style="primary")
        self.button.on_click(lambda _: self.start())
        self.cancel = w.Button(description="Cancel", icon="stop", disabled=True)
        self.cancel.on_click(lambda _: self.request_stop())
        self.progress = w.IntProgress(value=0, min=0, max=1, description="idle",
                                      style={"description_width": "initial"}, layout=w.Layout(width="420px", max_width="100%"))
        self.message, self.output = w.HTML(), w.Output(layout=w.Layout(max_width="100%", overflow="auto"))
        where = (f"live on {mode.device}: checked and timed, not recorded" if mode.gpu else
                 "no GPU here: floors, Triton's interpreter at small sizes, and the GPU records at these sizes")
        self.widget = w.VBox([self.picker.widget, w.HTML(f"<b>Steps</b> ({where}); ctrl- or shift-click for several"),
                              self.precision, self.variants,
                              w.HBox([self.button, self.cancel, self.progress], layout=w.Layout(**_ROW)),
                              self.message, self.output], layout=w.Layout(max_width="100%"))

    def _options(self, precision: str) -> list[tuple[str, str]]:
        kind = lambda v: "CUDA, GPU only" if v.needs_gpu else "Triton" if v.triton else "PyTorch"  # noqa: E731
        return [(f"{'reference' if v.baseline else f'step {v.number}'}: {v.slug} ({v.precision}, {kind(v)})",
                 v.slug) for v in self._steps if precision in ("all", v.precision)]

    def _filter(self) -> None:
        keep = self.variants.value
        self.variants.options = self._options(self.precision.value)
        self.variants.value = tuple(s for s in keep if s in {slug for _, slug in self.variants.options})

    def _choices_changed(self, _change: object = None) -> None:
        """A refusal no longer applies once the sizes or steps change, and the tables of a
        finished run are then labelled as that run's."""
        if self.status == "running":
            return
        if self._refused:
            self._refused, self.message.value = False, ""
        elif self._ran is not None and self.output.outputs and self._ran != (self.picker.sizes, tuple(self.variants.value)):
            sizes, slugs = self._ran
            self.message.value = _html_line(f"the tables below are from the last run ({len(slugs)} step(s) at "
                                            f"{fmt_sizes(sizes)}); press Run for the sizes and steps chosen now.", "#a60", "⚠")

    def select(self, slugs: list[str] | tuple[str, ...]) -> None:
        """Choose ``slugs`` (the precision filter set to "all" first)."""
        unknown = [s for s in slugs if s not in self.problem.variants]
        if unknown:
            raise ValueError(f"slugs={unknown!r} are not steps of {self.problem.key}; valid: "
                             f"{', '.join(self.problem.variants)}")
        self.precision.value = "all"
        self.variants.value = tuple(slugs)

    def estimate(self, sizes: Sizes, chosen: list[str]) -> tuple[float, dict[str, str]]:
        """Predicted seconds of the run of ``chosen`` at ``sizes`` (what runs only), and why each
        step it leaves out is left out."""
        total, left_out = 0.0, {}
        for slug in self._with_baseline(chosen):
            p = plan(self.problem, slug, sizes, device=self._device, seeds=self._seeds, time_it=self.mode.gpu)
            seconds, self._call_timeout_s = p.estimate_s, p.call_timeout_s
            if p.refusal:   # a GPU step here, or over the harness's CPU budget (its one estimate)
                left_out[slug] = p.refusal.split(": ", 1)[-1]
            else:
                total += seconds
        return total, left_out

    def _with_baseline(self, chosen: list[str]) -> list[str]:
        return ["eager", *chosen] if self.mode.gpu and "eager" not in chosen else list(chosen)

    def _plan(self) -> tuple[Sizes, list[str], float, dict[str, str]] | None:
        if self.picker.error:
            return self._refuse(f"{self.picker.error}. Fix the sizes above, then press Run again.")
        chosen = list(self.variants.value)
        if not chosen:
            return self._refuse("no step is selected: choose one or more in the list.")
        sizes = self.picker.sizes
        try:
            self.problem.check_runnable(sizes, self._device)
        except SizeError as e:
            return self._refuse(f"{e}. Pick smaller sizes, then press Run again.")
        return (sizes, chosen, *self.estimate(sizes, chosen))

    def _refuse(self, text: str) -> None:
        self.message.value = _html_line(text, "#b00", "⚠")
        self._refused, self._ran = True, None
        self.output.outputs, self.result, self.status = (), pd.DataFrame(), "idle"
        self.progress.value, self.progress.bar_style, self.progress.description = 0, "", "not run"

    def start(self) -> None:
        """What Run does: check the choices, then run in a thread of its own (one at a time)."""
        if self._thread is not None and self._thread.is_alive():
            self.message.value = _html_line("a run is already working: wait for it, or press Cancel.", "#b00", "⚠")
            return
        if (planned := self._plan()) is None:
            return
        route_kernel_interrupt()
        self._begin(planned)
        self._thread = threading.Thread(target=self._execute, args=planned, daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> pd.DataFrame:
        """Wait for a run begun by :meth:`start` to end; its result."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.result

    def request_stop(self) -> None:
        """What Cancel does: the run stops after the kernel call now running."""
        if self.status == "running":
            self._stop.set()
            self.progress.description = "cancelling"

    def run(self) -> pd.DataFrame:
        """Run in this thread (scripts and tests); the rows are also kept on :attr:`result`."""
        if (planned := self._plan()) is not None:
            self._begin(planned)
            self._execute(*planned)
        return self.result

    def _begin(self, planned: tuple[Sizes, list[str], float, dict[str, str]]) -> None:
        sizes, chosen, total, left_out = planned
        self.output.outputs, self.result, self.status = (), pd.DataFrame(), "running"
        self._refused, self._ran = False, (dict(sizes), tuple(chosen))
        self._stop.clear()
        self.button.disabled, self.cancel.disabled = True, False
        self.progress.description, self.progress.bar_style = "running", ""
        runs = len(self._with_baseline(chosen)) - len(left_out)
        self.message.value = _html_line(f"running {runs} step(s) of {self.problem.key} at {fmt_sizes(sizes)}, "
                                        f"{_seconds(total)} estimated" + (f"; {len(left_out)} left out" if left_out else "")
                                        + f"; each kernel runs in a process of its own, and a call that takes over "
                                        f"{self._call_timeout_s:g} s counts as hung", "#070", "…")

    def _execute(self, sizes: Sizes, chosen: list[str], total: float, left_out: dict[str, str]) -> None:
        t0, self._rows = time.perf_counter(), []
        try:
            with stoppable(self._stop):
                self.result = self._run(sizes, chosen, left_out)
            ran = [r for r in self._rows if r["variant"] not in left_out]
            failed = [r["variant"] for r in ran if str(r.get("tier", "")).startswith("FAILED")]
            why = "; ".join(f"{s} ({reason})" for s, reason in left_out.items())
            if not ran:
                self._end("nothing ran", f"nothing ran: left out {why}")
            elif failed:
                self._end("failed", f"failed: {', '.join(failed)} (see the table); the rest ran")
            else:
                self._end("done", f"done: {len(ran)} step(s) in {time.perf_counter() - t0:.0f} s (estimated "
                          f"{_seconds(total)})" + (f"; left out {why}" if why else ""))
        except KeyboardInterrupt:
            self.result = pd.DataFrame(self._rows)
            if self._rows:
                self._table("finished before the interrupt", self.result.set_index("variant"))
            self._end("interrupted", f"interrupted: nothing recorded ({len(self._rows)} step(s) had finished)")
        except Exception as e:  # noqa: BLE001 - a widget callback must never show a traceback
            self._end("failed", f"the run stopped: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")

    def _end(self, status: str, text: str) -> None:
        self.status = status
        self.progress.description = status
        self.progress.bar_style = {"done": "success", "failed": "danger"}.get(status, "warning")
        self.button.disabled, self.cancel.disabled = False, True
        ok = status == "done"
        self.message.value = _html_line(text, "#070" if ok else "#b00" if status == "failed" else "#a60",
                                        "✓" if ok else "⚠")

    def _run(self, sizes: Sizes, chosen: list[str], left_out: dict[str, str]) -> pd.DataFrame:
        gpu = detect_gpu().spec
        if not self.mode.gpu:
            self._table(f"roofline on {gpu.name} at {fmt_sizes(sizes)} (fp32; each column in the unit that shows "
                        "its values)", readable(table(self.problem, sizes, gpu, "fp32")))
        slugs = self._with_baseline(chosen)
        self.progress.max, self.progress.value = max(len(slugs), 1), 0
        for slug in slugs:
            self.progress.description = slug
            v = self.problem.variant(slug)
            row = {"variant": slug, "precision": v.precision,
                   "floor": _ms(fused_floor(self.problem, sizes, gpu, v.precision).floor_ms)}
            if slug in left_out:
                row["tier"] = f"not run: {left_out[slug]}"
            else:
                try:
                    m = measure(self.problem, slug, sizes, device=self._device, time_it=self.mode.gpu,
                                seeds=self._seeds)
                except Exception as e:  # noqa: BLE001 - one step's fault must not stop the rest
                    row["tier"] = f"FAILED: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                else:
                    row["tier"] = ((m.tier or "logic right") if m.ok else ("not run: " if m.skipped else "FAILED: ") + m.failure)
                    if m.ok:
                        row["rel. error"] = m.check.rel_error
                    if m.ok and m.timing is not None:
                        row.update(median_ms=m.timing.median_ms, p10_ms=m.timing.p10_ms, p90_ms=m.timing.p90_ms)
            self._rows.append(row)
            self.progress.value += 1
        df = pd.DataFrame(self._rows)
        where = f"live on {self.mode.device}, not recorded" if self.mode.gpu else f"checked on this CPU ({self.mode.device})"
        self._table(f"{self.problem.key} at {fmt_sizes(sizes)}, {where}; floor: a fused kernel on the {gpu.name} "
                    "datasheet", df.set_index("variant"))
        if self.mode.gpu and "median_ms" in df and df["median_ms"].notna().any():
            self._figure(variant_bars(results.add_speedup(df[df["median_ms"].notna()], by=()), title=where))
        else:
            dev = results.page_device(self.problem)
            rec = results.recorded(self.problem, sizes, device=dev) if dev else pd.DataFrame()
            rec = rec[rec["variant"].isin(chosen)] if len(rec) else rec
            if rec.empty:
                self.output.append_stdout(f"nothing recorded on a GPU at {fmt_sizes(sizes)} for these steps\n")
            else:
                self._table(f"recorded at {fmt_sizes(sizes)}: {results.caption(rec)} (speed-up within its own run)",
                            rec.set_index("variant")[["tier", "median_ms", "p10_ms", "p90_ms", "speedup"]])
        return df

    def _table(self, title: str, df: pd.DataFrame) -> None:
        df = present.format_frame(df)
        self.output.outputs += ({"output_type": "display_data", "metadata": {},
                                 "data": {"text/html": f"<b>{html.escape(title)}</b><div style='overflow-x:auto'>"
                                                       f"{df.to_html()}</div>", "text/plain": f"{title}\n{df.to_string()}"}},)

    def _figure(self, fig: plt.Figure) -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        self.output.outputs += ({"output_type": "display_data", "metadata": {},
                                 "data": {"image/png": base64.b64encode(buf.getvalue()).decode(),
                                          "text/plain": "<bar chart>"}},)

    def _ipython_display_(self) -> None:
        widget_pictures.show(self.widget, f"the {self.problem.key} explorer")
