"""The size picker, the ladder explorer and their pictures, driven as a reader would on a CPU
(fusedkit.widgets, fusedkit.widget_pictures); tests/test_lab.py drives them in a real JupyterLab."""

from __future__ import annotations

import dataclasses
import html
import os
import queue
import signal
import threading
import time
import types
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import nbformat  # noqa: E402
import pytest  # noqa: E402

from fusedkit import problems, records, static_widgets, widget_pictures, widgets  # noqa: E402
from fusedkit.mode import detect_mode  # noqa: E402
from fusedkit.widgets import LadderExplorer, SizePicker  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
P12, P45 = problems.get("p12"), problems.get("p45")
CPU = dataclasses.replace(detect_mode(), gpu=False)


def shown(ex) -> str:
    return "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in ex.output.outputs)


def type_sizes(ex, values) -> None:
    for d, v in zip(ex.problem.dims, values):
        ex.picker.boxes[d.name].value = str(v)


@pytest.fixture(autouse=True)
def no_records(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(tmp_path / "records.csv"))
    return tmp_path / "records.csv"


# -- the picker ---------------------------------------------------------------------------------

@pytest.mark.parametrize("typed, said", [("3.5", "batch_size='3.5' is not a whole number; allowed: 1 to 65536"),
                                         ("1e3", "batch_size='1e3' is not a whole number"),
                                         ("0", "out of range"), ("70000", "out of range")])
def test_a_size_box_takes_a_whole_number_only_and_keeps_the_last_valid_sizes(typed, said):
    """A learner's surprise: an integer box read 3.5 as 35 and 1e3 as 13, "accepted"."""
    picker = SizePicker(P12)
    picker.boxes["batch_size"].value = "64"
    picker.boxes["batch_size"].value = typed
    assert said in html.unescape(picker.message.value) and "Still using the last valid sizes" in picker.message.value
    assert picker.sizes["batch_size"] == 64 and said.split(";")[0] in picker.error


def test_the_picker_starts_where_told_has_a_button_per_preset_and_warns_of_sizes_too_big():
    picker = SizePicker(P12, sizes={"batch_size": 17})
    assert picker.sizes == P12.sizes(batch_size=17) and "✓ sizes accepted" in picker.message.value
    small = problems.presets.sizes(P12, problems.presets.SMALL)
    picker.presets[problems.presets.SMALL.label].click()
    assert picker.sizes == small and "small" in picker.message.value
    picker.reset.click()
    assert picker.sizes == P12.defaults
    with pytest.raises(problems.SizeError):
        SizePicker(P12, sizes={"batch_size": 0})
    type_sizes(types.SimpleNamespace(problem=P12, picker=picker), [12, 65536, 8192])
    said = html.unescape(picker.message.value)        # a learner's surprise: "need 8.0 ... at most 8.0"
    assert "too big to measure here" in said and "need 8.01 GiB" in said and "at most 8.00 GiB" in said


def test_a_stopped_kernels_widget_takes_no_input_and_hides_its_status():
    """A learner's surprise: after a restart the boxes took typing under a stale green line."""
    css = widget_pictures.STALE_NOTE
    assert ".jupyter-widgets-disconnected input" in css and "pointer-events: none" in css
    assert f".jupyter-widgets-disconnected .{widgets.STATUS_CLASS} {{display: none}}" in css
    assert widgets.STATUS_CLASS in SizePicker(P12).message.value


# -- the explorer -------------------------------------------------------------------------------

def test_small_sizes_check_triton_in_the_interpreter_and_leave_cuda_to_a_gpu():
    ex = LadderExplorer(P12, CPU)
    type_sizes(ex, [17, 33, 65])
    ex.select(["eager", "triton_ieee", "cublas_epilogue"])
    ex.button.click()
    ex.wait()
    res = ex.result.set_index("variant")
    assert res.loc["triton_ieee", "tier"] == "fp32-faithful" and res.loc["eager", "tier"] == "reference"
    assert "needs a CUDA GPU" in res.loc["cublas_epilogue", "tier"]
    assert res["floor"].str.endswith("µs").all() and "0.000" not in shown(ex)   # a surprise: floor_ms 0.000
    text = shown(ex)
    assert "roofline on H200 SXM at batch_size=17" in text and "kFLOP" in text
    assert "nothing recorded on a GPU at batch_size=17" in text
    assert ex.status == "done" and "done: 2 step(s)" in ex.message.value and "left out cublas_epilogue" in ex.message.value
    assert not ex.button.disabled and ex.cancel.disabled


def test_a_run_where_nothing_ran_says_so_not_done():
    """A learner's surprise: a green "✓ done: 0 of 2 variant(s) ran ... estimated a second or less"."""
    ex = LadderExplorer(P45, CPU)
    ex.select(["naive", "cublas_epilogues"])                 # GPU steps, on a CPU
    ex.run()
    assert ex.status == "nothing ran" and "⚠ nothing ran: left out naive (" in ex.message.value
    assert "needs a CUDA GPU" in ex.message.value
    assert "✓" not in ex.message.value and ex.progress.bar_style == "warning"


def test_the_records_shown_are_at_exactly_the_chosen_sizes(no_records):
    """A learner's surprise: a table of the "nearest recorded sizes" mixed 16 and 1024 rows."""
    ctx = records.RunContext("20260101T000000Z-aaaaaa", "2026-01-01T00:00:00Z", "abc1234", "NVIDIA H200",
                             "", "", "2.11.0", "3.6.0")
    at = problems.fmt_sizes(P12.sizes(batch_size=17, in_features=33, out_features=65))
    records.append_rows(no_records, [records.make_row(ctx, problem="p12", sizes=s, variant=v, timer="cuda-events",
                                                      median_ms=ms, tier=t)
                                     for s, v, ms, t in ((at, "eager", 0.05, "reference"), (at, "naive", 0.5, "fp32-faithful"),
                                                         (problems.fmt_sizes(P12.defaults), "eager", 2.7, "reference"))])
    ex = LadderExplorer(P12, CPU)
    type_sizes(ex, [17, 33, 65])
    ex.select(["naive"])
    ex.run()
    text = shown(ex)
    assert "recorded at batch_size=17,in_features=33,out_features=65: NVIDIA H200, 2026-01-01" in text
    assert "2.700" not in text and "distance" not in text


def test_bad_choices_are_explained_and_cleared_when_fixed():
    ex = LadderExplorer(P12, CPU)
    ex.run()
    assert "no step is selected" in ex.message.value
    ex.select(["eager"])
    assert ex.message.value == ""                       # the refusal no longer applies
    ex.picker.boxes["batch_size"].value = "0"
    ex.run()
    assert "out of range" in ex.message.value and "Fix the sizes above" in ex.message.value
    type_sizes(ex, [32768, 32768, 6])
    ex.run()
    assert "GiB while checked and timed" in ex.message.value and ex.status == "idle"
    type_sizes(ex, [17, 33, 65])
    ex.run()
    assert ex.status == "done"
    ex.picker.boxes["batch_size"].value = "19"
    assert "the tables below are from the last run (1 step(s) at batch_size=17," in ex.message.value
    with pytest.raises(ValueError, match="not steps of p12"):
        ex.select(["nothing"])


def test_the_list_is_every_step_in_order_and_the_precision_menu_filters_it():
    ex = LadderExplorer(P45, CPU)
    labels = [label for label, _ in ex.variants.options]
    steps = [int(lb.split(":")[0].split()[1]) for lb in labels if lb.startswith("step ")]
    assert len(labels) == len(P45.variants) and steps == sorted(steps) and labels[0].startswith("reference: ")
    ex.select(["triton_fused_lse_tf32", "eager"])
    ex.precision.value = "tf32"
    assert ex.variants.value == ("triton_fused_lse_tf32",)
    assert all("(tf32," in lb for lb, _ in ex.variants.options)


def test_a_failing_step_is_one_line_and_the_rest_still_run(monkeypatch):
    real = widgets.measure

    def flaky(problem, slug, *a, **kw):
        if slug == "triton_ieee":
            raise RuntimeError("boom\nsecond line of a long log")
        return real(problem, slug, *a, **kw)

    monkeypatch.setattr(widgets, "measure", flaky)
    ex = LadderExplorer(P12, CPU)
    type_sizes(ex, [17, 33, 65])
    ex.select(["triton_ieee", "eager"])
    ex.run()
    res = ex.result.set_index("variant")
    assert res.loc["triton_ieee", "tier"] == "FAILED: RuntimeError: boom" and res.loc["eager", "tier"] == "reference"
    assert ex.status == "failed" and "failed: triton_ieee (see the table); the rest ran" in ex.message.value
    assert "second line" not in shown(ex)


def test_the_gpu_path_times_with_eager_beside_and_records_nothing(no_records):
    ex = LadderExplorer(P12, dataclasses.replace(CPU, gpu=True))
    ex._device = "cpu"                       # the GPU branch, driven on the CPU
    type_sizes(ex, [17, 48, 40])
    ex.select(["triton_ieee"])
    ex.run()
    res = ex.result.set_index("variant")
    assert list(res.index) == ["eager", "triton_ieee"] and (res["median_ms"] > 0).all()
    assert any("image/png" in o.get("data", {}) for o in ex.output.outputs) and not no_records.exists()
    assert "counts as hung" not in ex.message.value or "process of its own" in ex.message.value


def test_cancel_stops_a_run_between_calls_and_records_nothing(no_records, monkeypatch):
    started, real = threading.Event(), widgets.measure

    def counted(*a, **kw):
        started.set()
        return real(*a, **kw)

    monkeypatch.setattr(widgets, "measure", counted)
    ex = LadderExplorer(P12, CPU)
    type_sizes(ex, [64, 256, 256])
    ex.select(["triton_ieee", "triton_tf32", "eager"])
    ex.button.click()
    assert started.wait(30) and ex.status == "running" and ex.button.disabled
    assert "each kernel runs in a process of its own" in ex.message.value
    ex.button.click()
    assert "already working" in ex.message.value
    ex.cancel.click()
    ex.wait(60)
    assert ex.status == "interrupted" and "interrupted: nothing recorded" in ex.message.value
    assert not no_records.exists() and "triton_tf32" not in set(ex.result.get("variant", []))


def test_the_kernel_interrupt_reaches_a_run_in_its_thread(monkeypatch):
    import IPython
    from fusedkit import interrupts

    kernel = types.SimpleNamespace(saved_sigint_handler=signal.SIG_IGN)
    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=kernel))
    monkeypatch.setattr(interrupts, "_routed", False)
    assert interrupts.route_kernel_interrupt()
    stop = threading.Event()
    with interrupts.stoppable(stop):
        kernel.saved_sigint_handler(signal.SIGINT, None)
        assert stop.is_set()
        with pytest.raises(interrupts.Interrupted):
            interrupts.checkpoint()


# -- pictures --------------------------------------------------------------------------------------

def test_a_picture_draws_the_widget_as_it_is_now_and_a_report_drops_it():
    picker = SizePicker(P12)
    picker.boxes["batch_size"].value = "123"
    picture = widget_pictures.Picture(picker.widget, "the sizes picker for p12")
    page = picture.bundle()["text/html"]
    assert ">123<" in page and html.escape(widget_pictures.picture_note("the sizes picker for p12")) in page
    live = picture.live.children[0].value
    assert f".{picture.key} {{display: none}}" in live and widget_pictures.STALE_NOTE in live
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("picker", outputs=[
        nbformat.v4.new_output("display_data", data={"text/plain": "VBox(...)"}),
        nbformat.v4.new_output("display_data", data=picture.bundle(), metadata={static_widgets.PICTURE_KEY: True})])])
    nb, _ = static_widgets.StaticWidgetsPreprocessor().preprocess(nb, {})
    assert len(nb.cells[0].outputs) == 1
    assert '{"@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": false}' in (REPO / "Makefile").read_text()


def test_a_change_redraws_the_picture_as_an_update_of_the_cell_that_showed_it():
    """The redraw reaches JupyterLab only as an update of the cell that showed the widget, from a
    later cell or a thread alike; a real kernel says what it sends."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3",
                                       env=dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg"))
    try:
        def run(code: str) -> str:
            msg_id = client.execute(code)
            assert client.get_shell_msg(timeout=120)["content"]["status"] == "ok"
            return msg_id

        def messages(seconds: float) -> list[dict]:
            out, until = [], time.monotonic() + seconds
            while time.monotonic() < until:
                try:
                    out.append(client.get_iopub_msg(timeout=0.2))
                except queue.Empty:
                    pass
            return out

        cell = run("from fusedkit import problems\nfrom fusedkit.widgets import SizePicker\n"
                   "picker = SizePicker(problems.get('p12'))\npicker")
        shown_ = [m for m in messages(2) if m["msg_type"] == "display_data" and m["parent_header"].get("msg_id") == cell]
        assert len(shown_) == 2 and shown_[1]["content"]["metadata"].get(static_widgets.PICTURE_KEY)
        run("import threading\nthreading.Thread(target=setattr, args=(picker.boxes['batch_size'], 'value', '78')).start()")
        updates = [m for m in messages(3 * widget_pictures.REDRAW_DELAY_S + 1) if m["msg_type"] == "update_display_data"]
        assert len(updates) == 1 and updates[0]["parent_header"]["msg_id"] == cell
        assert ">78<" in updates[0]["content"]["data"]["text/html"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
