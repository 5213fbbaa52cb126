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


@pytest.mark.parametrize("key", ["p12", "p45"])
def test_size_picker_has_a_whole_button_per_preset_and_starts_where_told(key):
    from fusedkit.problems import presets

    problem = problems.get(key)
    small = presets.sizes(problem, "small")
    assert list(presets.of(problem)) == ["KernelBench", "small, odd"]
    assert all(v % 16 for v in small.values()) and small != problem.defaults   # off every tile
    sp = SizePicker(problem, sizes=small)          # as a notebook's picker cell gets SIZES[key]
    assert sp.sizes == small and "small, odd preset" in sp.message.value
    assert set(sp.presets) == set(presets.of(problem)) and sp.reset is sp.presets["KernelBench"]
    for label, button in sp.presets.items():
        # the whole label shows: no fixed width to truncate it ("KernelBench si…" in JupyterLab)
        assert label in button.description and button.layout.width == "auto"
        assert button.layout.max_width == "100%"
    sp.reset.click()
    assert sp.sizes == problem.defaults and "KernelBench preset" in sp.message.value
    sp.presets["small, odd"].click()
    assert sp.sizes == small
    one = next(iter(problem.defaults))
    partial = SizePicker(problem, sizes={one: 3})   # a dimension left out keeps KernelBench's value
    assert partial.sizes == {**problem.defaults, one: 3} and "preset" not in partial.message.value
    assert SizePicker(problem, sizes=None).sizes == problem.defaults
    with pytest.raises(problems.SizeError, match="is out of range"):
        SizePicker(problem, sizes={one: 0})
    assert f"{SizePicker.DOM_CLASS}-{key}" in sp.widget._dom_classes


def _measured_points(problem, run):
    """Every step of a recorded run at its measured rate, as notebooks 01 and 02 plot them."""
    meas = run[run["step"].notna()]
    at = problem.sizes(problems.parse_sizes(meas["sizes"].iloc[0]))
    return pd.DataFrame({"label": meas["variant"], "intensity": problem.flops(at) / problem.min_bytes(at),
                         "tflops": meas["tflops"], "kind": "measured"})


def _floor_points(problem):
    """Stage floors and the fused floor in two precisions, as notebooks 01 and 02 plot them."""
    pts = pd.concat([plots.roofline_points(problem, problem.defaults, H200, p).assign(kind=f"{p} floor")
                     for p in ("fp32", "tf32x3")])
    return pts[pts["label"].str.startswith("fused") | (pts["kind"] == "fp32 floor")]


@pytest.mark.parametrize("key", ["p12", "p45"])
@pytest.mark.parametrize("which", ["measured", "floors"])
def test_roofline_labels_never_collide(key, which):
    # The real data: the recorded H200 steps crowd one intensity at near-equal rates.
    from fusedkit import results  # noqa: PLC0415

    problem = problems.get(key)
    if which == "measured":
        run = results.recorded(problem)
        if run.empty:
            pytest.skip(f"no recorded H200 run of {key} in data/records.csv")
        pts = _measured_points(problem, run)
        gpu = H200.with_measurements(mem_gbps=results.run_ceilings(run).get("copy_gbps"))
    else:
        pts, gpu = _floor_points(problem), H200
    fig = plots.roofline_chart(gpu, pts, precisions=["fp32", "tf32x3", "fp16x3", "tf32"])
    for dpi in (72, 90, 150):                # the notebooks' inline dpi and a sharper one
        fig.set_dpi(dpi)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        numbers = [t for t in ax.texts if t.get_gid() == "roofline-number"]
        key_text = [t for t in ax.texts if t.get_gid() == "roofline-key"]
        assert len(key_text) == 1 and len(numbers) == pts.groupby(["intensity", "tflops"]).ngroups
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in numbers + key_text]
        boxes.append(("legend", ax.get_legend().get_window_extent(renderer)))
        clashes = [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:]
                   if box_a.overlaps(box_b)]
        assert not clashes, f"{key} {which} at dpi {dpi}: labels overlap: {clashes}"
        inside = ax.get_window_extent(renderer)
        for t in numbers:                     # every number stays on the plot, by its point
            box = t.get_window_extent(renderer)
            assert inside.x0 <= box.x0 and box.x1 <= inside.x1, (t.get_text(), box, inside)
    # The key names every point once, numbered from the highest rate down.
    listed = key_text[0].get_text().splitlines()
    assert [ln.split()[0] for ln in listed] == [str(i + 1) for i in range(len(numbers))]
    assert set(", ".join(ln.split(None, 1)[1] for ln in listed).split(", ")) == set(pts["label"])


def _all_widgets(root):
    out, todo = [], [root]
    while todo:
        wdg = todo.pop()
        out.append(wdg)
        todo += list(getattr(wdg, "children", ()))
    return out


def test_explorer_layout_fits_a_narrow_page():
    # Nothing has a fixed width its column cannot shrink, rows wrap, wide output scrolls.
    import dataclasses  # noqa: PLC0415

    import ipywidgets as w  # noqa: PLC0415

    from fusedkit.mode import detect_mode  # noqa: PLC0415
    from fusedkit.widgets import LadderExplorer  # noqa: PLC0415

    ex = LadderExplorer(problems.get("p12"), dataclasses.replace(detect_mode(), gpu=False))
    for wdg in _all_widgets(ex.widget):
        lay = wdg.layout
        if lay.width and lay.width.endswith("px"):
            assert lay.max_width == "100%", (type(wdg).__name__, lay.width)
        if isinstance(wdg, w.HBox):
            assert lay.flex_flow == "row wrap", [type(c).__name__ for c in wdg.children]
    assert ex.output.layout.overflow == "auto" and ex.output.layout.max_width == "100%"
    assert ex.widget.layout.max_width == "100%"
    ex._show_table("t", pd.DataFrame({"a": [1]}))   # tables scroll inside the output area
    assert "overflow-x:auto" in ex.output.outputs[-1]["data"]["text/html"]


def test_stall_chart_draws_a_bar_per_page_and_region():
    from pathlib import Path

    from fusedkit import counters

    ncu = Path(__file__).resolve().parent.parent / "data" / "logs" / "ncu"
    tiles, k_tiles = 128 * 32, 32
    regions = {"k-loop": tiles * k_tiles * 8, "epilogue": tiles * 8}
    pages = {c: counters.source_regions(counters.read_source_page(ncu / f"source_p45_gemm1_{c}.csv"),
                                        regions) for c in ("315f0f2", "b39259a")}
    fig = plots.stall_chart(pages, reasons=4, title="GEMM1")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["b39259a: epilogue", "b39259a: k-loop", "315f0f2: epilogue", "315f0f2: k-loop"]
    assert len(ax.get_legend().get_texts()) == 5  # four reasons and the rest
    assert not matplotlib.pyplot.fignum_exists(fig.number)      # closed: display(fig) shows it once
    with pytest.raises(ValueError, match="no source page"):
        plots.stall_chart({})


def _cell_labels(ax) -> dict[tuple[int, int], str]:
    """The text drawn at the centre of each cell (row, column) of a cell-grid axes."""
    return {(int(t.get_position()[1]), int(t.get_position()[0])): t.get_text() for t in ax.texts}


def test_swizzle_atom_figure_labels_every_cell_from_the_mirror():
    import matplotlib.pyplot as plt

    from fusedkit import hopper_layout as hl

    fig = plots.swizzle_atom_figure(highlight=5)
    assert not plt.fignum_exists(fig.number), "closed: a notebook shows it once"
    logical, stored = fig.axes
    atom = hl.swizzle_atom()
    cells = _cell_labels(stored)
    assert len(cells) == 64
    assert all(cells[r, p] == str(atom[r, p]) for r in range(8) for p in range(8))
    assert all(_cell_labels(logical)[r, c] == str(c) for r in range(8) for c in range(8))
    outlined = sorted((int(b.get_y()), int(b.get_x())) for b in stored.patches)
    assert outlined == sorted((r, hl.swizzled_chunk(r, 5)) for r in range(8))  # chunk 5's 8 rows
    assert len({p for _, p in outlined}) == 8                                   # in 8 positions
    assert fig.get_size_inches()[0] * 100 <= 824
    with pytest.raises(ValueError, match="highlight=8"):
        plots.swizzle_atom_figure(highlight=8)


def test_accumulator_fragment_figure_labels_thread_and_register_from_the_mirror():
    from fusedkit import hopper_layout as hl

    fig = plots.accumulator_fragment_figure(cols=16, n=128)
    (ax,) = [a for a in fig.axes if a.texts]
    cells = _cell_labels(ax)
    assert len(cells) == 64 * 16
    for (r, c), label in cells.items():
        t, i = hl.accumulator_owner(r, c, 128)
        assert label == f"{t}:{i}", (r, c)
    assert cells[0, 0] == "0:0" and cells[0, 2] == "1:0" and cells[8, 0] == "0:2"
    assert cells[16, 9] == "32:5" and cells[63, 15] == "127:7"
    assert fig.get_size_inches()[0] * 100 <= 824
    with pytest.raises(ValueError, match="cols=12"):
        plots.accumulator_fragment_figure(cols=12)


def test_ceiling_bars_draw_both_shares_per_variant_and_close():
    rows = pd.DataFrame({"step": [0.0, 7.0], "variant": ["eager", "tiled"],
                         "pct_of_floor": [75.0, 58.4], "pct_of_measured": [99.0, float("nan")]})
    fig = plots.ceiling_bars(rows, title="t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["step 0  eager", "step 7  tiled"]
    shown = {t.get_text() for t in ax.texts}
    assert {"75%", "58%", "99%"} <= shown            # a missing share is drawn as nothing, said "–"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["% of the datasheet floor", "% of the measured ceiling"]
    assert fig.get_size_inches()[0] * fig.dpi <= 830
    assert not matplotlib.pyplot.fignum_exists(fig.number)
    with pytest.raises(ValueError, match="rows lacks column"):
        plots.ceiling_bars(rows.drop(columns="pct_of_measured"))


def test_bars_against_draw_the_references_and_name_each_ratio():
    df = pd.DataFrame({"variant": ["bar", "one", "three"], "median_ms": [0.2, 0.25, 0.66],
                       "tier": ["fast", "fast", "fp32-faithful"]})
    refs = {"cuBLAS fp16": 0.2, "three cuBLAS fp16 GEMMs": 0.6}
    fig = plots.bars_against(df, refs, against={"one": "cuBLAS fp16", "three": "three cuBLAS fp16 GEMMs"})
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert any("1.25x cuBLAS fp16" in t for t in texts) and any("1.10x three" in t for t in texts)
    assert any(t.strip() == "0.200 ms" for t in texts)                  # no reference named: ms only
    assert sorted(round(line.get_xdata()[0], 3) for line in ax.lines if len(set(line.get_xdata())) == 1) == [0.2, 0.6]
    assert any("three cuBLAS fp16 GEMMs: 0.600 ms" in t.get_text() for t in ax.get_legend().get_texts())
    assert not matplotlib.pyplot.fignum_exists(fig.number)
    with pytest.raises(ValueError, match="against names reference"):
        plots.bars_against(df, refs, against={"one": "cuBLAS bf16"})
    with pytest.raises(ValueError, match="a reference is a time in ms > 0"):
        plots.bars_against(df, {"x": float("nan")}, against={})


def test_tier_chart_gives_each_tier_its_own_bar():
    best = pd.DataFrame({"problem": ["p12"] * 3 + ["p45"] * 2,
                         "tier": ["reference", "fp32-faithful", "kb-pass", "reference", "kb-pass"],
                         "variant": ["eager", "wgmma_fp16x3", "wgmma_fp16x3", "eager", "bf16"],
                         "speedup": [1.0, 4.2, 4.2, 1.0, 10.3]})
    fig = plots.tier_chart(best)
    top = fig.axes[0]
    ys = sorted(round(b.get_y(), 6) for b in top.patches)
    assert len(ys) == 3 and len(set(ys)) == 3                      # one row per tier, none hidden
    assert [t.get_text() for t in top.get_yticklabels()] == ["reference", "fp32-faithful", "kb-pass"]
    assert sum("wgmma_fp16x3" in t.get_text() for t in top.texts) == 2
    assert any("none of ours" in t.get_text() for t in fig.axes[1].texts)    # p45 has no faithful row
    assert fig.get_size_inches()[0] * fig.dpi <= 824
    with pytest.raises(ValueError, match="columns"):
        plots.tier_chart(best.drop(columns="speedup"))


def test_run_spread_chart_marks_the_recorded_run():
    spread = pd.DataFrame({"problem": ["p12"] * 5, "variant": ["eager"] * 2 + ["tiled"] * 3,
                           "vs_median_pct": [-0.1, 0.1, -1.0, 0.0, 20.0],
                           "recorded": [False, True, False, False, True]})
    fig = plots.run_spread_chart(spread)
    ax = fig.axes[0]
    grey, red = ax.collections[:2]
    assert len(grey.get_offsets()) == 3 and len(red.get_offsets()) == 2
    assert sorted(red.get_offsets()[:, 0].tolist()) == [0.1, 20.0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["eager", "tiled"]
    with pytest.raises(ValueError, match="run_spread"):
        plots.run_spread_chart(spread.iloc[0:0])


def test_sweep_panels_keep_one_colour_per_variant_across_panels():
    def sweep(variants):
        return pd.DataFrame([{"variant": v, "batch_size": b, "median_ms": m * b, "p10_ms": 0.9 * m * b,
                              "p90_ms": 1.2 * m * b} for m, v in enumerate(variants, start=1) for b in (1, 4, 16)])
    fig = plots.sweep_panels({"p12": sweep(["eager", "a", "by"]), "p45": sweep(["eager", "b", "by"])},
                             "batch_size")
    left, right = fig.axes[:2]
    colour = lambda ax: [tuple(matplotlib.colors.to_rgb(c.lines[0].get_color()))  # noqa: E731
                         for c in ax.containers]                   # one errorbar per variant
    assert colour(left)[0] == colour(right)[0] and colour(left)[2] == colour(right)[2]   # eager, by
    assert colour(left)[1] != colour(right)[1]                       # a and b: two colours
    assert len(fig.legends[0].get_texts()) == 4
    assert fig.get_size_inches()[0] * fig.dpi <= 824
    with pytest.raises(ValueError, match="non-empty"):
        plots.sweep_panels({"p12": sweep([]).iloc[0:0]}, "batch_size")


def test_label_points_keeps_labels_apart():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_xscale("log")
    ax.set_yscale("log")
    x, y = [1.0, 1.1, 10.0], [1e-4, 1.05e-4, 1e-6]
    ax.scatter(x, y)
    ax.set_xlim(0.5, 20)
    ax.set_ylim(1e-7, 1e-3)
    plots.label_points(ax, x, y, ["a", "b", "c"], gap_pt=9)
    # each label's height on the page, in points: its point's plus its offset
    at = {t.get_text(): ax.transData.transform(t.xy)[1] * 72 / fig.dpi + t.xyann[1] for t in ax.texts}
    assert set(at) == {"a", "b", "c"}
    assert at["b"] - at["a"] == pytest.approx(9.0)                  # moved up, not on top of a
    assert at["a"] - at["c"] > 9 and ax.texts[0].xyann[1] == -3.0   # c, far below, stays put
    with pytest.raises(ValueError, match="one entry per point"):
        plots.label_points(ax, x, y, ["a"])
    plt.close(fig)


def test_size_picker_warns_of_sizes_too_big_to_measure_here():
    from fusedkit.widgets import LadderExplorer, SizePicker
    from fusedkit.mode import detect_mode

    p12 = problems.get("p12")
    sp = SizePicker(p12)
    assert "re-run the cells below" in sp.message.value and "too big" not in sp.message.value
    sp.boxes["in_features"].value = 65536        # valid, but its copies do not fit a CPU run
    assert sp.sizes["in_features"] == 65536 and sp.error == ""
    assert "too big to measure here" in sp.message.value and "in_features&lt;=" in sp.message.value
    explorer = LadderExplorer(p12, detect_mode())
    assert "press Run to use them" in explorer.picker.message.value
