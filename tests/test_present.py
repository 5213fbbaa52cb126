"""One formatting of numbers everywhere (fusedkit.present)."""

import math
import re

import pandas as pd

from fusedkit import present, results
from fusedkit.problems import get


def test_each_quantity_has_one_format():
    assert present.ms(2.724032) == "2.724"
    assert present.us(28.832) == "28.8"
    assert present.tflops(157.653905) == "157.7"
    assert present.pct(75.318621) == "75%"
    assert present.share(0.775) == "78%"
    assert present.err(1.234e-7) == "1.2e-07"
    assert present.err(2.871402e-04) == "2.9e-04"
    assert present.speedup(3.124119) == "3.12x"
    assert present.gbps(3174.244952) == "3174"
    assert present.mb(67.108864) == "67"
    assert present.count(6.0) == "6"
    for f in (present.ms, present.pct, present.err, present.speedup):
        assert f(math.nan) == present.MISSING and f(None) == present.MISSING


def test_format_frame_by_column_names_and_step_as_an_integer():
    df = pd.DataFrame({"step": [0.0, 6.0], "variant": ["eager", "triton_fp16x3"],
                       "ms": [2.724032, 0.871936], "TFLOP/s": [50.463476, 157.653905],
                       "% of floor": [75.318621, 47.825766], "rel. error": [1.633e-06, 2.477e-07],
                       "speedup": [1.0, 3.124119], "peak_mem_mb": [67.1, math.nan]})
    out = present.format_frame(df)
    assert out.to_dict("records") == [
        {"step": "0", "variant": "eager", "ms": "2.724", "TFLOP/s": "50.5", "% of floor": "75%",
         "rel. error": "1.6e-06", "speedup": "1.00x", "peak_mem_mb": "67"},
        {"step": "6", "variant": "triton_fp16x3", "ms": "0.872", "TFLOP/s": "157.7",
         "% of floor": "48%", "rel. error": "2.5e-07", "speedup": "3.12x", "peak_mem_mb": "–"}]
    assert df["ms"].iloc[0] == 2.724032           # the input is left alone


def test_the_results_table_reads_well():
    rec = results.recorded(get("p12"))
    table = present.table(results.ladder_table(rec))
    html = table.to_html()
    assert "0.000000" not in html and ">step<" in html
    if not rec.empty:
        shown = present.format_frame(results.ladder_table(rec))
        assert set(shown["step"]) <= {str(v.number) for v in get("p12").ladder()}  # "9", not "9.0"
        assert all(s.endswith("x") for s in shown["speedup"] if s != present.MISSING)
        # One device: the caption names it once, each row says its day.
        assert results.caption(rec).startswith("NVIDIA H200, 2026-")
        assert all(re.fullmatch(r"2026-\d\d-\d\d", s) for s in shown["recorded"])
        assert not any(re.search(r"commit|[0-9a-f]{7}\b", s) for s in shown["recorded"])


def test_md_renders_markdown_with_the_values_given():
    m = present.md("step 6 reaches {s} ({t} ms)", s=present.speedup(3.1241), t=present.ms(0.8719))
    assert m._repr_markdown_() == "step 6 reaches 3.12x (0.872 ms)" == str(m)


def test_a_missing_value_is_a_dash_in_every_column_never_nan():
    # Columns the rules know, and ones they do not (a notebook's own): no cell reads "nan".
    df = pd.DataFrame({"variant": ["a", None, "c"], "ms": [1.0, math.nan, 2.0],
                       "cycles per lane instruction": [3.5, math.nan, 4.0],
                       "rows": pd.array([1, None, 4], dtype="Int64"), "note": ["x", "y", math.nan]})
    out = present.format_frame(df)
    assert list(out["cycles per lane instruction"]) == [3.5, present.MISSING, 4.0]   # numbers kept
    assert list(out["rows"]) == [1, present.MISSING, 4] and out.loc[2, "note"] == present.MISSING
    assert out.loc[1, "variant"] == present.MISSING and out.loc[1, "ms"] == present.MISSING
    html = present.table(df).to_html()
    assert not re.search(r">\s*(nan|NaN|None|<NA>)\s*<", html)
    assert present.MISSING_NOTE in html                       # the dash is explained under the table


def test_a_column_with_no_value_is_left_out_of_a_table():
    df = pd.DataFrame({"variant": ["a", "b"], "ms": [1.0, 2.0], "peak_mem_mb": [math.nan, None],
                       "% of measured": [math.nan, math.nan]})
    assert present.all_missing(df) == ["peak_mem_mb", "% of measured"]
    html = present.table(df).to_html()
    assert "peak_mem_mb" not in html and "% of measured" not in html and "2.000" in html
    assert present.MISSING_NOTE not in html                   # no dash left: nothing to explain
    assert ">ms<" in present.table(df.iloc[0:0]).to_html()    # an empty table keeps its header


def test_sizes_and_devices_read_short():
    assert present.sizes("batch_size=16384,input_size=2048,hidden_size=4096,output_size=1024") == \
        "16384 × 2048 × 4096 × 1024"
    assert present.sizes("1024 × 8192 × 8192") == "1024 × 8192 × 8192"   # already short: as it is
    assert present.device("NVIDIA H200") == "H200" and present.device("AMD MI300X") == "AMD MI300X"
    shown = present.format_frame(pd.DataFrame({"sizes": ["m=4,n=8"], "device": ["NVIDIA A100-SXM4-80GB"]}))
    assert shown.iloc[0].to_dict() == {"sizes": "4 × 8", "device": "A100-SXM4-80GB"}


def test_text_columns_wrap_and_numbers_stay_on_one_line():
    df = pd.DataFrame({"kernel": ["sm80_xmma_gemm_" + "x" * 100], "variant": ["eager"], "tier": ["fp32-faithful"],
                       "ms": [2.7]})
    html = present.table(df).to_html()
    css = dict(re.findall(r"(#T_\w+ td\.col\d) \{([^}]*)\}", html))
    cols = {name: f"col{i}" for i, name in enumerate(df.columns)}
    rule = lambda name: next(v for k, v in css.items() if k.endswith(cols[name]))   # noqa: E731
    assert "overflow-wrap: anywhere" in rule("kernel")        # a 120-character name breaks anywhere
    assert "break-word" in rule("variant") and "white-space: normal" in rule("variant")
    assert "white-space: nowrap" in rule("tier")              # "fp32-" / "faithful" would read badly
    assert not any(k.endswith(cols["ms"]) for k in css)       # numbers: the table's one-line rule


def test_a_long_code_span_may_break_but_is_never_cut():
    name = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma"
    m = present.md("kernel `{k}`, short `eager_tf32`", k=name)
    assert str(m) == f"kernel `{name}`, short `eager_tf32`"   # the text is the text
    shown = m._repr_markdown_()
    assert shown.replace("\u200b", "") == str(m) and "sm80_\u200bxmma_" in shown
    assert "`eager_tf32`" in shown                            # short spans are left alone


def test_names_may_break_after_their_underscores_in_a_table_only():
    df = pd.DataFrame({"routed_p10_ms": [0.1], "routed": ["small_batch_stream"], "why": ["a < b"]})
    styler = present.table(df)
    html = styler.to_html()
    assert ">routed_<wbr>p10_<wbr>ms<" in html and ">small_<wbr>batch_<wbr>stream<" in html
    assert ">a &lt; b<" in html                               # text is escaped, not taken as HTML
    assert list(styler.data["routed"]) == ["small_batch_stream"]   # the frame itself is untouched
    assert present.breakable("__init__") == "__init__"        # nothing to break before
