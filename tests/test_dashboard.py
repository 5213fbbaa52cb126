"""The results dashboard's views, on synthetic records written and read through fusedkit.records."""

import math
import random

import pandas as pd
import pytest

from fusedkit import dashboard, problems, records

P12 = problems.get("p12")
KB = "batch_size=1024,in_features=8192,out_features=8192"
SMALL = "batch_size=64,in_features=256,out_features=128"


def ctx(i, device="NVIDIA H200", commit=None):
    return records.RunContext(run_id=f"2026010{i}T000000Z-{i:06x}", timestamp=f"2026-01-0{i}T00:00:00Z",
                              commit=commit or f"c{i:06d}", device=device, driver="550.54.15",
                              cuda="12.8", torch="2.11.0", triton="3.6.0")


def row(c, variant, ms, tier, sizes=KB, problem="p12", timer="cuda-events"):
    return records.make_row(c, problem=problem, sizes=sizes, variant=variant, tier=tier, timer=timer,
                            median_ms=ms, rel_error=random.uniform(1e-8, 1e-3))


@pytest.fixture
def rec(tmp_path):
    """Three H200 runs and one A100 run of p12, with random times, plus rows the views must skip."""
    t = {v: random.uniform(0.2, 6.0) for v in ["eager", "triton_tf32x3", "triton_fp16x3", "triton_tf32",
                                               "eager_tf32", "cublas_epilogue"]}
    r1, r2, r3, a = ctx(1), ctx(2), ctx(3), ctx(4, device="NVIDIA A100-SXM4-80GB")
    rows = [
        row(r1, "eager", t["eager"], "reference"), row(r1, "triton_tf32x3", t["triton_tf32x3"], "fp32-faithful"),
        row(r1, "triton_fp16x3", t["triton_fp16x3"], "fp32-faithful"),
        row(r1, "triton_tf32", t["triton_tf32"], "fast"),
        # run 2 re-times only the tf32 kernel, faster, and has no eager: no speed-up for it
        row(r2, "triton_tf32", t["triton_tf32"] / 2, "fast"),
        # run 3: eager again (slower clocks), and one more fast variant, at KernelBench sizes
        row(r3, "eager", 1.1 * t["eager"], "reference"), row(r3, "eager_tf32", t["eager_tf32"], "fast"),
        row(r3, "epilogue_vec4", 0.02, ""),                    # a component: no tier, not ladder
        row(r3, "eager", 0.01, "reference", sizes=SMALL),      # other sizes, its own table rows
        row(a, "eager", 3 * t["eager"], "reference"), row(a, "cublas_epilogue", t["cublas_epilogue"], "fp32-faithful"),
        row(a, "eager", 9.0, "reference", problem="p45",
            sizes="batch_size=16,input_size=32,hidden_size=64,output_size=8"),
        records.make_row(r3, problem="device", sizes="n=8192", variant="bf16_matmul", timer="cuda-events",
                         median_ms=1.6),
    ]
    path = tmp_path / "records.csv"
    records.append_rows(path, rows)
    return records.read_records(path), t


def test_best_per_tier_is_the_best_of_each_variants_newest_measurement(rec):
    # One definition with the report index, the export and the README (results.newest_clean,
    # results.best_by_tier): each variant's newest clean measurement in a run that timed eager.
    df, t = rec
    best = dashboard.best_per_tier(df, P12)
    h200 = best[(best["device"] == "NVIDIA H200") & (best["sizes"] == KB)].set_index("tier")
    assert list(h200.index) == ["reference", "fp32-faithful", "kb-pass", "fast"]   # accuracy order
    assert h200.loc["reference", "run_id"] == ctx(3).run_id          # eager's newest timing
    assert h200.loc["reference", "median_ms"] == pytest.approx(1.1 * t["eager"])
    fastest_faithful = min(["triton_tf32x3", "triton_fp16x3"], key=t.get)
    assert h200.loc["fp32-faithful", "variant"] == fastest_faithful
    assert h200.loc["fp32-faithful", "run_id"] == ctx(1).run_id      # the only run that timed it
    assert h200.loc["fp32-faithful", "speedup"] == pytest.approx(t["eager"] / t[fastest_faithful])
    # a faithful kernel meets KernelBench's check: it fills the kb-pass slot, saying its own tier
    assert h200.loc["kb-pass", "variant"] == fastest_faithful
    assert h200.loc["kb-pass", "variant_tier"] == "fp32-faithful"
    fastest = min(["triton_tf32x3", "triton_fp16x3", "triton_tf32"], key=t.get)
    assert h200.loc["fast", "variant"] == fastest                # baselines (eager_tf32) never count
    if fastest == "triton_tf32":   # run 2 timed it faster but without eager: no speed-up, not read
        assert h200.loc["fast", "run_id"] == ctx(1).run_id
    a100 = best[best["device"].str.contains("A100")].set_index("tier")
    assert a100.loc["fp32-faithful", "speedup"] == pytest.approx(3 * t["eager"] / t["cublas_epilogue"])
    assert set(best["sizes"]) == {KB, SMALL}
    small = best[best["sizes"] == SMALL]
    assert list(small["tier"]) == ["reference"]
    assert "epilogue_vec4" not in set(best["variant"])
    only_kb = dashboard.best_per_tier(df, "p12", sizes=P12.defaults)
    assert set(only_kb["sizes"]) == {KB}


def test_best_per_tier_reads_a_newer_partial_run_not_only_the_fullest(rec, tmp_path):
    df, t = rec
    newer = ctx(5)
    rows = [row(newer, "eager", t["eager"], "reference"),
            row(newer, "wgmma_fp16x3", t["eager"] / 50, "fp32-faithful"),
            row(newer, "triton_fp16x3", t["eager"] / 40, "fp32-faithful"),
            # a dirty tree and an export are never results, however fast
            row(ctx(6, commit="c000006+dirty"), "eager", t["eager"], "reference"),
            row(ctx(6, commit="c000006+dirty"), "wgmma_persistent", t["eager"] / 99, "fast"),
            row(newer, "export:wgmma_fp16x3", t["eager"] / 90, "fp32-faithful")]
    records.append_rows(tmp_path / "newer.csv", rows)
    both = pd.concat([df, records.read_records(tmp_path / "newer.csv")], ignore_index=True)
    best = dashboard.best_per_tier(both, P12, sizes=P12.defaults)
    h200 = best[best["device"] == "NVIDIA H200"].set_index("tier")
    assert h200.loc["fp32-faithful", "variant"] == "wgmma_fp16x3"
    assert h200.loc["fp32-faithful", "run_id"] == newer.run_id
    assert h200.loc["fp32-faithful", "speedup"] == pytest.approx(50.0)
    assert h200.loc["fast", "variant"] == "wgmma_fp16x3"          # 50x beats every older fast one
    assert h200.loc["reference", "run_id"] == newer.run_id


def test_best_per_tier_of_an_unrecorded_problem_is_empty_with_columns(rec):
    df, _ = rec
    best = dashboard.best_per_tier(df[df["problem"] != "p12"], P12)
    assert best.empty and {"tier", "variant", "speedup"} <= set(best.columns)
    with pytest.raises(ValueError, match="missing column"):
        dashboard.best_per_tier(pd.DataFrame({"problem": ["p12"]}), P12)


def test_runs_comparison_and_pivot_keep_runs_apart(rec):
    df, t = rec
    comp = dashboard.runs_comparison(df, P12)
    assert "epilogue_vec4" not in set(comp["variant"])          # components are not the ladder
    assert comp["timestamp"].is_monotonic_increasing
    assert comp["run"].iloc[0] == "NVIDIA H200, 2026-01-01 00:00 UTC, commit c000001"
    eager = comp[(comp["variant"] == "eager") & (comp["sizes"] == KB)]
    assert list(eager["run_id"]) == [ctx(1).run_id, ctx(3).run_id, ctx(4).run_id]
    assert (eager["speedup"] == 1.0).all()
    table = dashboard.runs_pivot(comp)
    assert list(table.columns) == list(dict.fromkeys(comp["run"]))      # runs in time order
    assert table.loc[(KB, "triton_tf32")].dropna().tolist() == pytest.approx(
        [t["triton_tf32"], t["triton_tf32"] / 2])
    assert pd.isna(table.loc[(KB, "eager"), "NVIDIA H200, 2026-01-02 00:00 UTC, commit c000002"])   # run 2 skipped it
    only = dashboard.runs_comparison(df, P12, variants=["triton_fp16x3"])
    assert set(only["variant"]) == {"triton_fp16x3"}
    assert only["speedup"].iloc[0] == pytest.approx(t["eager"] / t["triton_fp16x3"])  # eager found
    with pytest.raises(ValueError, match="value='ms'"):
        dashboard.runs_pivot(comp, "ms")


def test_nearest_records_by_log_distance(rec):
    df, t = rec
    near = dashboard.nearest_records(df, P12, {"batch_size": 96, "in_features": 256, "out_features": 128},
                                     ["eager", "triton_tf32x3", "tiled"]).set_index("variant")
    assert near.loc["eager", "sizes"] == SMALL                      # 96 is nearer 64 than 1024
    assert near.loc["eager", "distance"] == pytest.approx(math.log(96 / 64))
    assert near.loc["triton_tf32x3", "sizes"] == KB                 # its only sizes
    assert "tiled" not in near.index                                # never recorded
    at_kb = dashboard.nearest_records(df, P12, P12.defaults, ["eager"])
    assert at_kb["device"].iloc[0] == "NVIDIA A100-SXM4-80GB"      # equal distance: newest first (A100)
    assert at_kb["date"].iloc[0] == "2026-01-04"
    # The numbers first, then where they were measured; run and commit ids stay in the records.
    assert list(at_kb.columns) == ["variant", "tier", "median_ms", "rel_error", "speedup", "sizes",
                                   "distance", "device", "date"]


def test_size_distance_is_symmetric_log_ratio():
    a = {"m": random.randint(1, 500), "n": random.randint(1, 500)}
    b = {"m": a["m"] * 2, "n": a["n"]}
    assert dashboard.size_distance(a, b) == pytest.approx(dashboard.size_distance(b, a))
    assert dashboard.size_distance(a, b) == pytest.approx(0.6931471805599453)
    with pytest.raises(ValueError, match="different dimensions"):
        dashboard.size_distance(a, {"m": 1})


def test_read_all_reads_records_files_and_names_the_others(tmp_path, rec):
    df, _ = rec
    (tmp_path / "sweep.csv").write_text("bm,bn,median_ms\n128,256,0.4\n")
    both, skipped = dashboard.read_all(tmp_path)
    assert len(both) == len(df) and skipped == ["sweep.csv: not a records file (columns bm, bn, median_ms, ...)"]
    empty, _ = dashboard.read_all(tmp_path / "nothing")
    assert empty.empty and list(empty.columns) == list(records.COLUMNS)


def test_inventory_counts_what_each_result_leaves_out(tmp_path):
    r1, dirty, cpu = ctx(1), ctx(2, commit="c000002+dirty"), ctx(3)
    rows = [row(r1, "eager", 2.0, "reference"), row(r1, "tiled", 3.0, "fp32-faithful"),
            row(cpu, "tiled", 30.0, "fp32-faithful", timer="cpu-wall"),
            row(r1, "export:tiled", 3.1, "fp32-faithful"),
            row(dirty, "eager", 2.1, "reference"),
            row(r1, "eager", 9.0, "reference", problem="p45",
                sizes="batch_size=16,input_size=32,hidden_size=64,output_size=8")]
    path = tmp_path / "records.csv"
    records.append_rows(path, rows)
    inv = dashboard.inventory(records.read_records(path))
    p12 = inv.loc["p12"]
    assert (p12["rows"], p12["clean"], p12["uncommitted"], p12["not_gpu_timed"], p12["export_checks"]) == (5, 2, 1, 1, 1)
    assert (p12["runs"], p12["variants"], p12["devices"], p12["first"]) == (1, 2, "NVIDIA H200", "2026-01-01")
    assert inv.loc["p45", "clean"] == 1 and inv.loc["p45", "uncommitted"] == 0
    empty = dashboard.inventory(records.read_records(tmp_path / "none.csv"))
    assert empty.empty and "clean" in empty.columns
