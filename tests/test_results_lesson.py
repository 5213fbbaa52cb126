"""Reading runs back from records (one definition of a result, of the best, of the noise, of a
route and of the by-batch range), and a notebook step as a reader sees it (fusedkit.lesson and
fusedkit.source_view)."""

import math
import re

import pandas as pd
import pytest

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
    assert set(results.same_run(P12, ["eager", "triton_fp16x3"], path=path)["run_id"]) == {partial.run_id}
    with pytest.raises(TypeError, match="a list of names"):
        results.same_run(P12, "tiled", path=path)


def test_components_carry_their_same_run_copy(full_then_partial):
    path, full, partial, _, _ = full_then_partial
    parts = results.components(P12, path=path).set_index("variant")
    assert list(parts.index) == ["epilogue_vec4"]                # the copies are not components
    r = parts.loc["epilogue_vec4"]
    assert r["run_id"] == partial.run_id and r["copy_gbps"] == 3150.0
    assert r["pct_of_copy"] == pytest.approx(100 * 3300 / 3150)
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
            rows += [_row(ctx, s, 9.0, sizes=at) for s in ("small_batch_stream", "wgmma_fp16x3", "triton_fp16x3")]
    rows += [_row(old, "tiled", 2.0, sizes=fmt_sizes(P12.sizes({"batch_size": 64, **fix})))]
    records.append_rows(path, rows)
    s = results.step_sweep(P12, "faithful_by_batch", path=path)
    assert set(s["run_id"]) == {new.run_id} and list(s["batch_size"]) == [1, 64, 1024]
    assert s["sweep"].all() and s["speedup"].tolist() == pytest.approx([2 * (1 + b / 1024) for b in (1, 64, 1024)])
    one = results.step_sweep(P12, "triton_tf32", path=path)
    assert one.empty and "sweep" in one.columns                  # never recorded at all
    alone = _ctx(day=3)                                           # one point, at the defaults
    records.append_rows(path, [_row(alone, "eager", 3.0, "reference"), _row(alone, "triton_tf32", 1.0)])
    one = results.step_sweep(P12, "triton_tf32", path=path)
    assert len(one) == 1 and not one["sweep"].iloc[0] and one["batch_size"].iloc[0] == 1024
    assert one["speedup"].iloc[0] == pytest.approx(3.0) and one["run_id"].iloc[0] == alone.run_id


def test_one_runs_ceilings_and_label(tmp_path):
    path = tmp_path / "r.csv"
    full = _ctx(day=1)
    _write_run(path, full, 3.0, 1.0)
    records.append_rows(path, [_row(full, "tiled", 2.5)])
    _write_run(path, _ctx(day=2), 2.0, 1.0)                       # newer, without tiled
    run = results.same_run(P12, ["tiled"], path=path)
    assert set(run["run_id"]) == {full.run_id}
    assert run.loc[run["variant"] == "triton_fp16x3", "speedup"].item() == pytest.approx(3.0)
    assert results.run_ceilings(run, path=path) == {"copy_gbps": 4000.0}
    assert "commit abc1234" in results.run_label(run)


def test_same_run_empty_when_nothing_matches(tmp_path):
    run = results.same_run(P12, ["eager"], P12.sizes(batch_size=3), path=tmp_path / "none.csv")
    assert run.empty and results.run_label(run) == "no recorded run"
    assert results.recorded(P12, path=tmp_path / "none.csv").empty
    assert {"speedup", "step", "title", "eager_ms"} <= set(results.recorded(P12, path=tmp_path / "n.csv").columns)


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
    assert results.run_spread(P12, path=tmp_path / "none.csv").empty


def test_lab_sizes_cut_the_batch_and_fall_back_to_kernelbench_where_nothing_fits():
    p45 = get("p45")
    assert lesson.lab_sizes(p45, p45.sizes(batch_size=17), 128) == (p45.sizes(batch_size=17), "")
    cut, why = lesson.lab_sizes(p45, p45.defaults, 128)
    assert cut == p45.sizes(batch_size=128) and "at most 128 rows" in why
    huge = p45.sizes(input_size=65536, hidden_size=65536)            # a size the picker accepts
    got, why = lesson.lab_sizes(p45, huge, 128)
    assert got == p45.sizes(batch_size=128) and "KernelBench's other sizes" in why and "allowed" in why
    p45.check_runnable(got, "cpu")                                    # what it gives does run



# -- one noise rule, the steps that count, one routing rule, one by-batch range -------------------

def test_two_times_differ_only_beyond_their_spread():
    a = {"median_ms": 1.00, "p10_ms": 0.98, "p90_ms": 1.05}
    assert results.level(a, {"median_ms": 1.04, "p10_ms": 1.03, "p90_ms": 1.06})       # ranges overlap
    assert not results.level(a, {"median_ms": 1.10, "p10_ms": 1.07, "p90_ms": 1.12})   # they do not
    assert not results.level({"median_ms": 1.0, "p10_ms": None, "p90_ms": None}, {"median_ms": 1.01})


def test_only_steps_whose_gemm_we_wrote_count_as_the_best(tmp_path):
    """Audit L9: the cuBLAS steps (3, 4, the fp16 bar) are references, like PyTorch's."""
    path = tmp_path / "r.csv"
    ctx = _ctx(day=1)
    records.append_rows(path, [_row(ctx, "eager", 4.0, "reference"), _row(ctx, "triton_fp16x3", 1.0),
                               _row(ctx, "cublas_tf32_epilogue_vec4", 0.5, "fast"), _row(ctx, "triton_tf32", 0.8, "fast")])
    best = results.best_by_tier(results.recorded(P12, path=path), P12)
    assert best["fast"]["variant"] == "triton_tf32" and not results.ours(P12, "cublas_fp16_epilogue")


def test_the_registered_routes_are_what_the_one_rule_reads_from_the_records():
    """Audit M5: both problems' bands are the lowest p90, or level with it, at each point of the newest sweep."""
    for key in ("p12", "p45"):
        rule = results.route_rule(get(key), "faithful_by_batch")
        assert len(rule) >= 6 and rule["agrees"].all(), rule


def test_the_by_batch_range_is_one_statement_for_every_page():
    """Audit M6: the README's line and the notebooks' are results.by_batch_range's numbers."""
    from fusedkit import present, readme

    block = readme.measured_state()
    for key in ("p12", "p45"):
        r = results.by_batch_range(get(key))
        assert f"at least {present.speedup(r['lo'])} eager fp32 (at {r['at_lo']} rows)" in block
        assert f"at most {present.speedup(r['hi'])}" in block and f"({r['points']} points" in block


def test_the_index_rounds_a_speedup_once():
    """Audit L10: index.json keeps the speed-up whole; the page rounds it when it shows it."""
    from fusedkit import report

    row = results.recorded(P12).set_index("variant", drop=False).loc["wgmma_persistent"]
    assert report._pick(row)["speedup"] == row["speedup"]


def test_a_page_takes_one_device_the_one_with_counters():
    assert results.page_device(P12) == "NVIDIA H200"            # the H100 ladder has no counters


# -- one step on the page ----------------------------------------------------------------------------

@pytest.fixture
def page(tmp_path, monkeypatch):
    """A page of p12 over two runs of records (a CPU here), the second with its ceilings."""
    path = tmp_path / "r.csv"
    first, second = _ctx(day=1), _ctx(day=2)
    rows = [_row(first, "eager", 3.0, "reference", p10_ms=2.9, p90_ms=3.1),
            _row(first, "tiled", 3.5, p10_ms=3.4, p90_ms=3.6),
            _row(second, "eager", 2.8, "reference", p10_ms=2.75, p90_ms=2.85),
            _row(second, "naive", 280.0, p10_ms=279.0, p90_ms=281.0),
            _row(second, "coalesced", 279.5, p10_ms=278.0, p90_ms=282.0),
            _row(second, "ceiling_copy", 1.0, "", problem="device", sizes="bytes=2147483648", gbps=4000.0),
            _row(second, "ceiling_gemm_fp32", 2.6, "", problem="device", sizes="m=1024,n=8192,k=8192", tflops=52.9)]
    records.append_rows(path, rows)
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(path))
    mode = detect_mode()
    return lesson.Page(P12, P12.defaults, mode)


def _shown(capsys) -> str:
    return capsys.readouterr().out


def test_a_page_labels_its_device_and_reads_the_ceilings_of_a_steps_own_run(page):
    assert page.device == "NVIDIA H200" and "the records of H200, 2026-01-01 to 2026-01-02" in page.label
    r = page.rates("naive")
    assert r.rate("copy") == 4000.0 and r.gemm_ms("fp32") == pytest.approx(2 * 1024 * 8192 * 8192 / 52.9e9)
    assert r.copy_ms(8e9) == pytest.approx(2.0)
    assert math.isnan(page.rates("tiled").gemm_ms("fp32"))     # its run measured none: none borrowed


def test_a_step_shows_the_prediction_the_measurement_and_a_verdict(page, capsys):
    page.step("naive", code=False, predict=lambda r: 1.05 * 280.0, basis="a test")
    out = _shown(capsys)
    assert out.index("**Prediction:** 294.000 ms (a test)") < out.index("**Measured:** 280.000 ms (p10 279.000, p90 281.000)")
    assert "measured 0.95x the prediction: **held** (within ±10%)." in out
    page.step("naive", code=False, predict=100.0)
    assert "**missed**." in _shown(capsys)          # never "a miss the next cell explains" (audit L5)
    page.step("tiled", code=False, predict=lambda r: r.gemm_ms("fp32"))
    out = _shown(capsys)
    assert "Prediction" not in out and "**Measured:** 3.500 ms" in out   # no ceilings in its run


def test_a_predicted_change_inside_the_spread_is_no_change(page, capsys):
    """Audit L14: the change counts only where the two p10-p90 ranges do not overlap."""
    page.step("coalesced", code=False, predict=200.0, against="naive")
    assert "**no measurable change**, the two p10–p90 ranges overlap." in _shown(capsys)
    page.step("naive", code=False, predict=400.0, against="coalesced")
    assert "no measurable change" in _shown(capsys)
    with pytest.raises(ValueError, match="not variants of p12"):
        page.step("nothing", predict=1.0)


def test_say_fills_numbers_from_the_records_and_names_what_is_missing(page):
    text = page.say("naive {naive.ms} (p10 {naive.p10}); {x}; wgmma {wgmma_fp16x3.ms}", x="given").text
    assert text.startswith("naive 280.000 ms (p10 279.000 ms); given; wgmma –")
    assert "Not recorded on H200: wgmma_fp16x3" in text


def test_the_counters_line_quotes_both_numbers_of_timed_minus_profiled(tmp_path, monkeypatch):
    """Audit M4: the gap is named for what it subtracts, the same build timed and profiled."""
    line = lesson.counter_line(P12, "coalesced", ["sectors", "l1"])
    assert re.search(r"timed − profiled, same build: (\d+\.\d{3}) − (\d+\.\d{3}) = [+-]\d+\.\d{3} ms", line)
    assert "sectors per request" in line and "Nsight Compute, H200" in line
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(tmp_path / "r.csv"))      # no counters beside it
    assert "none recorded" in lesson.counter_line(P12, "naive", ["sm"])
    with pytest.raises(ValueError, match="counters=\\['speed'\\]"):
        lesson.counter_line(P12, "naive", ["speed"])


def test_a_share_nsight_reports_above_100_percent_is_left_out():
    """A learner's surprise: L2 hit rates of 153% in step 9's table."""
    from fusedkit import counters

    raw = counters.step_counters(P12, "triton_fp16x3")
    assert (raw["l2_hit_pct"] > 100).any()
    assert all(v <= 100 for v in [lesson.counter_summary(P12, "triton_fp16x3")["l2_hit_pct"]] if v == v)
    assert ">15" not in lesson.counter_tables(P12, ["triton_fp16x3"]).split("L2")[-1][:0] and \
        "left out" in lesson.counter_tables(P12, ["triton_fp16x3"])


def test_the_clock_of_a_row_without_a_window_is_a_dash_and_no_conclusion():
    """Audit H1: the clocks are read over each timed loop only; these records have no window."""
    p = lesson.Page(P12, P12.defaults, detect_mode())
    table = lesson.clock_table(p, ["eager", "tiled"])
    assert list(table["what"]) == ["cuBLAS fp16 (ceiling)", "eager", "tiled"]
    assert table["MHz over its loop"].isna().all()
    assert "draws no conclusion from clocks" in lesson.clock_verdict(table)
    known = table.assign(**{"MHz over its loop": 1980.0, "% of floor at that clock": 70.0})
    assert "ran its loop at 1980 MHz" in lesson.clock_verdict(known)


# -- the code of a step ---------------------------------------------------------------------------------

def test_a_step_shows_at_most_40_changed_lines_and_its_file_folded():
    from fusedkit import source_view

    for key in ("p12", "p45"):
        for v in get(key).ladder():
            if v.source:
                view = source_view.show_step(key, v.slug)
                shown = view.html.split("<details")[0]
                assert shown.count("display:block") <= source_view.MAX_DIFF, v.slug
                assert f"the whole of {v.source}" in view.html
    two = source_view.diff_lines("p12/02_coalesced.cu", "p12/01_naive.cu")
    assert two[0] == ("@", "p12_coalesced_kernel (against p12_naive_kernel)")
    assert ("+", "    const float* w_col = wt + n;") in two and all("//" not in t for _, t in two)


def test_a_function_of_a_file_is_found_by_name_or_the_file_says_what_it_has():
    from fusedkit import source_view

    assert "sgemm_x_wT" in source_view.listing("common/torch_cuda.h", ["sgemm_x_wT"]).text
    assert [f.kind for f in source_view.parse(source_view.source_path("p12/08_triton_fused.py"))
            if f.name == "_linear_leakyrelu_kernel"] == ["kernel"]
    with pytest.raises(KeyError, match="it has"):
        source_view.listing("p12/01_naive.cu", ["nothing"])
    assert source_view.previous_source("p12", "tiled") == "p12/06_register_tiles.cu"
