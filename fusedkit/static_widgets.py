"""Static HTML for the ipywidgets a notebook displayed, drawn from the widget state nbclient stored, so
that a report opens with no network and no widget manager: containers lay out their children, inputs
show ``description: value``, buttons are greyed out, layouts are kept within the page's width.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PICTURE_KEY = "fusedkit_widget_picture"
"""The metadata key of a widget's picture (:mod:`fusedkit.widget_pictures`); a report drops it and
draws the widget from its stored state."""
_REF = "IPY_MODEL_"          # how a widget's state refers to another model (a child)
_MAX_DEPTH = 32              # a cycle of children in a broken state must not recurse forever

# Inline styles: each output is a separate HTML fragment, so nothing may rely on a
# stylesheet elsewhere in the page.
_FIT = "max-width:100%;min-width:0;box-sizing:border-box"   # nothing wider than its column
_BOX = f"display:flex;gap:6px;align-items:flex-start;flex-wrap:wrap;margin:2px 0;{_FIT}"
_FIELD = ("display:inline-block;min-width:4em;max-width:100%;padding:1px 6px;"
          "border:1px solid #bbb;border-radius:2px;background:#f7f7f7;font-family:monospace;"
          "overflow-wrap:anywhere;vertical-align:top")
_OUTPUT = f"{_FIT};overflow-x:auto"     # a wide table scrolls inside the widget, not the page
_PRE = "white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0"
_NOTE = ("font-size:0.8em;color:#666;font-style:italic;margin:2px 0 4px;"
         "border-left:3px solid #ccc;padding-left:6px")
SNAPSHOT_NOTE = ("Snapshot of the widget's state when the notebook ran (static; open the "
                 "notebook to use it)")
# Layout traits a static page can honour (ipywidgets' Layout names -> CSS properties).
_LAYOUT_CSS = {"width": "width", "max_width": "max-width", "min_width": "min-width",
               "flex_flow": "flex-flow", "flex": "flex", "overflow": "overflow",
               "margin": "margin", "padding": "padding", "align_items": "align-items",
               "justify_content": "justify-content"}
_BUTTON = ("padding:2px 10px;border:1px solid #bbb;border-radius:2px;background:#eee;"
           "color:#777;cursor:not-allowed")
_LABEL = "color:#444;margin-right:4px"

_CONTAINERS = {"VBoxModel": "column", "BoxModel": "row", "HBoxModel": "row",
               "GridBoxModel": "row", "AccordionModel": "column", "TabModel": "column",
               "StackModel": "column"}
_SELECTIONS = {"DropdownModel", "RadioButtonsModel", "SelectModel", "ToggleButtonsModel",
               "SelectionSliderModel", "SelectMultipleModel", "SelectionRangeSliderModel"}


def widget_models(nb: Mapping[str, Any]) -> dict[str, dict]:
    """Model id -> stored model (``model_name`` and ``state``) from a notebook's metadata."""
    stored = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {})
    return dict(stored.get("state", {}))


def render_widget(model_id: str, models: Mapping[str, Mapping[str, Any]], depth: int = 0) -> str:
    """Static HTML for the widget ``model_id`` and its children, from ``models``."""
    model = models.get(model_id.removeprefix(_REF))
    if model is None or depth > _MAX_DEPTH:
        return "<em style='color:#777'>(widget not stored in this report)</em>"
    name = str(model.get("model_name", ""))
    state = model.get("state", {})
    desc = _description(state)

    if name in _CONTAINERS:
        titles = state.get("titles") or []   # ipywidgets 8 (pyproject.toml)
        parts = []
        for i, child in enumerate(state.get("children", [])):
            title = titles[i] if i < len(titles) and titles[i] else ""
            head = f"<div style='font-weight:bold'>{html.escape(str(title))}</div>" if title else ""
            # The child's width and overflow go on its flex item, held to the row's width.
            kid = models.get(str(child).removeprefix(_REF), {}).get("state", {})
            parts.append(f"<div style='{_FIT}{_layout_css(kid, models)}'>{head}"
                         f"{render_widget(str(child), models, depth + 1)}</div>")
        own = _layout_css(state, models, keys=("flex_flow", "align_items", "justify_content"))
        return (f"<div class='fk-widget' style='{_BOX};flex-direction:{_CONTAINERS[name]}{own}'>"
                f"{''.join(parts)}</div>")
    if name in ("HTMLModel", "HTMLMathModel"):
        # The widget's own HTML, as trusted as the notebook's other HTML outputs.
        return f"<div class='fk-widget'>{desc}{state.get('value', '')}</div>"
    if name == "LabelModel":
        return f"<span class='fk-widget'>{desc}{html.escape(str(state.get('value', '')))}</span>"
    if name == "ButtonModel":
        return (f"<button class='fk-widget' disabled style='{_BUTTON}'>"
                f"{html.escape(str(state.get('description', '')))}</button>")
    if name == "OutputModel":
        return (f"<div class='fk-widget fk-output' style='{_OUTPUT}'>"
                f"{''.join(_output(o) for o in state.get('outputs', []))}</div>")
    if name in ("IntProgressModel", "FloatProgressModel"):
        value, top = state.get("value", 0), state.get("max", 100)
        return (f"<span class='fk-widget'>{desc}<progress value='{html.escape(str(value))}' "
                f"max='{html.escape(str(top))}'></progress> {_value(value)} of {_value(top)}</span>")
    if name in _SELECTIONS:
        return _field(desc, _chosen(state, range_=name == "SelectionRangeSliderModel"))
    if "value" in state:
        return _field(desc, _value(state["value"]))
    return f"<span class='fk-widget' style='color:#777'>({html.escape(name or 'widget')})</span>"


def _layout_css(state: Mapping[str, Any], models: Mapping[str, Mapping[str, Any]],
                keys: tuple[str, ...] = tuple(_LAYOUT_CSS)) -> str:
    """``;property:value`` CSS for the traits ``keys`` set in a widget's stored layout."""
    layout = state.get("layout")
    if not isinstance(layout, str):
        return ""
    traits = models.get(layout.removeprefix(_REF), {}).get("state", {})
    return "".join(f";{_LAYOUT_CSS[k]}:{html.escape(str(traits[k]), quote=True)}" for k in keys
                   if traits.get(k) not in (None, "") and isinstance(traits[k], (str, int, float)))


def _description(state: Mapping[str, Any]) -> str:
    text = str(state.get("description", "") or "")
    shown = text if state.get("description_allow_html") else html.escape(text)
    return f"<span style='{_LABEL}'>{shown}:</span>" if text else ""


def _field(desc: str, value: str) -> str:
    return f"<span class='fk-widget'>{desc}<span style='{_FIELD}'>{value}</span></span>"


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "☑ yes" if value else "☐ no"
    if isinstance(value, (list, tuple)):          # range sliders: (low, high)
        return " – ".join(html.escape(str(v)) for v in value)
    return html.escape(str(value))


def _chosen(state: Mapping[str, Any], *, range_: bool = False) -> str:
    """The label(s) a selection widget has chosen, from its option labels and index."""
    labels = list(state.get("_options_labels", []))
    index = state.get("index")
    picked = index if isinstance(index, (list, tuple)) else [] if index is None else [index]
    names = [str(labels[i]) for i in picked if isinstance(i, int) and 0 <= i < len(labels)]
    sep = " – " if range_ else ", "
    return html.escape(sep.join(names)) if names else "<em>none</em>"


def _output(out: Mapping[str, Any]) -> str:
    """One stored output of an Output widget: HTML, a PNG, or text."""
    if out.get("output_type") == "stream":
        return f"<pre style='{_PRE}'>{html.escape(str(out.get('text', '')))}</pre>"
    data = out.get("data", {})
    if "text/html" in data:
        return "".join(data["text/html"]) if isinstance(data["text/html"], list) else data["text/html"]
    if "image/png" in data:
        return (f"<img alt='figure' style='max-width:100%;height:auto' "
                f"src='data:image/png;base64,{str(data['image/png']).strip()}'>")
    text = data.get("text/plain", "")
    return f"<pre style='{_PRE}'>{html.escape(''.join(text) if isinstance(text, list) else str(text))}</pre>"


def snapshot(widget_html: str) -> str:
    """A statically drawn widget under a caption saying what it is."""
    return (f"<div class='fk-snapshot' style='{_FIT}'>"
            f"<div class='fk-snapshot-note' style='{_NOTE}'>{html.escape(SNAPSHOT_NOTE)}</div>"
            f"{widget_html}</div>")


def _preprocess(nb: Any, resources: dict) -> tuple[Any, dict]:
    """Every widget output of ``nb`` drawn from its stored state (under :data:`SNAPSHOT_NOTE`), the
    state and each widget's own picture (:data:`PICTURE_KEY`, a second drawing) dropped."""
    models = widget_models(nb)
    for cell in nb.cells:
        if "outputs" in cell:
            cell.outputs = [o for o in cell.outputs if not o.get("metadata", {}).get(PICTURE_KEY)]
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view is not None:
                out.data["text/html"] = snapshot(render_widget(str(view.get("model_id", "")), models))
                del out.data[WIDGET_VIEW]
    nb.metadata.pop("widgets", None)
    return nb, resources


def __getattr__(name: str) -> Any:
    """``StaticWidgetsPreprocessor``, nbconvert's preprocessor of :func:`_preprocess`, made on
    first use: nbconvert takes a second to import, and a notebook's widgets never need it."""
    if name != "StaticWidgetsPreprocessor":
        raise AttributeError(name)
    from nbconvert.preprocessors import Preprocessor  # noqa: PLC0415 - heavy, the report's alone

    cls = type("StaticWidgetsPreprocessor", (Preprocessor,), {"preprocess": lambda self, nb, res: _preprocess(nb, res)})
    globals()[name] = cls
    return cls
