"""One formatting of numbers everywhere (fusedkit.present)."""

import math

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
                       "speedup": [1.0, 3.124119], "call memory MB": [67.1, math.nan]})
    out = present.format_frame(df)
    assert out.to_dict("records") == [
        {"step": "0", "variant": "eager", "ms": "2.724", "TFLOP/s": "50.5", "% of floor": "75%",
         "rel. error": "1.6e-06", "speedup": "1.00x", "call memory MB": "67"},
        {"step": "6", "variant": "triton_fp16x3", "ms": "0.872", "TFLOP/s": "157.7",
         "% of floor": "48%", "rel. error": "2.5e-07", "speedup": "3.12x", "call memory MB": "–"}]
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
        assert all(s.startswith("H200, 2026-") for s in shown["recorded"])


def test_md_renders_markdown_with_the_values_given():
    m = present.md("step 6 reaches {s} ({t} ms)", s=present.speedup(3.1241), t=present.ms(0.8719))
    assert m._repr_markdown_() == "step 6 reaches 3.12x (0.872 ms)" == str(m)


def test_us_diff_is_signed_microseconds():
    assert present.us_diff(-0.00045) == "-0.5" and present.us_diff(0.0123) == "+12.3"
    assert present.us_diff(float("nan")) == present.MISSING
