"""Every figure function a notebook calls draws from the committed records without a single
warning, and keeps its key (legend) off the curves, bars and points it explains.

Each figure is drawn and saved as the notebooks' inline backend saves it (a PNG, ``bbox_inches=
"tight"``) with every warning turned into an error, so a warning raised while laying out or
drawing (tight layout, a missing glyph, a legend placed by a slow "best" search) fails here
rather than showing as a box in the notebook. Which functions the notebooks call is read from the
notebooks themselves: one they start to call without a case here fails the first test.
"""

from __future__ import annotations

import io
import json
import re
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fusedkit import counters, hardware, plots, problems, records, results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
H200 = hardware.spec("H200 SXM")
P12, P45 = problems.get("p12"), problems.get("p45")


def _called_by_notebooks() -> set[str]:
    """The names ``plots.<name>(`` that the notebooks' code cells call."""
    called = set()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                called |= set(re.findall(r"\bplots\.(\w+)\(", "".join(cell["source"])))
    return called


def _roofline():
    pts = pd.concat([plots.roofline_points(P12, P12.defaults, H200, "fp32"),
                     plots.roofline_points(P12, P12.defaults, H200, "tf32x3").tail(1)])
    return plots.roofline_chart(H200, pts, precisions=["fp32", "tf32x3", "tf32", "bf16"], title="roofline")


def _stall():
    tiles = 128 * 32
    regions = {"k-loop": tiles * 32 * 8, "epilogue": tiles * 8, "producer": tiles * 32}
    paths = sorted((records.default_path().parent / "logs" / "ncu").glob("source_p45_gemm1_*.csv"))
    assert len(paths) >= 2, "the source pages notebook 03 draws are not in data/logs/ncu"
    pages = {n: counters.source_regions(counters.read_source_page(p), regions)
             for n, p in zip(["before", "after"], paths)}
    return plots.stall_chart(pages, title="GEMM1 of step 7")


def _sweeps(p):
    candidates = list(dict.fromkeys(s for r in p.variant("faithful_by_batch").routes for s in r.slugs))
    return results.every_sweep(p, having=["eager", *candidates]), ["eager", *candidates]


def _spread():
    sweeps, variants = _sweeps(P12)
    return plots.spread_chart(sweeps, "batch_size", problem=P12, variants=variants)


def _route():
    return plots.route_chart([(p, "faithful_by_batch", results.route_check(p, "faithful_by_batch"))
                              for p in (P12, P45)])


def _variant_bars():
    rec = results.recorded(P45)
    fig = plots.variant_bars(rec[rec["step"].between(0, 7) & (rec["variant"] != "naive")],
                             title="Problem 45 on the H200")
    fig.set_size_inches(8.0, fig.get_size_inches()[1])   # as notebook 03 does, then lays it out again
    fig.tight_layout()
    return fig


def _label_points():
    rec = results.recorded(P12)
    fig, ax = plt.subplots(figsize=(8.2, 4.0))
    ax.scatter(rec["median_ms"], rec["rel_error"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    fig.canvas.draw()
    plots.label_points(ax, list(rec["median_ms"]), list(rec["rel_error"]), list(rec["variant"]))
    return fig


# Each function the notebooks call, drawn as they draw it; None for one that draws no figure.
FIGURES = {
    "roofline_points": None,                    # the points of roofline_chart
    "ridge_crossing": None,                     # a number for floor_chart's dashed lines
    "roofline_chart": _roofline,
    "swizzle_atom_figure": lambda: plots.swizzle_atom_figure(highlight=2),
    "accumulator_fragment_figure": plots.accumulator_fragment_figure,
    "stall_chart": _stall,
    "variant_bars": _variant_bars,              # the explorer's, on a GPU
    "floor_chart": lambda: plots.floor_chart(P12, H200, precisions=("fp32", "fp16x3")),
    "spread_chart": _spread,
    "route_chart": _route,
    "label_points": _label_points,
    "run_spread_chart": lambda: plots.run_spread_chart(
        pd.concat([results.run_spread(p) for p in (P12, P45)], ignore_index=True), title="run to run"),
}

# Figures whose key sits inside their axes by design, and why that covers nothing.
KEY_INSIDE = {
    "roofline_chart": "the roofs leave the upper left empty, and each point's number is placed clear "
                      "of the key (plots._place_numbers)",
}


def test_every_figure_the_notebooks_draw_has_a_case():
    called = _called_by_notebooks()
    assert called, "no plots.<name>( call found in the notebooks"
    assert not called - set(FIGURES), f"figures drawn by a notebook with no case here: {called - set(FIGURES)}"


def _draw(make) -> tuple[plt.Figure, bytes]:
    """``make()`` and the PNG the inline backend would show, every warning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = make()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
    return fig, buf.getvalue()


def _keys_over_axes(fig: plt.Figure) -> list[str]:
    """Each key (legend) of ``fig`` that lies over one of its axes, as "key -> axes"."""
    if not hasattr(fig.canvas, "get_renderer"):   # a figure closed once drawn: give it a canvas again
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    keys = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [f"{[t.get_text() for t in key.get_texts()][:3]} -> axes '{ax.get_title()}'"
            for key in keys for ax in fig.axes
            if key.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))]


@pytest.mark.parametrize("name", [n for n, make in FIGURES.items() if make is not None])
def test_the_figure_draws_without_a_warning_and_its_key_covers_nothing(name):
    fig, png = _draw(FIGURES[name])
    assert png.startswith(b"\x89PNG")
    if name not in KEY_INSIDE:
        assert not _keys_over_axes(fig), f"{name}: a key over its data: {_keys_over_axes(fig)}"
    plt.close(fig)


def test_the_checks_catch_a_warning_and_a_key_over_the_curves():
    # Both checks above can fail: a figure that warns, and one whose key sits on its data.
    def warns():
        fig, ax = plt.subplots()
        ax.plot([1, 2], [1, 2])
        ax.set_xlim(1, 1)                       # "Attempting to set identical low and high xlims"
        return fig

    with pytest.raises(UserWarning, match="identical"):
        _draw(warns)

    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], label="a curve")
    ax.legend(loc="center")
    fig.canvas.draw()
    assert _keys_over_axes(fig) == ["['a curve'] -> axes ''"]
    plt.close(fig)
