"""Figures and the size picker."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fusedkit import hardware, plots, problems  # noqa: E402
from fusedkit.widgets import SizePicker  # noqa: E402

H200 = hardware.spec("H200 SXM")


def test_roofline_chart_has_roofs_and_points():
    p = problems.get("p12")
    pts = plots.roofline_points(p, p.defaults, H200, "fp32")
    assert list(pts["label"])[-1].startswith("fused") and (pts["tflops"] <= 67.0 + 1e-9).all()
    fig = plots.roofline_chart(H200, pts)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and len(ax.lines) >= 3 and len(ax.collections) == len(pts)
    assert "H200" in ax.get_title()


def test_roofline_points_sit_on_the_roof():
    q = problems.get("p45")
    pts = plots.roofline_points(q, q.defaults, H200, "tf32").set_index("label")
    sig = pts.loc["sigmoid"]   # memory-bound: on the slanted roof
    assert sig["tflops"] == pytest.approx(sig["intensity"] * 4800e9 / 1e12)


def test_variant_bars_annotate_speedups():
    df = pd.DataFrame({"variant": ["eager", "fast"], "median_ms": [2.0, 0.5],
                       "p10_ms": [1.9, 0.45], "p90_ms": [2.1, 0.55], "tier": ["reference", "fast"]})
    fig = plots.variant_bars(df)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("4.00x" in t for t in texts) and any("1.00x" in t for t in texts)
    with pytest.raises(ValueError, match="baseline='eager' is not among"):
        plots.variant_bars(df[df["variant"] != "eager"])


def test_empty_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="points is empty"):
        plots.roofline_chart(H200, pd.DataFrame(columns=["label", "intensity", "tflops"]))


def test_size_picker_explains_bad_values_and_keeps_last_valid():
    sp = SizePicker(problems.get("p45"))
    assert sp.sizes == problems.get("p45").defaults
    sp.boxes["hidden_size"].value = 0
    assert "hidden_size=0 is out of range" in sp.message.value and "hidden_size=0" in sp.error
    assert sp.sizes["hidden_size"] == 4096
    sp.boxes["hidden_size"].value = 333
    assert sp.sizes["hidden_size"] == 333 and sp.error == ""
    sp.reset.click()
    assert sp.sizes == problems.get("p45").defaults
    with pytest.raises(problems.SizeError):
        sp.set_sizes({"batch_size": -1})
