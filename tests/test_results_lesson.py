"""Reading runs back from records, and the notebook step helper."""

import pandas as pd
import pytest
import torch

from fusedkit import lesson, records, results
from fusedkit.mode import detect_mode
from fusedkit.problems import fmt_sizes, get

P12 = get("p12")


def _write_run(path, ctx, eager_ms, fast_ms, device_rows=True):
    sizes = fmt_sizes(P12.defaults)
    rows = [records.make_row(ctx, problem="p12", sizes=sizes, variant="eager", timer="cuda-events",
                             median_ms=eager_ms, tier="reference", tflops=50.0),
            records.make_row(ctx, problem="p12", sizes=sizes, variant="triton_fp16x3",
                             timer="cuda-events", median_ms=fast_ms, tier="fp32-faithful", tflops=140.0)]
    if device_rows:
        rows.append(records.make_row(ctx, problem="device", sizes="bytes=1", variant="d2d_copy",
                                     timer="cuda-events", median_ms=1.0, gbps=4000.0))
    records.append_rows(path, rows)


def test_latest_run_takes_ratios_within_the_newest_run(tmp_path):
    path = tmp_path / "r.csv"
    old = records.RunContext.collect()
    old.timestamp, old.run_id = "2026-01-01T00:00:00Z", "20260101T000000Z-aaaaaa"
    _write_run(path, old, 3.0, 1.0)
    new = records.RunContext.collect()
    _write_run(path, new, 2.0, 1.0)
    run = results.latest_run(P12, path=path)
    assert set(run["run_id"]) == {new.run_id}
    assert run.loc[run["variant"] == "triton_fp16x3", "speedup"].item() == pytest.approx(2.0)
    assert results.run_ceilings(run, path=path) == {"copy_gbps": 4000.0}
    table = results.ladder_table(run)
    assert list(table["variant"]) == ["eager", "triton_fp16x3"] and list(table["step"]) == [0, 6]
    assert "commit" in results.run_label(run)


def test_latest_run_empty_when_nothing_matches(tmp_path):
    run = results.latest_run(P12, P12.sizes(batch_size=3), path=tmp_path / "none.csv")
    assert run.empty and results.run_label(run) == "no recorded run"


def test_step_header_is_three_lines():
    for v in P12.ladder():
        if v.source:
            assert len(lesson.header(v.source).splitlines()) == 3


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-mode behaviour")
def test_run_step_on_cpu_checks_triton_in_interpreter_and_labels_sources():
    rec = pd.DataFrame()
    out = lesson.run_step(P12, "triton_tf32x3", P12.defaults, detect_mode(), rec)
    col = out.columns[0]
    assert "interpreter" in col and out.loc["tier", col] == "logic right"   # tf32x3 not judged there
    cuda = lesson.run_step(P12, "tiled", P12.defaults, detect_mode(), rec)
    assert "no GPU here" in cuda.columns[0]


def test_a_partial_rerun_does_not_hide_the_full_ladder(tmp_path):
    path = tmp_path / "r.csv"
    full = records.RunContext.collect()
    full.timestamp, full.run_id = "2026-01-01T00:00:00Z", "20260101T000000Z-aaaaaa"
    _write_run(path, full, 3.0, 1.0)
    partial = records.RunContext.collect()
    records.append_rows(path, [records.make_row(partial, problem="p12", sizes=fmt_sizes(P12.defaults),
                                                variant="eager", timer="cuda-events", median_ms=2.9)])
    assert set(results.latest_run(P12, path=path)["run_id"]) == {full.run_id}


def test_live_row_checks_then_times():
    s = P12.sizes(batch_size=5, in_features=33, out_features=7)
    row = lesson.live_row(P12, "addmm_alpha_beta", s, "cpu", label="live here", seeds=2)
    assert row["tier"] == "fp32-faithful" and row["ms"] > 0 and row["timer"] == "cpu-wall"
    assert row["TFLOP/s"] > 0 and row["source"] == "live here"
