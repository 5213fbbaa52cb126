"""ipywidgets controls for the notebooks: pick a problem's sizes, see mistakes explained,
and run chosen variants of its ladder live.

The picker is the first cell of each notebook after its parameters cell (``SIZES``, which
``python -m fusedkit report --sizes`` fills); it starts at ``SIZES.get(key)`` and later cells
read ``picker.sizes``. A button per preset (KernelBench's, small and odd) sets all boxes at
once. A bad value never raises inside a widget callback: the message appears
under the inputs, and ``picker.sizes`` keeps the last valid sizes. The explorer
(:class:`LadderExplorer`) reuses the picker and adds a variant list and a Run button.
"""

from __future__ import annotations

import base64
import html
import io
import os
from datetime import datetime, timezone

import ipywidgets as w
import matplotlib.pyplot as plt
import pandas as pd
import torch

from fusedkit import records
from fusedkit.check import device_refusal, one_line
from fusedkit.dashboard import nearest_records
from fusedkit.hardware import detect_gpu
from fusedkit.mode import Mode
from fusedkit.plots import variant_bars
from fusedkit.present import format_frame
from fusedkit.problems import Problem, SizeError, Sizes, fmt_sizes, presets
from fusedkit.measure import interpreter_seconds, measure
from fusedkit.results import add_speedup
from fusedkit.roofline import fused_floor, table

# PyTorch variants are checked live on the CPU up to this much arithmetic (a check evaluates
# the model three times per seed: float64 reference, eager, variant), so Run answers in seconds.
CPU_LIVE_FLOP_BUDGET = 20e9

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

    def __init__(self, problem: Problem, sizes: Sizes | None = None) -> None:
        self.problem = problem
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
        self.message.value = (f"<span style='color:#070'>✓ sizes accepted{named}; re-run the cells "
                              "below to use them.</span>")

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
        from IPython.display import display  # noqa: PLC0415

        display(self.widget)


class LadderExplorer:
    """Pick sizes, a precision and some variants of ``problem``, press Run, see what they do.

    GPU (``mode.gpu``): each chosen variant (and eager, the baseline of the speed-ups) is
    checked on fresh seeds, then timed; a table and a bar chart appear in :attr:`output`.
    Nothing is written to ``data/``: use ``python -m fusedkit bench`` for records.

    CPU: the roofline and each variant's predicted floor on the GPU the notebooks plan for
    are recomputed for the sizes; Triton variants are checked in Triton's interpreter when
    the sizes are small enough; CUDA variants are reported as needing a GPU; and the
    recorded GPU measurements at the nearest sizes (from ``recorded_path``, default the
    records file) are shown, labelled with device, date, commit and their sizes.

    :meth:`run` is what the button calls; tests call it (or ``button.click()``) directly.
    The last result is kept on :attr:`result`. A mistake (bad sizes, nothing selected) is
    explained in :attr:`message`; an exception during a run becomes one line in the output.
    """

    SEEDS_CPU = 2   # builds checked per variant on a CPU (each on two inputs, plus an odd shape)

    def __init__(self, problem: Problem, mode: Mode, recorded_path: str | os.PathLike[str] | None = None) -> None:
        self.problem, self.mode = problem, mode
        self.recorded_path = recorded_path
        self.picker = SizePicker(problem)
        self.result = pd.DataFrame()
        self._device = "cuda" if mode.gpu else "cpu"   # where live checks run
        ladder = list(problem.variants.values())
        precisions = list(dict.fromkeys(v.precision for v in ladder))
        self.precision = w.Dropdown(options=["all", *precisions], value="all", description="precision")
        self.variants = w.SelectMultiple(options=self._options("all"), value=(),
                                         description="variants", rows=min(len(ladder), 10),
                                         layout=_fixed("520px"))
        self.precision.observe(self._filter, names="value")
        self.button = w.Button(description="Run", icon="play", button_style="primary",
                               tooltip="check (and on a GPU, time) the chosen variants")
        self.button.on_click(lambda _: self.run())
        self.progress = w.IntProgress(value=0, min=0, max=1, description="idle",
                                      layout=_fixed("520px"))
        self.message = w.HTML()
        self.output = w.Output(layout=w.Layout(max_width="100%", overflow="auto"))
        where = (f"live on {mode.device}: checked and timed, not recorded" if mode.gpu else
                 "no GPU here: roofline, Triton's interpreter at small sizes, and the nearest "
                 "recorded GPU runs")
        self.widget = w.VBox([
            self.picker.widget,
            w.HTML(f"<b>Variants</b> ({where}); ctrl- or shift-click to choose several"),
            w.HBox([self.precision], layout=w.Layout(**_ROW)), self.variants,
            w.HBox([self.button, self.progress], layout=w.Layout(**_ROW)), self.message, self.output,
        ], layout=w.Layout(max_width="100%"))

    # -- choices -------------------------------------------------------------------------
    def _options(self, precision: str) -> list[tuple[str, str]]:
        """(label, slug) of the ladder's variants of ``precision`` ("all": every one)."""
        out = []
        for v in self.problem.variants.values():
            if precision in ("all", v.precision):
                kind = "CUDA, GPU only" if v.needs_gpu else ("Triton" if v.triton else "PyTorch")
                out.append((f"{v.number}. {v.slug} ({v.precision}, {kind})", v.slug))
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

    # -- the run -------------------------------------------------------------------------
    def run(self) -> pd.DataFrame:
        """Check (on a GPU: and time) the chosen variants at the chosen sizes; show and
        return one row per variant (also kept on :attr:`result`). Invalid choices give an
        empty frame and a message; nothing here raises."""
        self.output.outputs = ()
        self.result = pd.DataFrame()
        if self.picker.error:
            self._say(f"{self.picker.error}. Fix the sizes above, then press Run again.")
            return self.result
        chosen = list(self.variants.value)
        if not chosen:
            self._say("no variant is selected: choose one or more in the list (ctrl- or "
                      "shift-click for several; the precision menu filters the list).")
            return self.result
        sizes = self.picker.sizes
        self._say(f"running {len(chosen)} variant(s) of {self.problem.key} at {fmt_sizes(sizes)}", ok=True)
        try:
            self.result = self._run_live(sizes, chosen) if self.mode.gpu else self._run_cpu(sizes, chosen)
        except Exception as e:  # noqa: BLE001 - a widget callback must never show a traceback
            self._show_line(f"run failed: {one_line(e)}")
            self._say("the run failed; see the line below.")
        finally:
            self.progress.description = "done"
        return self.result

    def _start(self, total: int) -> None:
        self.progress.max, self.progress.value = max(total, 1), 0

    def _step(self, slug: str) -> None:
        self.progress.description = slug[:16]

    def _run_live(self, sizes: Sizes, chosen: list[str]) -> pd.DataFrame:
        """GPU mode: measure every chosen variant plus eager; table and bar chart."""
        problem, device = self.problem, self._device
        problem.check_runnable(sizes, device)
        slugs = chosen if "eager" in chosen else ["eager", *chosen]   # speed-ups need eager
        gpu = detect_gpu().spec
        self._start(len(slugs))
        rows = []
        for slug in slugs:
            self._step(slug)
            v = problem.variant(slug)
            row: dict = {"variant": slug, "precision": v.precision}
            try:
                m = measure(problem, v, sizes, device=device, gpu=gpu)
                if not m.ok:
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

    def _run_cpu(self, sizes: Sizes, chosen: list[str]) -> pd.DataFrame:
        """CPU mode: roofline and floors, interpreter checks where affordable, nearest records."""
        problem = self.problem
        detected = detect_gpu()
        gpu = detected.spec
        precision = self.precision.value if self.precision.value != "all" else "fp32"
        self._show_line(f"{detected.reason}\nRoofline at {fmt_sizes(sizes)}, {precision} GEMMs:")
        self._show_table(f"roofline on {gpu.name} ({precision})", table(problem, sizes, gpu, precision).round(4))
        self._start(len(chosen))
        device = torch.device(self._device)
        rows = []
        for slug in chosen:
            self._step(slug)
            v = problem.variant(slug)
            row = {"variant": slug, "precision": v.precision,
                   "floor_ms": fused_floor(problem, sizes, gpu, v.precision).floor_ms}
            reason = device_refusal(problem, v, sizes, device)
            if not reason and not v.triton and problem.flops(sizes) > CPU_LIVE_FLOP_BUDGET:
                reason = (f"a CPU check at these sizes ({problem.flops(sizes) / 1e9:.1f} GFLOP, six "
                          f"evaluations) would take minutes; it runs live up to "
                          f"{CPU_LIVE_FLOP_BUDGET / 1e9:.0f} GFLOP: pick smaller sizes")
            if reason:
                row["live here"] = reason
            else:
                if v.triton:
                    est = interpreter_seconds(problem, v, sizes, seeds=self.SEEDS_CPU, time_it=False)
                    self._show_line(f"{slug}: about {est:.0f} s in Triton's CPU interpreter (estimated)")
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
        from IPython.display import display  # noqa: PLC0415

        display(self.widget)
