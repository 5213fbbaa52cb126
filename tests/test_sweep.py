"""Size sweeps: spec parsing, a real sweep recorded as one series, reading it back, the chart."""

import random

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from fusedkit import hardware, plots, records, results  # noqa: E402
from fusedkit.cli import main  # noqa: E402
from fusedkit.problems import SizeError, fmt_sizes, get  # noqa: E402
from fusedkit.sweep import MAX_POINTS, parse_spec, parse_sweep, run_sweep, sweep_points  # noqa: E402

P12 = get("p12")
H200 = hardware.spec("H200 SXM")
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-mode behaviour")


# --- parsing -----------------------------------------------------------------------------

@pytest.mark.parametrize("spec,values", [
    ("batch_size=1,16,128,1024", [1, 16, 128, 1024]),
    ("batch_size=64..16384x2", [64 * 2**i for i in range(9)]),
    ("batch_size=3..100x3", [3, 9, 27, 81]),            # stops at the last value <= hi
    ("in_features = 512..2048+512", [512, 1024, 1536, 2048]),
    ("out_features=7", [7]),
    ("batch_size=1000,10", [1000, 10]),                 # the order given is kept
])
def test_good_specs(spec, values):
    assert parse_spec(P12, spec)[1] == values


@pytest.mark.parametrize("spec,msg", [
    ("bogus=1,2", "sweep 'bogus' is not a size of p12; valid: batch_size, in_features, out_features"),
    ("batch_size=1,x", "sweep batch_size='x' is not an integer; allowed: integers from 1 to 65536"),
    ("batch_size=2.5", "sweep batch_size='2.5' is not an integer"),
    ("batch_size=0,4", "sweep batch_size=0 is out of range; allowed: an integer from 1 to 65536"),
    ("batch_size=65537", "batch_size=65537 is out of range"),
    ("batch_size=", "sweep batch_size= has no values"),
    ("batch_size=1,,4", "has an empty value"),
    ("batch_size=4,1,4", "lists 4 more than once"),
    ("batch_size=64..16384x1", "factor x1 never grows; allowed: an integer factor >= 2"),
    ("batch_size=64..16384+0", "step +0 never grows"),
    ("batch_size=64..16384", "has no step; allowed: lo..hixF"),
    ("batch_size=64..16x2", "need 1 <= lo <= hi <= 65536; got lo=64, hi=16"),
    ("batch_size=0..16x2", "got lo=0"),
    ("batch_size=1..99999x2", "hi=99999"),
    ("batch_size=1..4096+1", f"more than {MAX_POINTS} points"),
    ("batch_size=64..256x1.5", "is not a range"),
    ("batch_size", "must look like name=v1,v2"),
])
def test_bad_specs_name_the_parameter(spec, msg):
    with pytest.raises(SizeError, match=None) as e:
        parse_spec(P12, spec)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_cross_product_and_its_limits():
    axes = parse_sweep(P12, ["batch_size=1,2", "in_features=8,16,32"])
    pts = sweep_points(P12, axes, {"out_features": 5})
    assert len(pts) == 6 and all(p["out_features"] == 5 for p in pts)
    assert [(p["batch_size"], p["in_features"]) for p in pts][:3] == [(1, 8), (1, 16), (1, 32)]
    with pytest.raises(SizeError, match="'batch_size' is given twice"):
        parse_sweep(P12, ["batch_size=1", "batch_size=2"])
    with pytest.raises(SizeError, match="sweep is empty"):
        parse_sweep(P12, [])
    with pytest.raises(SizeError, match=f"has 289 points; allowed: at most {MAX_POINTS}"):
        parse_sweep(P12, ["batch_size=1..17+1", "in_features=1..17+1"])
    with pytest.raises(SizeError, match="batch_size is given both as a fixed size and as a sweep"):
        sweep_points(P12, axes, {"batch_size": 4})


@pytest.mark.parametrize("sweep,msg", [
    ("batch_size=1..9", "sweep batch_size='1..9' has no step"),
    ("hidden=1,2", "sweep 'hidden' is not a size of p12"),
    ("batch_size=1,-3", "sweep batch_size=-3 is out of range"),
])
def test_cli_bad_sweep_is_one_line_exit_2(sweep, msg, capsys, tmp_path):
    rc = main(["bench", "--problem", "p12", "--sweep", sweep, "--records", str(tmp_path / "r.csv")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and msg in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r.csv").exists()


# --- running -----------------------------------------------------------------------------

SMALL = {"in_features": 64, "out_features": 33}


@cpu_only
def test_cli_sweep_records_one_series(tmp_path, capsys):
    path = tmp_path / "r.csv"
    rc = main(["bench", "--problem", "p12", "--sweep", "batch_size=1,3,17", "--sizes",
               "in_features=64,out_features=33", "--variants", "eager,triton_ieee", "--seeds", "2",
               "--rep-ms", "5", "--records", str(path)])
    assert rc == 0
    out = capsys.readouterr().out
    on_disk = records.read_records(path)
    assert on_disk["run_id"].nunique() == 1 and on_disk["run_id"].iloc[0] in out
    assert sorted(on_disk["sizes"].unique()) == sorted(
        fmt_sizes(P12.sizes(batch_size=b, **SMALL)) for b in (1, 3, 17))
    assert on_disk.groupby("variant").size().to_dict() == {"eager": 3, "triton_ieee": 3}
    assert on_disk.loc[on_disk["variant"] == "triton_ieee", "tier"].eq("fp32-faithful").all()
    assert "3 points run, 0 skipped, 6 rows recorded" in out


@cpu_only
def test_an_interrupted_sweep_keeps_the_finished_rows(tmp_path, monkeypatch):
    """Ctrl-C reaches the caller (a kernel's worker ignores it) while the second point's second
    variant is measured: the rows finished before it stay, nothing after it is written."""
    from fusedkit import runner

    real = runner.measure

    def measure(p):
        if p.sizes["batch_size"] == 5 and p.variant.slug == "addmm_alpha_beta":
            raise KeyboardInterrupt
        return real(p)
    monkeypatch.setattr(runner, "measure", measure)
    path = tmp_path / "r.csv"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(P12, {"batch_size": [1, 5, 17]}, SMALL, variants=["eager", "addmm_alpha_beta"],
                  seeds=1, warmup_ms=0, rep_ms=2, records_path=path, progress=False)
    got = records.read_records(path)
    assert got["run_id"].nunique() == 1
    done = set(zip(got["variant"], got["sizes"].str.extract(r"batch_size=(\d+)")[0].astype(int)))
    # point 1 complete, eager (first in the ladder) finished at point 2, nothing after the interrupt
    assert done == {("eager", 1), ("addmm_alpha_beta", 1), ("eager", 5)}


@cpu_only
def test_points_beyond_the_cpu_budgets_are_skipped_not_failed(tmp_path, capsys):
    path = tmp_path / "r.csv"
    res = run_sweep(P12, {"batch_size": [2, 65536]}, {"in_features": 4096, "out_features": 4096},
                    variants=["eager"], seeds=1, warmup_ms=0, rep_ms=2, records_path=path,
                    progress=False)
    assert res.points == 1 and len(res.skipped) == 1 and "batch_size=65536" in res.skipped[0]
    assert "would take about" in res.skipped[0] or "GiB" in res.skipped[0], res.skipped[0]
    assert "skipped point batch_size=65536" in capsys.readouterr().out
    assert list(records.read_records(path)["variant"]) == ["eager"]
    # the interpreter's budget drops one variant at one point; the other variant still runs there
    res = run_sweep(P12, {"batch_size": [1, 4096]}, {"in_features": 256, "out_features": 64},
                    variants=["eager", "triton_ieee"], seeds=1, warmup_ms=0, rep_ms=2,
                    records_path=path, progress=False)
    assert res.rows.groupby("batch_size")["variant"].apply(sorted).to_dict() == {
        1: ["eager", "triton_ieee"], 4096: ["eager"]}
    with pytest.raises(SizeError, match="no point can run on cpu; first: batch_size=1,.*needs a CUDA GPU"):
        run_sweep(P12, {"batch_size": [1, 2]}, SMALL, variants=["naive"], records_path=path,
                  progress=False)


# --- reading back and plotting -------------------------------------------------------------

def _ctx(run_id, stamp):
    ctx = records.RunContext.collect()
    # a committed commit: rows of a "+dirty" tree (this one, while it is edited) are not read back
    ctx.run_id, ctx.timestamp, ctx.device, ctx.commit = run_id, stamp, "NVIDIA H200", "abc1234"
    return ctx


def _write(path, ctx, points, variants=("eager", "triton_tf32")):
    """Rows of a sweep: eager at a random time, each other variant a random factor faster."""
    rows, truth = [], {}
    for sizes in points:
        eager = random.uniform(0.5, 5.0)
        for v in variants:
            ms = eager if v == "eager" else eager / random.uniform(1.5, 8.0)
            truth[(v, sizes["batch_size"])] = eager / ms
            rows.append(records.make_row(ctx, problem="p12", sizes=fmt_sizes(P12.sizes(sizes)),
                                         variant=v, timer="cuda-events", median_ms=ms,
                                         tflops=random.uniform(1, 100), gbps=random.uniform(1, 4000),
                                         pct_of_floor=random.uniform(1, 100)))
    records.append_rows(path, rows)
    return truth


def test_sweep_series_reads_the_latest_one_dim_sweep(tmp_path):
    path = tmp_path / "r.csv"
    fix = {"in_features": 8192, "out_features": 8192}
    _write(path, _ctx("20260101T000000Z-aaaaaa", "2026-01-01T00:00:00Z"),
           [{"batch_size": b, **fix} for b in (8, 64)])
    truth = _write(path, _ctx("20260102T000000Z-bbbbbb", "2026-01-02T00:00:00Z"),
                   [{"batch_size": b, **fix} for b in (16, 128, 1024)])
    _write(path, _ctx("20260103T000000Z-cccccc", "2026-01-03T00:00:00Z"),   # one point: not a sweep
           [{"batch_size": 4096, **fix}])
    cross = _ctx("20260104T000000Z-dddddd", "2026-01-04T00:00:00Z")         # two dims vary
    _write(path, cross, [{"batch_size": b, "in_features": k, "out_features": 8192}
                         for b in (2, 4) for k in (512, 1024)])
    s = results.sweep_series(P12, "batch_size", path=path)
    assert list(s.columns[:7]) == ["variant", "batch_size", "median_ms", "pct_of_floor", "tflops",
                                   "gbps", "speedup"]
    assert set(s["run_id"]) == {"20260102T000000Z-bbbbbb"} and len(s) == 6
    assert list(s["variant"]) == ["eager"] * 3 + ["triton_tf32"] * 3
    assert list(s["batch_size"]) == [16, 128, 1024] * 2
    for _, r in s.iterrows():
        assert r["speedup"] == pytest.approx(truth[(r["variant"], r["batch_size"])])
    assert results.sweep_series(P12, "batch_size", device="A100", path=path).empty
    assert results.sweep_series(P12, "out_features", path=path).empty
    with pytest.raises(ValueError, match="dim='M' is not a size of p12"):
        results.sweep_series(P12, "M", path=path)


def test_ridge_crossing_splits_memory_from_compute_bound():
    fix = {"in_features": 8192, "out_features": 8192}
    for prec in ("fp32", "tf32"):
        m = plots.ridge_crossing(P12, fix, "batch_size", H200, prec)
        ridge = H200.peak_tflops(prec) / H200.mem_gbps * 1e3
        below = plots.fused_floor(P12, {**fix, "batch_size": int(m) - 1}, H200, prec)
        at = plots.fused_floor(P12, {**fix, "batch_size": int(m)}, H200, prec)
        assert below.intensity < ridge <= at.intensity
    # a tiny weight never has enough reuse to reach the tf32 ridge
    assert plots.ridge_crossing(P12, {"in_features": 8, "out_features": 8}, "batch_size", H200,
                                "tf32") is None


def test_sweep_series_reads_the_newest_sweep_that_timed_a_step(tmp_path):
    path = tmp_path / "r.csv"
    fix = {"in_features": 8192, "out_features": 8192}
    full = _ctx("20260101T000000Z-aaaaaa", "2026-01-01T00:00:00Z")
    _write(path, full, [{"batch_size": b, **fix} for b in (1, 16, 256)],
           variants=("eager", "triton_tf32", "triton_fp16x3"))
    short = _ctx("20260102T000000Z-bbbbbb", "2026-01-02T00:00:00Z")
    _write(path, short, [{"batch_size": b, **fix} for b in (1, 4)], variants=("eager", "small_batch_stream"))
    s = results.sweep_series(P12, "batch_size", path=path, having=["small_batch_stream"])
    assert set(s["run_id"]) == {short.run_id} and sorted(set(s["variant"])) == ["eager", "small_batch_stream"]
    assert set(results.sweep_series(P12, "batch_size", path=path, having=["triton_tf32"])["run_id"]) == {full.run_id}
    assert results.sweep_series(P12, "batch_size", path=path, having=["naive"]).empty


# --- every sweep, its spread, and the by-batch routes ---------------------------------------

FIX = {"in_features": 8192, "out_features": 8192}
CANDIDATES = ("small_batch_stream", "triton_fp16x3", "wgmma_fp16x3")   # p12's routes name these


def _timed(path, ctx, times):
    """One sweep: ``times`` maps (variant, rows) to (median, p10, p90) in ms."""
    rows = [records.make_row(ctx, problem="p12", sizes=fmt_sizes(P12.sizes({"batch_size": b, **FIX})),
                             variant=v, timer="cuda-events", median_ms=m, p10_ms=lo, p90_ms=hi)
            for (v, b), (m, lo, hi) in times.items()]
    records.append_rows(path, rows)


def _two_sweeps(path):
    """An older sweep where step 9 was fast at 16 rows, a newer one where it jumped (host-bound),
    while the by-batch step (routing 16 rows to step 9) caught its fast mode."""
    old, new = (_ctx("20260101T000000Z-aaaaaa", "2026-01-01T00:00:00Z"),
                _ctx("20260102T000000Z-bbbbbb", "2026-01-02T00:00:00Z"))
    base = {("eager", 1): (0.10, 0.099, 0.101), ("eager", 16): (0.21, 0.20, 0.22),
            ("eager", 1024): (2.7, 2.69, 2.71),
            ("small_batch_stream", 1): (0.08, 0.079, 0.081), ("small_batch_stream", 16): (0.32, 0.31, 0.33),
            ("small_batch_stream", 1024): (18.0, 17.9, 18.1),
            ("wgmma_fp16x3", 1): (0.16, 0.15, 0.17), ("wgmma_fp16x3", 16): (0.16, 0.15, 0.17),
            ("wgmma_fp16x3", 1024): (0.65, 0.64, 0.66),
            ("triton_fp16x3", 1): (0.14, 0.13, 0.15), ("triton_fp16x3", 1024): (0.78, 0.77, 0.79)}
    _timed(path, old, {**base, ("triton_fp16x3", 16): (0.116, 0.115, 0.117)})
    _timed(path, new, {**base, ("triton_fp16x3", 16): (0.29, 0.23, 0.32),
                       ("faithful_by_batch", 1): (0.081, 0.08, 0.082),
                       ("faithful_by_batch", 16): (0.117, 0.115, 0.25),
                       ("faithful_by_batch", 1024): (0.66, 0.65, 0.67)})
    return old, new


def test_every_sweep_reads_each_sweep_oldest_first(tmp_path):
    path = tmp_path / "r.csv"
    old, new = _two_sweeps(path)
    every = results.every_sweep(P12, path=path, having=["eager", *CANDIDATES])
    assert list(dict.fromkeys(every["run_id"])) == [old.run_id, new.run_id]
    assert list(every.columns) == list(results.sweep_series(P12, "batch_size", path=path).columns)
    one = every[(every["run_id"] == new.run_id) & (every["variant"] == "triton_fp16x3")
                & (every["batch_size"] == 16)].iloc[0]
    assert (one["median_ms"], one["p10_ms"], one["p90_ms"]) == (0.29, 0.23, 0.32)
    assert one["speedup"] == pytest.approx(0.21 / 0.29)
    assert set(results.every_sweep(P12, path=path, having=["faithful_by_batch"])["run_id"]) == {new.run_id}
    assert results.every_sweep(P12, path=path, having=["naive"]).empty


def test_sweep_spread_reads_each_point_across_sweeps(tmp_path):
    path = tmp_path / "r.csv"
    _two_sweeps(path)
    every = results.every_sweep(P12, path=path, having=["eager", *CANDIDATES])
    spread = results.sweep_spread(every, among=CANDIDATES).set_index(["variant", "batch_size"])
    tri = spread.loc[("triton_fp16x3", 16)]
    assert tri["sweeps"] == 2 and tri["best_p10_ms"] == 0.115 and tri["worst_p90_ms"] == 0.32
    assert (tri["lowest_ms"], tri["highest_ms"]) == (0.116, 0.29)
    assert tri["median_ms"] == pytest.approx((0.116 + 0.29) / 2)
    assert tri["wins"] == 1 and spread.loc[("wgmma_fp16x3", 16), "wins"] == 1   # one sweep each
    assert tri["wide"] == 1 and spread.loc[("wgmma_fp16x3", 16), "wide"] == 0     # (0.32 - 0.23) / 0.29
    assert spread.loc[("small_batch_stream", 1), "wins"] == 2 and spread.loc[("eager", 1), "wins"] == 0
    with pytest.raises(ValueError, match="sweeps is empty"):
        results.sweep_spread(every.iloc[0:0])


def test_route_for_takes_the_first_step_of_the_band_that_was_timed():
    slugs = list(CANDIDATES)
    assert results.route_for(P12, "faithful_by_batch", 1, slugs) == "small_batch_stream"
    assert results.route_for(P12, "faithful_by_batch", 16, slugs) == "wgmma_fp16x3"
    assert results.route_for(P12, "faithful_by_batch", 16, ["triton_fp16x3"]) == "triton_fp16x3"   # off Hopper
    assert results.route_for(P12, "faithful_by_batch", 1024, slugs) == "wgmma_fp16x3"
    assert results.route_for(P12, "faithful_by_batch", 1024, ["triton_fp16x3"]) == "triton_fp16x3"  # off Hopper
    assert results.route_for(P12, "faithful_by_batch", 1, ["triton_fp16x3"]) is None
    with pytest.raises(ValueError, match="routes nothing; the by-batch step of p12 is faithful_by_batch"):
        results.route_for(P12, "tiled", 1, slugs)


def test_route_check_holds_the_by_batch_step_against_the_step_it_routes_to(tmp_path):
    path = tmp_path / "r.csv"
    _, new = _two_sweeps(path)
    check = results.route_check(P12, "faithful_by_batch", path=path).set_index("batch_size")
    assert list(check.index) == [1, 16, 1024] and set(check["run_id"]) == {new.run_id}
    assert list(check["routed"]) == ["small_batch_stream", "wgmma_fp16x3", "wgmma_fp16x3"]
    assert list(check["routed_step"]) == [17, 14, 14]
    assert check.loc[1, "verdict"] == "as fast" and not check.loc[1, "wide"]
    # the by-batch step in its fast mode against step 14 timed alone: one miss, one way
    routed = check.loc[16, "routed_ms"]
    assert check.loc[16, "ratio"] == pytest.approx(0.117 / routed)
    assert check.loc[16, "speedup"] == pytest.approx(0.21 / 0.117)
    assert check.loc[16, "routed_speedup"] == pytest.approx(0.21 / routed)
    assert check.loc[1024, "eager_ms"] == 2.7 and results.caption(check.reset_index()).startswith("NVIDIA H200")
    assert results.route_check(P12, "faithful_by_batch", path=tmp_path / "none.csv").empty


def test_route_check_calls_a_difference_beyond_both_spreads_a_miss(tmp_path):
    # 1.2x slower with tight spreads: the old 1.25x band called it "as fast".
    path = tmp_path / "r.csv"
    ctx = _ctx("20260103T000000Z-cccccc", "2026-01-03T00:00:00Z")
    _timed(path, ctx, {("eager", 1024): (2.7, 2.69, 2.71), ("small_batch_stream", 1024): (18.0, 17.9, 18.1),
                       ("triton_fp16x3", 1024): (0.78, 0.77, 0.79),
                       ("wgmma_fp16x3", 1024): (0.65, 0.64, 0.66),
                       ("faithful_by_batch", 1024): (0.78, 0.77, 0.79),
                       **{(v, 1): (0.1, 0.099, 0.101) for v in ("eager", *CANDIDATES, "faithful_by_batch")}})
    check = results.route_check(P12, "faithful_by_batch", path=path).set_index("batch_size")
    assert check.loc[1024, "verdict"] == "1.20x slower"
    # A wide spread of one step does not swallow the other's median: 1.68x slower is a miss
    # though the routed median lies inside the by-batch step's p10 to p90.
    wide = tmp_path / "wide.csv"
    _timed(wide, _ctx("20260104T000000Z-dddddd", "2026-01-04T00:00:00Z"),
           {("eager", 1024): (2.7, 2.69, 2.71), ("small_batch_stream", 1024): (18.0, 17.9, 18.1),
            ("triton_fp16x3", 1024): (0.78, 0.77, 0.79), ("wgmma_fp16x3", 1024): (0.176, 0.174, 0.177),
            ("faithful_by_batch", 1024): (0.295, 0.174, 0.333),
            **{(v, 1): (0.1, 0.099, 0.101) for v in ("eager", *CANDIDATES, "faithful_by_batch")}})
    check = results.route_check(P12, "faithful_by_batch", path=wide).set_index("batch_size")
    assert check.loc[1024, "verdict"] == f"{0.295 / 0.176:.2f}x slower"


def test_the_route_and_spread_charts_draw_each_role_in_one_colour(tmp_path):
    path = tmp_path / "r.csv"
    _two_sweeps(path)
    check = results.route_check(P12, "faithful_by_batch", path=path)
    fig = plots.route_chart([(P12, "faithful_by_batch", check), (P12, "faithful_by_batch", check.iloc[0:0])])
    ax, empty = fig.axes
    handles, labels = ax.get_legend_handles_labels()
    lines = {label: (h.lines[0] if hasattr(h, "lines") else h).get_color()   # error bars: a container
             for h, label in zip(handles, labels)}
    assert lines == {"eager fp32": plots.ROLE_COLOURS["eager"],
                     "the step it routes to": plots.ROLE_COLOURS["routed"],
                     "faithful_by_batch (step 19)": plots.ROLE_COLOURS["by-batch"]}
    assert [t.get_text() for t in ax.texts] == ["17", "14", "14"]
    edges = [ln.get_xdata()[0] for ln in ax.lines if ln.get_linestyle() == ":"]
    assert edges == [r.max_rows + 0.5 for r in P12.variant("faithful_by_batch").routes[:-1]]
    assert "no sweep timed" in empty.texts[0].get_text()
    every = results.every_sweep(P12, path=path, having=list(CANDIDATES))
    fig = plots.spread_chart(every, "batch_size", problem=P12, variants=["eager", *CANDIDATES])
    colours = plots.step_colours(P12, ["eager", *CANDIDATES])
    (ax,) = fig.axes
    assert [ln.get_label() for ln in ax.lines] == ["0: eager", "17: small_batch_stream", "9: triton_fp16x3",
                                                   "14: wgmma_fp16x3"]
    assert [tuple(ln.get_color()) for ln in ax.lines] == [colours[v] for v in ("eager", *CANDIDATES)]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="not steps of p12"):
        plots.step_colours(P12, ["bogus"])
    with pytest.raises(ValueError, match="panels is empty"):
        plots.route_chart([])


def test_floor_chart_crosses_each_ridge_where_ridge_crossing_says():
    fig = plots.floor_chart(P12, H200, precisions=("fp32", "fp16x3"))
    (ax,) = fig.axes
    dashed = sorted(ln.get_xdata()[0] for ln in ax.lines if ln.get_linestyle() == "--")
    assert dashed == sorted(plots.ridge_crossing(P12, P12.defaults, "batch_size", H200, p)
                            for p in ("fp32", "fp16x3"))
    memory = next(ln for ln in ax.lines if ln.get_label().startswith("memory floor"))
    assert list(memory.get_xdata()) == [2**i for i in range(11)]
    w_bytes = 4 * 8192 * 8192
    assert memory.get_ydata()[0] == pytest.approx(plots.fused_floor(P12, {**P12.defaults, "batch_size": 1},
                                                                    H200).memory_ms)
    assert memory.get_ydata()[0] > w_bytes / (H200.mem_gbps * 1e9) * 1e3   # W, and a little more
    with pytest.raises(ValueError, match="dim='M' is not a size of p12"):
        plots.floor_chart(P12, H200, dim="M")

