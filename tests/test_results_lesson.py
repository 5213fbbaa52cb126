"""Reading runs back from records, and the notebook step helper."""

import re

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
    assert list(table["variant"]) == ["eager", "triton_fp16x3"] and list(table["step"]) == [0, 9]
    assert "commit" in results.run_label(run)


def test_latest_run_newest_prefers_the_newest_run_over_a_fuller_older_one(tmp_path):
    """A fuller older run wins by default (a partial re-run must not hide the ladder); with
    newest=True the newer run that timed the step wins (the step's kernel changed since)."""
    path = tmp_path / "r.csv"
    sizes = fmt_sizes(P12.defaults)
    old = records.RunContext.collect()
    old.timestamp, old.run_id = "2026-01-01T00:00:00Z", "20260101T000000Z-aaaaaa"
    _write_run(path, old, 3.0, 1.5)
    records.append_rows(path, [records.make_row(old, problem="p12", sizes=sizes, variant="tiled",
                                                timer="cuda-events", median_ms=2.5, tier="fp32-faithful")])
    new = records.RunContext.collect()
    _write_run(path, new, 3.0, 1.0)
    assert set(results.latest_run(P12, path=path, having=["triton_fp16x3"])["run_id"]) == {old.run_id}
    run = results.latest_run(P12, path=path, having=["triton_fp16x3"], newest=True)
    assert set(run["run_id"]) == {new.run_id}
    assert run.loc[run["variant"] == "triton_fp16x3", "speedup"].item() == pytest.approx(3.0)


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
    src = out.index[0]
    assert "interpreter" in src and out.loc[src, "tier"] == "logic right"   # tf32x3 not judged there
    assert re.fullmatch(r"\d\.\de-\d\d", out.loc[src, "rel. error"])       # 1.2e-07, not 0.0
    cuda = lesson.run_step(P12, "tiled", P12.defaults, detect_mode(), rec)
    assert "no GPU here" in cuda.index[0]


def test_run_step_shows_the_recorded_row_formatted(tmp_path):
    path = tmp_path / "r.csv"
    _write_run(path, records.RunContext.collect(), 2.724032, 0.871936)
    run = results.latest_run(P12, path=path)
    out = lesson.run_step(P12, "eager", P12.defaults, detect_mode(), run)
    row = out.loc[[i for i in out.index if i.startswith("recorded")][0]]
    assert row["ms"] == "2.724" and row["speedup"] == "1.00x" and row["TFLOP/s"] == "50.0"
    assert row["sizes"] == "1024 × 8192 × 8192"


def test_say_prints_numbers_from_the_records(tmp_path):
    path = tmp_path / "r.csv"
    _write_run(path, records.RunContext.collect(), 2.724032, 0.871936)
    run = results.latest_run(P12, path=path)
    text = str(lesson.say("fp16x3 takes {triton_fp16x3.ms}, {triton_fp16x3.speedup} eager's "
                          "{eager.ms}; {note}", run, note="done"))
    assert text == "fp16x3 takes 0.872 ms, 3.12x eager's 2.724 ms; done"
    empty = str(lesson.say("naive takes {naive.ms}", run))
    assert empty.startswith("naive takes –\n") and "No recorded numbers for naive" in empty
    assert lesson.value(run, "eager") == pytest.approx(2.724032)
    assert lesson.value(run, "naive") != lesson.value(run, "naive")   # NaN


def test_counters_are_shown_or_one_line_says_there_are_none(tmp_path, monkeypatch):
    from fusedkit import counters

    monkeypatch.setattr(counters, "default_path", lambda: tmp_path / "counters.csv")
    none = lesson.show_counters(P12, "tiled")
    assert "none recorded" in none._repr_markdown_()
    ctx = records.RunContext.collect()
    row = dict(vars(ctx), problem="p12", sizes=fmt_sizes(P12.defaults), variant="tiled", launch=0,
               kernel="p12_tiled_kernel(float const*, float const*)", duration_us=3500.5,
               sm_pct=80.2, tensor_pct=0.0, fma_pct=61.4, dram_pct=5.0, dram_gb=0.3,
               occupancy_pct=24.9, registers=128, local_bytes=0, l2_hit_pct=90.1, grid=512,
               block=256, smem_kb=16.0)
    pd.DataFrame([row], columns=list(counters.COLUMNS)).to_csv(tmp_path / "counters.csv", index=False)
    shown = lesson.show_counters(P12, "tiled")
    html = shown._repr_html_()
    assert "p12_tiled_kernel" in html and "61%" in html and "3500.5" in html and "Nsight" in html
    assert "float const" not in html


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
    assert row["sizes"] == "5 × 33 × 7"


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-mode behaviour")
def test_step_shows_code_then_counters_then_check_and_time(capsys, tmp_path, monkeypatch):
    from fusedkit import counters

    monkeypatch.setattr(counters, "default_path", lambda: tmp_path / "counters.csv")
    path = tmp_path / "r.csv"
    _write_run(path, records.RunContext.collect(), 2.724032, 0.871936)
    run = results.latest_run(P12, path=path)
    lesson.step(P12, "tiled", P12.defaults, detect_mode(), run, previous="naive")
    out = capsys.readouterr().out
    order = [out.index(s) for s in ("The code", "p12/07_tiled.cu", "What the hardware did",
                                    "none recorded", "Check and time", "no GPU here")]
    assert order == sorted(order)
    assert "+ " in out                        # lines changed against step 1 are marked


def test_short_kernel_names_keep_the_operation():
    assert lesson.short_kernel("void at::vectorized_elementwise_kernel<4, at::AbsFunctor<float>, "
                               "std::array<char *, 2>>(int, T2, T3)") == "vectorized_elementwise_kernel: Abs"
    assert lesson.short_kernel("p12_tiled_kernel") == "p12_tiled_kernel"
    assert len(lesson.short_kernel("x" * 200)) == 56
