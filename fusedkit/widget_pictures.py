"""A widget shown beside a static drawing of itself, which the notebook file keeps.

A reopened notebook has no model to draw a widget from once its kernel has ended, and saved models
mark it unsaved on every open. So JupyterLab's ``saveState`` stays off and :func:`show` displays each
widget, then its picture as the next output of the same cell, redrawn a moment after each change.
While the live widget is on the page a style hides the picture; a widget whose kernel stopped says
so on its first line (:data:`STALE_NOTE`) and takes no input.
"""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as w
import traitlets
from IPython import get_ipython
from IPython.display import DisplayHandle, display
from ipywidgets.embed import dependency_state

from fusedkit import static_widgets

REDRAW_DELAY_S = 0.25   # seconds from a widget's first change to the one redraw of its picture

PICTURE_CLASS = "fusedkit-widget-picture"   # the class of every picture; with ``-<model id>``, of one widget's

STALE_CLASS = "fusedkit-stale-note"
STALE_NOTE = (
    f"<style>.{STALE_CLASS} {{display: none}} "
    f".jupyter-widgets-disconnected .{STALE_CLASS} {{display: block; color: #a60; "
    "font-weight: bold} .jupyter-widgets-disconnected input, .jupyter-widgets-disconnected "
    "button, .jupyter-widgets-disconnected select {pointer-events: none; opacity: 0.5} "
    ".jupyter-widgets-disconnected .fusedkit-status {display: none}</style>"
    f"<div class='{STALE_CLASS}'>⚠ The kernel that ran this cell has stopped, so these boxes and "
    "buttons do nothing. Run this cell (or Run All) to use them.</div>")
"""The live widget's first line: empty while it is live, a warning once its kernel has stopped (CSS on
ipywidgets' ``jupyter-widgets-disconnected`` class); its inputs then disabled, its status lines hidden."""

# The line above a picture: a widget that could not be drawn (ipywidgets marks the failed output
# itself with its class) directly followed by a picture of it. Nothing else is hidden.
_HIDE_FAILED_VIEW = (f"<style>.jp-OutputArea-child:has(> .jp-OutputArea-output.jupyter-widgets)"
                     f":has(+ .jp-OutputArea-child .{PICTURE_CLASS}) {{display: none}}</style>")
_METADATA = {static_widgets.PICTURE_KEY: True}   # what marks the output as a picture
_NOTE = ("font-size:0.85em;color:#a60;font-weight:bold;margin:2px 0 4px;"
         "border-left:3px solid #a60;padding-left:6px")


def picture_note(what: str) -> str:
    """The line above the picture of ``what`` ("the sizes picker for p12")."""
    return (f"A picture of {what} as it last looked: the widget itself needs the kernel that ran "
            "this cell, which has ended, so nothing here responds. Run this cell to use it.")


def drawing(widget: w.Widget) -> str:
    """Static HTML of ``widget`` as it is now, children and layouts included."""
    return static_widgets.render_widget(widget.model_id,
                                        dependency_state(widget, drop_defaults=False))


def _widgets_in(widget: w.Widget) -> list[w.Widget]:
    """``widget`` and every widget its synced state refers to (children, layouts, styles)."""
    found: dict[str, w.Widget] = {}
    todo = [widget]
    while todo:
        current = todo.pop()
        if current.model_id in found:
            continue
        found[current.model_id] = current
        for key in current.keys:
            value = getattr(current, key, None)
            values = value if isinstance(value, (list, tuple)) else \
                value.values() if isinstance(value, dict) else [value]
            todo.extend(v for v in values if isinstance(v, w.Widget))
    return list(found.values())


class Picture:
    """``widget`` shown live, and its picture as the next output, redrawn as the widget changes."""

    def __init__(self, widget: w.Widget, what: str) -> None:
        self.widget, self.what = widget, what
        self.key = f"{PICTURE_CLASS}-{widget.model_id}"
        self.live = w.VBox([w.HTML(f"<style>.{self.key} {{display: none}}</style>{STALE_NOTE}"),
                            widget], layout=w.Layout(max_width="100%"))
        self._handle: DisplayHandle | None = None
        self._parent: dict = {}
        self._watched: set[str] = set()
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def bundle(self) -> dict[str, str]:
        """The picture's output: its HTML, and a line for a reader of plain text."""
        try:
            body = drawing(self.widget)
        except Exception as e:  # noqa: BLE001 - a picture that cannot be drawn says so instead
            body = (f"<em>(the picture could not be drawn: {html.escape(type(e).__name__)}: "
                    f"{html.escape(str(e).splitlines()[0] if str(e) else '')})</em>")
        text = html.escape(picture_note(self.what))
        return {"text/html": (f"<div class='{PICTURE_CLASS} {self.key}' style='max-width:100%'>"
                              f"<div style='{_NOTE}'>{text}</div>{body}</div>{_HIDE_FAILED_VIEW}"),
                "text/plain": f"[{picture_note(self.what)}]"}

    def show(self) -> None:
        """Display the widget and its picture, and redraw the picture whenever the widget changes."""
        display(self.live)
        # The cell running now: a redraw from another thread (a button's handler, a run's thread)
        # is sent as this cell's output, which is where JupyterLab looks for the display to update.
        publisher = getattr(get_ipython(), "display_pub", None)
        self._parent = dict(getattr(publisher, "parent_header", None) or {})
        self._handle = display(self.bundle(), raw=True, display_id=True, metadata=dict(_METADATA))
        self._watch()

    def _watch(self) -> None:
        for widget in _widgets_in(self.widget):
            if widget.model_id not in self._watched:
                self._watched.add(widget.model_id)
                widget.observe(self._changed, names=traitlets.All)

    def _changed(self, change: dict[str, Any]) -> None:
        if change["name"] not in change["owner"].keys:   # not what the reader sees
            return
        with self._lock:
            if self._timer is None:
                self._timer = threading.Timer(REDRAW_DELAY_S, self.redraw)
                self._timer.daemon = True
                self._timer.start()

    def redraw(self) -> None:
        """Draw the picture again, as the widget is now (from any thread)."""
        with self._lock:
            self._timer = None
        if self._handle is None:
            return
        self._watch()   # children added since
        publisher = getattr(get_ipython(), "display_pub", None)
        as_cell = getattr(publisher, "set_thread_parent", None)
        token = as_cell(self._parent) if as_cell is not None and self._parent else None
        try:
            self._handle.update(self.bundle(), raw=True, metadata=dict(_METADATA))
        finally:
            if token is not None:
                publisher.reset_thread_parent(token)


def show(widget: w.Widget, what: str) -> Picture:
    """Display ``widget`` with its picture (:class:`Picture`); returns the picture."""
    picture = Picture(widget, what)
    picture.show()
    return picture

