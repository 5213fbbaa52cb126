"""A widget of the workbook is shown with a picture of itself, kept current, that the notebook file
keeps for when the kernel is gone (fusedkit.widget_pictures). Here, against a real kernel, the
messages JupyterLab relies on; tests/test_lab.py shows the result in a real JupyterLab."""

from __future__ import annotations

import html
import os
import queue
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel

from fusedkit import problems, static_widgets, widget_pictures
from fusedkit.widgets import SizePicker

REPO = Path(__file__).resolve().parent.parent


def test_the_picture_draws_the_widget_as_it_is_now_under_its_note():
    picker = SizePicker(problems.get("p12"))
    picker.boxes["batch_size"].value = 123
    picture = widget_pictures.Picture(picker.widget, "the sizes picker for p12")
    bundle = picture.bundle()
    page = bundle["text/html"]
    assert "batch_size" in page and ">123<" in page, page[:2000]
    assert html.escape(widget_pictures.picture_note("the sizes picker for p12")) in page
    assert "Run this cell to use it" in bundle["text/plain"]
    # The live widget hides exactly this picture; the picture hides a failed view just above it.
    live_style = picture.live.children[0].value
    assert f".{picture.key} {{display: none}}" in live_style and picture.key in page
    assert widget_pictures.STALE_NOTE in live_style and picture.live.children[1] is picker.widget
    assert ".jp-OutputArea-output.jupyter-widgets" in page


def test_a_picture_that_cannot_be_drawn_says_so(monkeypatch):
    picture = widget_pictures.Picture(SizePicker(problems.get("p45")).widget, "the picker")

    def broken(_widget):
        raise RuntimeError("no state\nsecond line")
    monkeypatch.setattr(widget_pictures, "drawing", broken)
    assert "the picture could not be drawn: RuntimeError: no state" in picture.bundle()["text/html"]


def test_reports_draw_the_widget_from_its_state_and_drop_its_picture():
    picture = widget_pictures.Picture(SizePicker(problems.get("p12")).widget, "the picker")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("picker", outputs=[
        nbformat.v4.new_output("display_data", data={"text/plain": "VBox(...)"}),
        nbformat.v4.new_output("display_data", data=picture.bundle(),
                               metadata={static_widgets.PICTURE_KEY: True})])])
    nb, _ = static_widgets.StaticWidgetsPreprocessor().preprocess(nb, {})
    assert len(nb.cells[0].outputs) == 1 and not static_widgets.is_picture(nb.cells[0].outputs[0])


def _messages(client, until: float) -> list[dict]:
    """The kernel's iopub messages until ``until`` (monotonic seconds)."""
    seen = []
    while time.monotonic() < until:
        try:
            msg = client.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            continue
        seen.append(msg)
    return seen


@pytest.fixture(scope="module")
def kernel():
    """A real ipykernel (the python3 kernel of this environment) with the repository on its path."""
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg")
    manager, client = start_new_kernel(kernel_name="python3", env=env)
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run(client, code: str) -> str:
    msg_id = client.execute(code)
    reply = client.get_shell_msg(timeout=120)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "ok", \
        reply["content"]
    return msg_id


def test_a_change_redraws_the_picture_as_the_output_of_the_cell_that_showed_it(kernel):
    """Without a picture, a notebook reopened after its kernel ended showed "Error displaying
    widget: model not found" (or, with saved widget state, opened marked unsaved). The redraw must
    reach JupyterLab, which updates a display only through the cell that created it: so each
    update goes out as that cell's output, whether the change came from a later cell or a thread."""
    shown = _run(kernel, "from fusedkit import problems\nfrom fusedkit.widgets import SizePicker\n"
                         "picker = SizePicker(problems.get('p12'))\npicker")
    first = _messages(kernel, time.monotonic() + 2)
    outputs = [m for m in first if m["msg_type"] == "display_data"
               and m["parent_header"].get("msg_id") == shown]
    assert len(outputs) == 2, [m["msg_type"] for m in first]
    view, picture = outputs
    assert static_widgets.WIDGET_VIEW in view["content"]["data"]
    assert picture["content"]["metadata"].get(static_widgets.PICTURE_KEY) is True
    display_id = picture["content"]["transient"]["display_id"]
    assert "A picture of the sizes picker for p12" in picture["content"]["data"]["text/html"]

    for code, value in (("picker.boxes['batch_size'].value = 77", 77),
                        ("import threading\nthreading.Thread(target=setattr, args=("
                         "picker.boxes['batch_size'], 'value', 78)).start()", 78)):
        _run(kernel, code)
        later = _messages(kernel, time.monotonic() + 3 * widget_pictures.REDRAW_DELAY_S + 1)
        updates = [m for m in later if m["msg_type"] == "update_display_data"]
        assert len(updates) == 1, [(m["msg_type"], m["content"]) for m in later]
        update = updates[0]
        assert update["parent_header"]["msg_id"] == shown
        assert update["content"]["transient"]["display_id"] == display_id
        assert f">{value}<" in update["content"]["data"]["text/html"]
        assert update["content"]["metadata"].get(static_widgets.PICTURE_KEY) is True


def test_the_environment_saves_no_widget_state():
    """With JupyterLab saving widget state, every notebook that held it, or that was opened while
    its kernel's widgets lived, opened marked unsaved: the manager marks a notebook changed for
    each widget it loads."""
    makefile = (REPO / "Makefile").read_text()
    assert '{"@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": false}}' in makefile
