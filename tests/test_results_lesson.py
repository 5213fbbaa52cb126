"""Reading runs back from records, and the notebook step helper."""

import math
import re

import pandas as pd
import pytest
import torch

from fusedkit import lesson, records, results
from fusedkit.mode import detect_mode
from fusedkit.precision import KERNEL_TIERS
from fusedkit.problems import fmt_sizes, get

P12 = get("p12")


SIZES = fmt_sizes(P12.defaults)
_RUNS = iter(range(1, 10**6))


def _ctx(day=None, commit="abc1234", device="NVIDIA H200"):
    """A run context of committed code (not this tree's "+dirty" one); ``day`` of 2026-01."""
    i = next(_RUNS)
    day = day or 1 + i % 27
    return records.RunContext(run_id=f"202601{day:02d}T{i % 24:02d}0000Z-{i:06x}",
                              timestamp=f"2026-01-{day:02d}T{i % 24:02d}:00:00Z", commit=commit,
                              device=device, driver="", cuda="", torch="2.11.0", triton="3.6.0")


def _row(ctx, variant, ms, tier="fp32-faithful", sizes=SIZES, timer="cuda-events", problem="p12",
         **extra):
    return records.make_row(ctx, problem=problem, sizes=sizes, variant=variant, timer=timer,
                            median_ms=ms, tier=tier, **extra)


def _write_run(path, ctx, eager_ms, fast_ms, device_rows=True):
    rows = [_row(ctx, "eager", eager_ms, "reference", tflops=50.0),
            _row(ctx, "triton_fp16x3", fast_ms, tflops=140.0)]
    if device_rows:
        rows.append(_row(ctx, "d2d_copy", 1.0, "", sizes="bytes=1", problem="device", gbps=4000.0))
    records.append_rows(path, rows)


@pytest.fixture
def full_then_partial(tmp_path):
    """An older full run of five variants, then a newer partial run that re-times two of them
    and times a new step, then rows a recorded result must never read: a "+dirty" run, a run
    without eager, a CPU row, an export row. Returns the path, the runs and their times."""
    path = tmp_path / "r.csv"
    full, partial = _ctx(day=1), _ctx(day=2)
    t_full = {"eager": 3.0, "naive": 90.0, "tiled": 2.5, "triton_fp16x3": 1.2, "triton_tf32": 0.5}
    t_part = {"eager": 2.9, "triton_fp16x3": 0.9, "wgmma_fp16x3": 0.7}
    tiers = {"eager": "reference", "triton_tf32": "fast"}
    rows = [_row(full, v, ms, tiers.get(v, "fp32-faithful")) for v, ms in t_full.items()]
    rows += [_row(full, "d2d_copy", 1.0, "", sizes="bytes=1", problem="device", gbps=4000.0),
             _row(full, "epilogue_vec4", 0.02, "", gbps=3100.0),
             _row(full, "d2d_copy_for_epilogue_vec4", 0.021, "", gbps=3000.0)]
    rows += [_row(partial, v, ms, tiers.get(v, "fp32-faithful")) for v, ms in t_part.items()]
    rows += [_row(partial, "epilogue_vec4", 0.019, "", gbps=3300.0),
             _row(partial, "d2d_copy_for_epilogue_vec4", 0.02, "", gbps=3150.0),
             _row(partial, "d2d_copy", 1.0, "", sizes="bytes=1", problem="device", gbps=4100.0)]
    dirty, no_eager, later = _ctx(day=3, commit="abc1234+dirty"), _ctx(day=4), _ctx(day=5)
    rows += [_row(dirty, "eager", 2.8, "reference"), _row(dirty, "triton_fp16x3", 0.1),
             _row(no_eager, "tiled", 0.2),
             _row(later, "eager", 2.0, "reference", timer="cpu-wall"),
             _row(later, "tiled", 0.1, timer="cpu-wall"),
             _row(partial, "export:triton_fp16x3", 0.05)]
    records.append_rows(path, rows)
    return path, full, partial, t_full, t_part


def test_recorded_is_each_variants_newest_clean_measurement(full_then_partial):
    path, full, partial, t_full, t_part = full_then_partial
    rec = results.recorded(P12, path=path).set_index("variant")
    assert set(rec.index) == set(t_full) | set(t_part)          # one row per variant, no export
    for v in t_part:                                            # the newer partial run wins ...
        assert rec.loc[v, "run_id"] == partial.run_id and rec.loc[v, "median_ms"] == t_part[v]
        assert rec.loc[v, "speedup"] == pytest.approx(t_part["eager"] / t_part[v])
        assert rec.loc[v, "eager_ms"] == pytest.approx(t_part["eager"])
    for v in set(t_full) - set(t_part):                         # ... where it timed the variant
        assert rec.loc[v, "run_id"] == full.run_id              # (not the eager-less, dirty, CPU runs)
        assert rec.loc[v, "speedup"] == pytest.approx(t_full["eager"] / t_full[v])
    assert rec.loc["wgmma_fp16x3", "step"] == P12.variant("wgmma_fp16x3").number
    assert rec.loc["wgmma_fp16x3", "title"] == P12.variant("wgmma_fp16x3").title
    assert list(results.recorded(P12, path=path)["variant"])[0] == "eager"   # ladder order
    # the records as they stood after the full run: only its rows
    then = results.recorded(P12, path=path, as_of=full.timestamp)
    assert set(then["run_id"]) == {full.run_id}
    assert results.recorded(P12, path=path, device="A100").empty
    assert results.recorded(P12, P12.sizes(batch_size=3), path=path).empty


def test_clean_rows_leave_out_dirty_export_and_cpu_rows(full_then_partial):
    path = full_then_partial[0]
    rec = records.read_records(path)
    clean = results.clean_rows(rec)
    assert (clean["timer"] == "cuda-events").all()
    assert not clean["commit"].str.endswith("+dirty").any()
    assert not clean["variant"].str.startswith("export:").any()
    assert len(clean) == len(rec) - 2 - 2 - 1                    # dirty pair, CPU pair, export


def test_the_best_is_chosen_from_the_recorded_frame_not_the_fullest_run(full_then_partial):
    path, full, partial, t_full, t_part = full_then_partial
    rec = results.recorded(P12, path=path)
    best = results.best_by_tier(rec, P12)
    assert best["fp32-faithful"]["variant"] == "wgmma_fp16x3"    # only the partial run timed it
    assert best["fp32-faithful"]["run_id"] == partial.run_id
    assert best["kb-pass"]["variant"] == "wgmma_fp16x3"          # a faithful kernel meets kb-pass
    assert best["fast"]["variant"] == "triton_tf32"              # 6x in its run beats 4.1x
    # the fullest run alone would have said triton_fp16x3: the views must not fall back to it
    assert set(results.latest_run(P12, path=path)["run_id"]) == {full.run_id}
    assert results.best_by_tier(results.latest_run(P12, path=path), P12)[
        "fp32-faithful"]["variant"] == "triton_fp16x3"
    with pytest.raises(ValueError, match="2 values of sizes"):
        results.best_by_tier(pd.concat([rec, rec.assign(sizes="batch_size=1")]), P12)
    assert results.best_by_tier(rec.iloc[0:0], P12) == {}


def test_the_best_is_by_same_run_speedup_not_by_time(tmp_path):
    # a kernel timed in a run whose eager was slow is not "faster" for that: ratios within runs
    path = tmp_path / "r.csv"
    a, b = _ctx(day=1), _ctx(day=2)
    records.append_rows(path, [_row(a, "eager", 4.0, "reference"), _row(a, "triton_fp16x3", 1.0),
                               _row(b, "eager", 2.0, "reference"), _row(b, "wgmma_fp16x3", 0.9)])
    best = results.best_by_tier(results.recorded(P12, path=path), P12)
    assert best["fp32-faithful"]["variant"] == "triton_fp16x3"   # 4.0x against 2.2x


@pytest.mark.parametrize("key, tier, slug", [("p12", "fp32-faithful", "wgmma_fp16x3"),
                                             ("p45", "kb-pass", "triton_fused_lse_fp16")])
def test_the_committed_records_best_is_the_newest_row_of_the_fastest(key, tier, slug):
    """On data/records.csv: the steps timed in partial runs after the fullest one are the best
    (the summaries once read only the fullest run and named older kernels)."""
    from fusedkit import problems

    p = problems.get(key)
    rec = results.recorded(p)
    best = results.best_by_tier(rec, p)[tier]
    assert best["variant"] == slug
    ours = rec[~rec["variant"].map(lambda s: p.variant(s).baseline)
               & rec["tier"].isin(KERNEL_TIERS[:KERNEL_TIERS.index(tier) + 1])]
    assert best["speedup"] == ours["speedup"].max()
    # ... and it is that variant's newest clean measurement, its speed-up within its own run
    clean = results.clean_rows(records.read_records(records.default_path()))
    mine = clean[(clean["problem"] == key) & (clean["variant"] == slug)
                 & (clean["sizes"] == fmt_sizes(p.defaults)) & clean["device"].str.contains("H200")]
    newest = mine.sort_values("timestamp").iloc[-1]
    assert best["run_id"] == newest["run_id"] and best["median_ms"] == newest["median_ms"]
    eager = clean[(clean["run_id"] == newest["run_id"]) & (clean["variant"] == "eager")
                  & (clean["sizes"] == newest["sizes"])]
    assert best["speedup"] == pytest.approx(eager["median_ms"].iloc[0] / newest["median_ms"])
    assert best["run_id"] != results.latest_run(p, device="H200")["run_id"].iloc[0]


def test_caption_names_devices_and_the_date_range(full_then_partial):
    path = full_then_partial[0]
    rec = results.recorded(P12, path=path)
    assert results.caption(rec) == "NVIDIA H200, 2026-01-01 to 2026-01-02"
    assert results.caption(rec[rec["variant"] == "wgmma_fp16x3"]) == "NVIDIA H200, 2026-01-02"
    assert results.caption(rec.iloc[0]) == "NVIDIA H200, 2026-01-02"     # eager, re-timed
    assert results.caption(rec.iloc[0:0]) == "no recorded run"


def test_a_table_of_several_runs_labels_each_row(full_then_partial):
    path, full, partial, _, _ = full_then_partial
    rec = results.recorded(P12, path=path)
    table = results.ladder_table(rec).set_index("variant")
    assert table.loc["wgmma_fp16x3", "recorded"] == "2026-01-02"   # one device: the caption names it
    assert table.loc["naive", "recorded"] == "2026-01-01"
    assert results.caption(rec) == "NVIDIA H200, 2026-01-01 to 2026-01-02"
    with pytest.raises(ValueError, match="come from 2 runs"):
        results.run_label(rec)                   # one label for a frame of two runs would lie
    assert "2026-01-02" in results.run_label(rec[rec["run_id"] == partial.run_id])


def test_same_run_reads_the_newest_run_that_timed_every_slug(full_then_partial):
    path, full, partial, t_full, t_part = full_then_partial
    run = results.same_run(P12, ["tiled", "triton_fp16x3"], path=path)
    assert set(run["run_id"]) == {full.run_id}
    assert run.set_index("variant").loc["tiled", "speedup"] == pytest.approx(3.0 / 2.5)
    assert set(results.same_run(P12, ["triton_fp16x3"], path=path)["run_id"]) == {partial.run_id}
    assert results.same_run(P12, ["tiled", "wgmma_fp16x3"], path=path).empty
    assert set(results.latest_run(P12, path=path, having=["triton_fp16x3"], newest=True)["run_id"]) \
        == {partial.run_id}
    with pytest.raises(TypeError, match="a list of names"):
        results.same_run(P12, "tiled", path=path)


def test_components_carry_their_same_run_copy(full_then_partial):
    path, full, partial, _, _ = full_then_partial
    parts = results.components(P12, path=path).set_index("variant")
    assert list(parts.index) == ["epilogue_vec4"]                # the copies are not components
    r = parts.loc["epilogue_vec4"]
    assert r["run_id"] == partial.run_id and r["copy_gbps"] == 3150.0
    assert r["pct_of_copy"] == pytest.approx(100 * 3300 / 3150) and r["device_copy_gbps"] == 4100.0
    every = results.components(P12, path=path, every_run=True)
    assert list(every["run_id"]) == [full.run_id, partial.run_id]
    assert every["pct_of_copy"].iloc[0] == pytest.approx(100 * 3100 / 3000)


def test_same_run_components_reads_the_newest_run_that_timed_them_all(tmp_path):
    path = tmp_path / "r.csv"
    both, newer_one = _ctx(day=1), _ctx(day=2)
    rows = [_row(both, "eager", 3.0, "reference")]
    for ctx, parts in ((both, {"epilogue_vec4": 0.02, "epilogue_scalar": 0.03}),
                       (newer_one, {"epilogue_vec4": 0.019})):
        for slug, ms in parts.items():
            rows += [_row(ctx, slug, ms, "", gbps=1000 / ms),
                     _row(ctx, f"d2d_copy_for_{slug}", 0.018, "", gbps=3000.0)]
    records.append_rows(path, rows)
    side = results.same_run_components(P12, ["epilogue_vec4", "epilogue_scalar"], path=path)
    assert list(side["variant"]) == ["epilogue_vec4", "epilogue_scalar"]       # in the order asked
    assert set(side["run_id"]) == {both.run_id}                # not the newer run that timed one
    assert list(side["median_ms"]) == [0.02, 0.03] and list(side["copy_gbps"]) == [3000.0, 3000.0]
    alone = results.same_run_components(P12, ["epilogue_vec4"], path=path)
    assert set(alone["run_id"]) == {newer_one.run_id}
    assert results.same_run_components(P12, ["epilogue_vec4", "nothing"], path=path).empty
    with pytest.raises(TypeError, match="a list of names"):
        results.same_run_components(P12, "epilogue_vec4", path=path)


def test_of_steps_keeps_the_steps_a_notebook_teaches(full_then_partial):
    path, *_ = full_then_partial
    rec = results.recorded(P12, path=path)
    steps = {v.slug: v.number for v in P12.variants.values()}
    kept = results.of_steps(rec, range(0, 8), leave_out=["naive"])
    assert "naive" in set(rec["variant"]) and "naive" not in set(kept["variant"])
    assert all(steps[v] < 8 for v in kept["variant"]) and "eager" in set(kept["variant"])
    assert {v for v in rec["variant"] if steps[v] >= 8} and \
        not {v for v in kept["variant"] if steps[v] >= 8}          # later steps are left out
    assert list(kept["variant"]) == [v for v in rec["variant"] if steps[v] < 8 and v != "naive"]
    with pytest.raises(TypeError, match="a list of names"):
        results.of_steps(rec, [0], leave_out="naive")


def test_per_run_is_one_row_per_run_that_timed_them(full_then_partial):
    path, full, partial, t_full, t_part = full_then_partial
    both = results.per_run(P12, ["eager", "triton_fp16x3"], path=path)
    assert list(both["run_id"]) == [full.run_id, partial.run_id]
    assert list(both["triton_fp16x3"]) == [t_full["triton_fp16x3"], t_part["triton_fp16x3"]]
    assert list(results.per_run(P12, ["eager", "tiled"], path=path)["run_id"]) == [full.run_id]
    # any of them: the full run, the partial one and the eager-less one (times need no eager)
    assert len(results.per_run(P12, ["tiled", "wgmma_fp16x3"], path=path, every=False)) == 3
    with pytest.raises(ValueError, match="value='ms'"):
        results.per_run(P12, ["eager"], path=path, value="ms")


def test_run_ceilings_of_a_frame_of_several_runs_are_the_newest(full_then_partial):
    path, full, partial, _, _ = full_then_partial
    rec = results.recorded(P12, path=path)
    assert results.run_ceilings(rec, path=path) == {"copy_gbps": 4100.0}
    assert results.run_ceilings(rec[rec["run_id"] == full.run_id], path=path) == {"copy_gbps": 4000.0}
    assert results.run_ceilings(rec.iloc[0:0], path=path) == {}


def test_step_sweep_reads_the_newest_sweep_or_the_one_point(tmp_path):
    path = tmp_path / "r.csv"
    fix = {"in_features": 8192, "out_features": 8192}
    old, new = _ctx(day=1), _ctx(day=2)
    rows = []
    for ctx, k in ((old, 1.0), (new, 2.0)):
        for b in (1, 64, 1024):
            at = fmt_sizes(P12.sizes({"batch_size": b, **fix}))
            rows += [_row(ctx, "eager", 1.0 + b / 100, "reference", sizes=at),
                     _row(ctx, "faithful_by_batch", (1.0 + b / 100) / (k * (1 + b / 1024)), sizes=at)]
    rows += [_row(old, "tiled", 2.0, sizes=fmt_sizes(P12.sizes({"batch_size": 64, **fix})))]
    records.append_rows(path, rows)
    s = results.step_sweep(P12, "faithful_by_batch", path=path)
    assert set(s["run_id"]) == {new.run_id} and list(s["batch_size"]) == [1, 64, 1024]
    assert s["sweep"].all() and s["speedup"].tolist() == pytest.approx([2 * (1 + b / 1024) for b in (1, 64, 1024)])
    one = results.step_sweep(P12, "triton_fp16x3", path=path)
    assert one.empty and "sweep" in one.columns                  # never recorded at all
    alone = _ctx(day=3)                                           # one point, at the defaults
    records.append_rows(path, [_row(alone, "eager", 3.0, "reference"), _row(alone, "triton_fp16x3", 1.0)])
    one = results.step_sweep(P12, "triton_fp16x3", path=path)
    assert len(one) == 1 and not one["sweep"].iloc[0] and one["batch_size"].iloc[0] == 1024
    assert one["speedup"].iloc[0] == pytest.approx(3.0) and one["run_id"].iloc[0] == alone.run_id


def test_latest_run_is_the_fullest_clean_run(tmp_path):
    path = tmp_path / "r.csv"
    full = _ctx(day=1)
    _write_run(path, full, 3.0, 1.0)
    records.append_rows(path, [_row(full, "tiled", 2.5)])
    _write_run(path, _ctx(day=2), 2.0, 1.0)                       # newer, but fewer variants
    run = results.latest_run(P12, path=path)
    assert set(run["run_id"]) == {full.run_id}
    assert run.loc[run["variant"] == "triton_fp16x3", "speedup"].item() == pytest.approx(3.0)
    assert results.run_ceilings(run, path=path) == {"copy_gbps": 4000.0}
    assert "commit abc1234" in results.run_label(run)


def test_latest_run_empty_when_nothing_matches(tmp_path):
    run = results.latest_run(P12, P12.sizes(batch_size=3), path=tmp_path / "none.csv")
    assert run.empty and results.run_label(run) == "no recorded run"
    assert results.recorded(P12, path=tmp_path / "none.csv").empty
    assert {"speedup", "step", "title", "eager_ms"} <= set(results.recorded(P12, path=tmp_path / "n.csv").columns)


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
    _write_run(path, _ctx(day=3), 2.724032, 0.871936)
    rec = results.recorded(P12, path=path)
    out = lesson.run_step(P12, "eager", P12.defaults, detect_mode(), rec)
    label = [i for i in out.index if i.startswith("recorded")][0]
    row = out.loc[label]
    assert row["ms"] == "2.724" and row["speedup"] == "1.00x" and row["TFLOP/s"] == "50.0"
    assert row["sizes"] == "1024 × 8192 × 8192"
    assert label == "recorded: H200, 2026-01-03"          # the commit stays in the records


def test_each_recorded_row_of_a_step_names_its_own_run(full_then_partial):
    path, full, partial, _, _ = full_then_partial
    rec = results.recorded(P12, path=path)
    for slug, run in (("naive", full), ("wgmma_fp16x3", partial)):
        (row,) = [r for r in lesson.step_rows(P12, slug, P12.defaults, detect_mode(), rec)
                  if r["source"].startswith("recorded")]
        assert row["source"] == f"recorded: H200, {run.timestamp[:10]}"


def test_every_ladder_step_with_a_clean_record_shows_its_recorded_ms(monkeypatch):
    """The notebooks' steps (lesson.step -> step_rows) on the committed records: every ladder
    variant that has a clean record shows it, its newest, with its same-run speed-up; one
    without shows none."""
    from types import SimpleNamespace

    from fusedkit import problems

    # What runs here is not under test (and the interpreter is slow): every live check fails fast.
    monkeypatch.setattr(lesson, "measure", lambda *a, **k: SimpleNamespace(
        ok=False, skipped=False, failure="not run in this test", tier="",
        check=SimpleNamespace(rel_error=math.nan)))
    every = records.read_records(records.default_path())
    for key in problems.names():
        p = problems.get(key)
        rec = results.recorded(p)
        newest = results.newest_clean(every, p)
        newest = newest[(newest["sizes"] == fmt_sizes(p.defaults)) & newest["device"].str.contains("H200")]
        for v in p.ladder():
            rows = lesson.step_rows(p, v.slug, p.defaults, detect_mode(), rec)
            shown = [r for r in rows if r["source"].startswith("recorded")]
            mine = newest[newest["variant"] == v.slug]
            if mine.empty:
                assert not shown, (key, v.slug)
                continue
            assert len(shown) == 1, (key, v.slug, rows)
            assert shown[0]["ms"] == mine["median_ms"].iloc[0], (key, v.slug)
            assert shown[0]["speedup"] == pytest.approx(mine["speedup"].iloc[0])
            assert shown[0]["source"] == "recorded: " + results.run_short_label(mine.iloc[0])


def test_say_prints_numbers_from_the_records(tmp_path):
    path = tmp_path / "r.csv"
    _write_run(path, _ctx(day=7), 2.724032, 0.871936)
    run = results.recorded(P12, path=path)
    text = str(lesson.say("fp16x3 takes {triton_fp16x3.ms}, {triton_fp16x3.speedup} eager's "
                          "{eager.ms}, on {eager.date} ({eager.commit}); {note}", run, note="done"))
    assert text == "fp16x3 takes 0.872 ms, 3.12x eager's 2.724 ms, on 2026-01-07 (abc1234); done"
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
    html = shown._repr_html_().replace("<wbr>", "")      # a name may break after its underscores
    assert "p12_tiled_kernel" in html and "61%" in html and "3500.5" in html and "Nsight" in html
    assert "float const" not in html


def test_counters_pair_with_the_time_of_the_code_that_was_profiled(tmp_path, monkeypatch):
    """The idle time is the time measured with the profiled code minus its kernels' time; a
    step re-timed after a change keeps its newest time in the table, beside the paired one."""
    from fusedkit import counters

    path = tmp_path / "r.csv"
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(path))
    monkeypatch.setattr(counters, "default_path", lambda: tmp_path / "counters.csv")
    before, after = _ctx(day=1), _ctx(day=3)
    records.append_rows(path, [_row(before, "eager", 3.0, "reference"), _row(before, "triton_fp16x3", 0.9),
                               _row(after, "eager", 3.0, "reference"), _row(after, "triton_fp16x3", 0.75)])
    profile = _ctx(day=2)
    rows = [dict(vars(profile), problem="p12", sizes=SIZES, variant="triton_fp16x3", launch=i,
                 kernel=k, duration_us=us, sm_pct=60.0, tensor_pct=60.0, fma_pct=10.0, dram_pct=10.0,
                 dram_gb=0.1, occupancy_pct=12.0, registers=243, local_bytes=0, l2_hit_pct=70.0,
                 grid=132, block=256, smem_kb=200.0)
            for i, (k, us) in enumerate((("split_kernel", 50.0), ("fp16x3_gemm_kernel", 650.0)))]
    pd.DataFrame(rows, columns=list(counters.COLUMNS)).to_csv(tmp_path / "counters.csv", index=False)
    then = lesson.timed_with_counters(P12, "triton_fp16x3")
    assert then["run_id"] == before.run_id and then["median_ms"] == 0.9
    assert lesson.idle_ms(P12, "triton_fp16x3") == pytest.approx(0.9 - 0.7)
    assert lesson.idle_ms(P12, "tiled") != lesson.idle_ms(P12, "tiled")          # no counters: NaN
    shown = lesson.counter_overview(P12, results.recorded(P12)).body.data.set_index("variant")
    assert shown.loc["triton_fp16x3", "ms"] == "0.750"                           # the newest
    assert shown.loc["triton_fp16x3", "ms when profiled"] == "0.900"
    assert shown.loc["triton_fp16x3", "recorded − profiled ms"] == "+0.200"
    step = P12.variant("triton_fp16x3").number
    only = lesson.counter_overview(P12, results.recorded(P12), steps=[step]).body.data
    assert list(only["variant"]) == ["triton_fp16x3"]
    none = lesson.counter_overview(P12, results.recorded(P12), steps=[step + 1])
    assert "none recorded" in none._repr_markdown_()


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
    _write_run(path, _ctx(), 2.724032, 0.871936)
    lesson.step(P12, "tiled", P12.defaults, detect_mode(), results.recorded(P12, path=path),
                previous="naive")
    out = capsys.readouterr().out
    order = [out.index(s) for s in ("The code", "p12/07_tiled.cu", "What the hardware did",
                                    "none recorded", "Check and time", "no GPU here")]
    assert order == sorted(order)
    assert "+ " in out                        # lines changed against step 1 are marked


def test_short_kernel_names_keep_the_operation():
    assert lesson.short_kernel("void at::vectorized_elementwise_kernel<4, at::AbsFunctor<float>, "
                               "std::array<char *, 2>>(int, T2, T3)") == "vectorized_elementwise_kernel: Abs"
    assert lesson.short_kernel("p12_tiled_kernel") == "p12_tiled_kernel"
    assert lesson.short_kernel("x" * 200) == "x" * 200          # whole: a table wraps it, never cuts it


def test_step_holds_its_prediction_against_the_measurement(capsys, tmp_path, monkeypatch):
    from fusedkit import counters

    monkeypatch.setattr(counters, "default_path", lambda: tmp_path / "counters.csv")
    path = tmp_path / "r.csv"
    _write_run(path, _ctx(), 2.724032, 0.871936)
    rec = results.recorded(P12, path=path)
    lesson.step(P12, "triton_fp16x3", P12.defaults, detect_mode(), rec, predict=0.5,
                basis="three products at the fp16 rate")
    out = capsys.readouterr().out
    order = [out.index(s) for s in ("The code", "Prediction:", "What the hardware did",
                                    "Check and time", "Predicted 0.500 ms, measured 0.872 ms")]
    assert order == sorted(order)
    assert "1.74x slower than predicted" in out and "three products at the fp16 rate" in out
    lesson.step(P12, "triton_fp16x3", P12.defaults, detect_mode(), rec, predict=0.8, code=False)
    assert "right to within 10% (109% of it)" in capsys.readouterr().out
    for bad in (0.0, -1.0, float("nan"), {"eager": 1.0}):
        with pytest.raises(ValueError, match="predict"):
            lesson.step(P12, "triton_fp16x3", P12.defaults, detect_mode(), rec, predict=bad)


def test_prediction_verdict_names_the_direction_of_a_miss():
    assert "right to within 10%" in lesson.prediction_verdict(1.0, 1.05)
    # A time 19% off its prediction is a miss, not "held" (the old 1.25x band passed it).
    assert "1.19x slower than predicted" in lesson.prediction_verdict(1.0, 1.19)
    assert "held" not in lesson.prediction_verdict(1.0, 1.2)
    assert "2.00x faster than predicted" in lesson.prediction_verdict(1.0, 0.5)
    assert "nothing measured" in lesson.prediction_verdict(1.0, float("nan"))
    with pytest.raises(ValueError, match="predicted_ms"):
        lesson.prediction_verdict(0.0, 1.0)


def test_a_predicted_effect_is_judged_by_its_sign_and_its_size():
    # The audit's two cases: a predicted -4.0 us that measured -0.4 us, and a step predicted
    # faster than its baseline that came out slower. The 1.25x band called both "held".
    small = lesson.prediction_verdict(0.2465, 0.2501, baseline_ms=0.2505, baseline="step 12")
    assert "the sign was right, **the size was not**: 10% of the predicted change" in small
    assert "4.0 µs faster" in small and "0.4 µs faster" in small
    wrong = lesson.prediction_verdict(0.617, 0.663, baseline_ms=0.640, baseline="step 14")
    assert "**the sign was wrong**" in wrong and "held" not in wrong
    right = lesson.prediction_verdict(0.600, 0.610, baseline_ms=0.640, baseline="step 14")
    assert "the sign and the size were right (75% of the predicted change)" in right
    # A change inside the timings' spread shows no sign at all.
    noisy = lesson.prediction_verdict(0.2465, 0.2501, baseline_ms=0.2505, baseline="step 12",
                                      noise_ms=0.002)
    assert "**no measurable effect**" in noisy


def test_step_judges_an_effect_against_the_step_it_changes(capsys, tmp_path, monkeypatch):
    from fusedkit import counters

    monkeypatch.setattr(counters, "default_path", lambda: tmp_path / "counters.csv")
    path = tmp_path / "r.csv"
    _write_run(path, _ctx(), 2.724032, 0.871936)
    rec = results.recorded(P12, path=path)
    # Predicted 0.1 ms faster than eager, measured 1.85 ms faster: the sign right, the size not.
    lesson.step(P12, "triton_fp16x3", P12.defaults, detect_mode(), rec, predict=2.624, code=False,
                against="eager")
    out = capsys.readouterr().out
    assert "against `eager`'s 2.724 ms it predicted 0.100 ms faster" in out
    assert "the sign was right, **the size was not**" in out


def test_recorded_rows_carry_the_share_of_the_measured_ceiling(tmp_path):
    from fusedkit import ceilings

    path = tmp_path / "r.csv"
    ctx = _ctx()
    _write_run(path, ctx, 2.724032, 0.871936, device_rows=False)
    rec = results.recorded(P12, path=path)
    assert rec["pct_of_measured"].isna().all()        # no ceilings recorded on this device
    gemm = ceilings.gemm_shapes(P12)[0]
    rows = [_row(ctx, ceilings.COPY, 1.0, "", sizes=f"bytes={2**30}", problem="device", gbps=4000.0),
            _row(ctx, ceilings.GEMM_PREFIX + "fp16", 1.0, "", problem="device",
                 sizes=f"m={gemm[0]},n={gemm[1]},k={gemm[2]}", tflops=700.0)]
    records.append_rows(path, rows)
    rec = results.recorded(P12, path=path).set_index("variant")
    floor = ceilings.measured_floor(P12, P12.defaults, "fp16x3", ceilings.of_run(ctx.run_id, path))
    assert rec.loc["triton_fp16x3", "pct_of_measured"] == pytest.approx(100 * floor.floor_ms / 0.871936)
    assert math.isnan(rec.loc["eager", "pct_of_measured"])   # fp32: no cuBLAS fp32 rate recorded
    assert "% of measured" in results.ladder_table(rec.reset_index()).columns


def test_of_steps_keeps_named_rows_alone_in_order(full_then_partial):
    path = full_then_partial[0]
    rec = results.recorded(P12, path=path)
    part = results.of_steps(rec, also=["tiled", "eager", "not_a_step"])
    assert list(part["variant"]) == [v for v in rec["variant"] if v in ("tiled", "eager")]
    assert list(part.columns) == list(rec.columns)
    with pytest.raises(TypeError, match="pass a list"):
        results.of_steps(rec, also="tiled")


def test_counter_overview_shows_the_steps_of_the_frame_it_is_given(tmp_path, monkeypatch):
    """A part of the ladder (results.of_steps) gets the rows of its own steps only; the
    difference column says what it is: recorded minus profiled, signed."""
    from fusedkit import counters

    path = tmp_path / "r.csv"
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(path))
    monkeypatch.setattr(counters, "default_path", lambda: tmp_path / "counters.csv")
    run, profile = _ctx(day=1), _ctx(day=2)
    records.append_rows(path, [_row(run, "eager", 3.0, "reference"), _row(run, "tiled", 3.4),
                               _row(run, "naive", 270.0)])
    rows = [dict(vars(profile), problem="p12", sizes=SIZES, variant=v, launch=0, kernel=f"{v}_kernel",
                 duration_us=us, sm_pct=60.0, tensor_pct=0.0, fma_pct=60.0, dram_pct=3.0,
                 dram_gb=0.6, occupancy_pct=25.0, registers=127, local_bytes=0, l2_hit_pct=83.0,
                 grid=512, block=256, smem_kb=8.0)
            for v, us in (("tiled", 3500.0), ("naive", 270100.0))]
    pd.DataFrame(rows, columns=list(counters.COLUMNS)).to_csv(tmp_path / "counters.csv", index=False)
    rec = results.recorded(P12)
    shown = lesson.counter_overview(P12, results.of_steps(rec, also=["eager", "tiled"]))
    table = shown.body.data.set_index("variant")
    assert list(table.index) == ["tiled"]                        # naive is not in this part
    assert table.loc["tiled", "recorded − profiled ms"] == "-0.100"   # 3.4 ms timed, 3.5 profiled
    assert "clock difference" in shown.caption
    everything = lesson.counter_overview(P12, rec).body.data
    assert set(everything["variant"]) == {"tiled", "naive"}


def test_a_step_at_its_own_sizes_shows_their_counters_and_holds_their_record(capsys, tmp_path, monkeypatch):
    """A step predicted at 1 row (not KernelBench's 1024) is held against its record at 1 row,
    beside the counters collected at 1 row; a record at other sizes holds no prediction."""
    from fusedkit import counters

    monkeypatch.setattr(counters, "default_path", lambda: tmp_path / "counters.csv")
    one = P12.sizes(batch_size=1)
    path = tmp_path / "r.csv"
    ctx = _ctx()
    records.append_rows(path, [_row(ctx, "eager", 0.106, "reference", sizes=fmt_sizes(one)),
                               _row(ctx, "small_batch_stream", 0.0774, sizes=fmt_sizes(one))])
    profile = records.RunContext.collect()
    rows = [dict(vars(profile), problem="p12", sizes=fmt_sizes(s), variant="small_batch_stream",
                 launch=0, kernel=k, duration_us=us, sm_pct=12.0, tensor_pct=0.0, fma_pct=7.0,
                 dram_pct=81.0, dram_gb=0.27, occupancy_pct=23.0, registers=80, local_bytes=0,
                 l2_hit_pct=1.0, grid=256, block=256, smem_kb=0.0)
            for s, k, us in ((one, "rows4_kernel_at_one_row", 69.3), (P12.defaults, "at_1024_rows", 17683.9))]
    pd.DataFrame(rows, columns=list(counters.COLUMNS)).to_csv(tmp_path / "counters.csv", index=False)
    mode = detect_mode()
    if mode.gpu:
        pytest.skip("on a GPU the step runs live")
    lesson.step(P12, "small_batch_stream", one, mode, results.recorded(P12, one, path=path),
                predict=0.0628, code=False)
    out = capsys.readouterr().out
    assert "Nsight Compute, at 1 × 8192 × 8192" in out and "rows4_kernel_at_one_row" in out
    assert "at_1024_rows" not in out
    assert "Predicted 0.063 ms, measured 0.077 ms" in out and "held" in out
    # the frame holds the step at 1024 rows only: nothing at 1 row to hold the prediction against
    records.append_rows(path, [_row(ctx, "eager", 2.72, "reference"), _row(ctx, "small_batch_stream", 17.7)])
    lesson.step(P12, "small_batch_stream", one, mode, results.recorded(P12, path=path), predict=0.0628,
                code=False)
    assert "nothing measured yet" in capsys.readouterr().out


def test_of_steps_keeps_one_part_of_the_ladder_and_the_baselines_named(full_then_partial):
    path, *_ = full_then_partial
    rec = results.recorded(P12, path=path)
    part = results.of_steps(rec, range(2, 10), also=["eager"])
    steps = {v: P12.variant(v).number for v in part["variant"]}
    assert set(part["variant"]) == {"eager", "tiled", "triton_tf32", "triton_fp16x3"}  # 1, 14 out
    assert all(2 <= n <= 9 for v, n in steps.items() if v != "eager")
    assert list(part["variant"]) == [v for v in rec["variant"] if v in set(part["variant"])]  # order kept
    assert results.of_steps(rec, [14])["variant"].tolist() == ["wgmma_fp16x3"]
    assert results.of_steps(rec, range(30, 41), also=["nothing recorded"]).empty
    with pytest.raises(TypeError, match="pass a list"):
        results.of_steps(rec, range(2, 10), also="eager")


def test_recorded_by_precision_names_each_variants_arithmetic(full_then_partial):
    path = full_then_partial[0]
    rows = results.recorded_by_precision(P12, path=path)
    assert list(rows["variant"]) == list(results.recorded(P12, path=path)["variant"])
    assert dict(zip(rows["variant"], rows["precision"]))["triton_tf32"] == "tf32"
    assert (rows["problem"] == "p12").all()
    fp16x3 = results.recorded_by_precision(P12, ["fp16x3"], path=path)
    assert set(fp16x3["variant"]) == {"triton_fp16x3", "wgmma_fp16x3"}
    assert results.recorded_by_precision(P12, ["bf16"], path=path).empty     # none of p12's is bf16
    with pytest.raises(ValueError, match="valid: .*fp16x3"):
        results.recorded_by_precision(P12, ["fp8"], path=path)
    with pytest.raises(ValueError, match="pass a list"):
        results.recorded_by_precision(P12, "fp16", path=path)


def test_run_spread_is_each_run_against_the_variants_median(tmp_path):
    path = tmp_path / "r.csv"
    times = [(2.0, 1.0), (2.02, 1.2), (1.98, 1.1), (2.0, 0.9)]     # (eager, triton_fp16x3) per run
    runs = []
    for day, (e, f) in enumerate(times, start=1):
        ctx = _ctx(day=day)
        runs.append(ctx)
        records.append_rows(path, [_row(ctx, "eager", e, "reference"), _row(ctx, "triton_fp16x3", f),
                                   _row(ctx, "tiled", 3.0)] if day <= 2 else
                            [_row(ctx, "eager", e, "reference"), _row(ctx, "triton_fp16x3", f)])
    late = _ctx(day=6, commit="abc1234+dirty")                      # never counted
    records.append_rows(path, [_row(late, "eager", 9.0, "reference"), _row(late, "triton_fp16x3", 9.0)])
    spread = results.run_spread(P12, path=path)
    assert set(spread["variant"]) == {"eager", "triton_fp16x3"}     # tiled: 2 runs < min_runs
    f = spread[spread["variant"] == "triton_fp16x3"].reset_index(drop=True)
    assert list(f["run_id"]) == [r.run_id for r in runs] and (f["runs"] == 4).all()
    assert f["median_of_runs"].iloc[0] == pytest.approx(1.05)
    assert f["vs_median_pct"].tolist() == pytest.approx([100 * (t / 1.05 - 1) for _, t in times])
    assert f["recorded"].tolist() == [False, False, False, True]     # the newest clean one
    assert list(spread["variant"].drop_duplicates()) == ["eager", "triton_fp16x3"]   # ladder order
    assert set(results.run_spread(P12, path=path, min_runs=2)["variant"]) == {"eager", "triton_fp16x3", "tiled"}
    assert results.run_spread(P12, path=path, min_runs=5).empty
    with pytest.raises(ValueError, match="min_runs=1"):
        results.run_spread(P12, path=path, min_runs=1)


@pytest.mark.parametrize("sizes,side,bound", [
    ({}, "right of every ridge point (bf16's, the highest", "the arithmetic, not the bytes, sets the floor in every"),
    ({"batch_size": 17, "in_features": 33, "out_features": 65}, "left of every ridge point (fp32's, the lowest",
     "the bytes, not the arithmetic, set the floor in every"),
    ({"batch_size": 64, "in_features": 128, "out_features": 256}, "right of fp32's ridge point (14 FLOP/B) and left "
     "of tf32's and bf16's", "the arithmetic sets the floor in fp32, the bytes in tf32 and bf16"),
])
def test_ridge_side_is_computed_from_the_sizes(sizes, side, bound):
    """Notebook 01 once said "right of every ridge point" at 64 x 128 x 256 under tables saying memory."""
    from fusedkit import hardware, roofline

    p12, h200 = get("p12"), hardware.spec("H200 SXM")
    s = p12.sizes(sizes)
    intensity = p12.flops(s) / p12.min_bytes(s)
    got_side, got_bound = lesson.ridge_side(intensity, h200)
    assert got_side.startswith(side) and got_bound.startswith(bound), (got_side, got_bound)
    # The same verdict as the roofline table's fused row (its last), precision by precision.
    every = {"fp32", "tf32", "bf16"}
    compute = {prec for prec in every if roofline.table(p12, s, h200, prec).iloc[-1]["bound"] == "compute"}
    if "every" in got_bound:
        assert compute == (every if "arithmetic, not" in got_bound else set())
    else:
        arith, data = got_bound.removeprefix("the arithmetic sets the floor in ").split(", the bytes in ")
        assert set(arith.split(" and ")) == compute and set(data.split(" and ")) == every - compute


def test_lab_sizes_cut_the_batch_and_fall_back_to_kernelbench_where_nothing_fits():
    p45 = get("p45")
    assert lesson.lab_sizes(p45, p45.sizes(batch_size=17), 128) == (p45.sizes(batch_size=17), "")
    cut, why = lesson.lab_sizes(p45, p45.defaults, 128)
    assert cut == p45.sizes(batch_size=128) and "at most 128 rows" in why
    huge = p45.sizes(input_size=65536, hidden_size=65536)            # a size the picker accepts
    got, why = lesson.lab_sizes(p45, huge, 128)
    assert got == p45.sizes(batch_size=128) and "KernelBench's other sizes" in why and "allowed" in why
    p45.check_runnable(got, "cpu")                                    # what it gives does run


def test_every_kernel_and_step_name_is_shown_whole():
    # The recorded counters of p45's Triton steps and of cuBLAS's long-named kernels: each name
    # appears whole in the step's tables and in the overview, none cut to a fixed width.
    from fusedkit.counters import step_counters

    p45 = get("p45")
    slugs = [v.slug for v in p45.ladder() if v.triton] + ["eager", "cublas_tf32_epilogues_vec4"]
    html = lesson.show_counters(p45, slugs)._repr_html_().replace("<wbr>", "")   # break points, not text
    names = {lesson.short_kernel(str(k)) for s in slugs for k in step_counters(p45, s)["kernel"]}
    assert names and max(map(len, names)) > 60            # long names are there to be cut
    overview = lesson.counter_overview(p45, results.recorded(p45))._repr_html_().replace("<wbr>", "")
    for shown in (html, overview):
        assert "…" not in shown
    for name in names:
        assert f">{name}<" in html
    for slug in slugs:
        assert f">{slug}<" in html and f">{slug}<" in overview
