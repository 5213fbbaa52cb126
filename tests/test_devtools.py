"""The GPU devtools: every probe checks and times through fusedkit.harness and records its rows;
on the CPU their builders run in Triton's interpreter, their CLIs refuse bad input in one line."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fusedkit import problems, records, results
from devtools import (common, hopper_probe, hopper_probe_p45, probe_p12_tf32, probe_tma_tf32,
                      small_batch_probe, sweep_p12_triton)
from fusedkit.mode import triton_interprets

REPO = Path(__file__).resolve().parents[1]
P12, P45 = problems.get("p12"), problems.get("p45")
TINY12 = P12.sizes(batch_size=8, in_features=16, out_features=12)
TINY45 = P45.sizes(batch_size=8, input_size=16, hidden_size=12, output_size=8)
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU run is the real probe")


def _probe(tmp_path, **kw):
    return common.Probe("test_probe", rep_ms=5.0, seeds=1, records_path=tmp_path / "r.csv",
                        device="cpu", **kw)


def _rows(tmp_path):
    return records.read_records(tmp_path / "r.csv")


@no_gpu
@pytest.mark.parametrize("tool", ["probe_p12_tf32", "probe_tma_tf32"])
def test_probe_checks_in_the_interpreter_and_records_nothing_untimed(tool, tmp_path):
    out = subprocess.run([sys.executable, "-m", f"devtools.{tool}", "--records",
                          str(tmp_path / "r.csv")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    checked = [line for line in out.stdout.splitlines() if "(checked, not timed)" in line]
    assert checked and "FAILED" not in out.stdout
    assert "0 rows recorded" in out.stdout and _rows(tmp_path).empty


def test_a_probe_records_each_clean_measurement_in_one_run(tmp_path, capsys):
    probe = _probe(tmp_path)
    m = probe.measure(P12, "eager", TINY12, notes=["config A"])
    wrong = probe.measure(P12, lambda model: (lambda x: model(x) + 1), TINY12, name="off_by_one")
    assert m.timed and not wrong.ok
    out = capsys.readouterr().out
    assert "off_by_one: FAILED" in out and "eager: reference" in out
    rows = _rows(tmp_path)
    assert list(rows["variant"]) == ["eager"], "a failed measurement is not recorded"
    assert rows["notes"].iloc[0].endswith("; probe test_probe; config A")
    assert rows["run_id"].iloc[0] == probe.ctx.run_id and rows["median_ms"].iloc[0] == m.timing.median_ms
    assert probe.measure(P12, "cublas_epilogue", TINY12) is None   # a GPU step on a CPU: one line
    assert "cublas_epilogue: not run:" in capsys.readouterr().out


def test_a_probe_refuses_an_unwritable_records_file_before_measuring(tmp_path):
    (tmp_path / "r.csv").write_text("not,a,records,file\n")
    with pytest.raises(records.RecordsError):
        _probe(tmp_path)
    assert probe_tma_tf32.main(["--records", str(tmp_path / "r.csv")]) == 2


@pytest.mark.parametrize("module, step", [(probe_p12_tf32, "triton_tf32_persistent"),
                                          (probe_tma_tf32, "tma_tf32"),
                                          (sweep_p12_triton, "triton_tf32")])
def test_a_config_is_measured_and_recorded_under_its_own_name(module, step, tmp_path):
    """Each config probe's builder, at a small config in the interpreter, through measure."""
    cfg = {probe_p12_tf32: (16, 16, 16, 1, 4, 2, False, 8, 1), probe_tma_tf32: (16, 16, 16, 1, 4),
           sweep_p12_triton: (16, 16, 16, 1, 4, 8)}[module]
    sizes = P12.sizes(batch_size=20, in_features=24, out_features=16)   # TMA-ready: multiples of 4
    m = module.measure_config(_probe(tmp_path), "tf32", cfg, sizes)
    assert m.timed and m.check.ok, m.failure
    (row,) = _rows(tmp_path).to_dict("records")
    assert row["variant"].startswith(f"{step}@16x16x16_s1_w4") and row["variant"] == m.variant.slug
    assert "config BLOCK_M=16, BLOCK_N=16, BLOCK_K=16" in row["notes"]
    assert "precision=tf32" in row["notes"] and row["sizes"] == problems.fmt_sizes(sizes)


@pytest.mark.skipif(not triton_interprets(), reason="runs Triton on CPU tensors: the interpreter only")
def test_a_tma_config_is_checked_at_shapes_tma_cannot_read():
    """K and N not multiples of 4 (the check's nearby odd shape) are padded, not refused."""
    model = P12.make_model(P12.sizes(batch_size=5, in_features=7, out_features=9), seed=1)
    (x,) = P12.get_inputs(P12.sizes(batch_size=5, in_features=7, out_features=9), seed=1)
    y = probe_tma_tf32.build_tma("ieee", (16, 16, 16, 1, 4), model)(x)
    with torch.no_grad():
        assert y.shape == (5, 9) and torch.allclose(y, model(x), atol=1e-5)


def test_the_hopper_probes_measure_their_steps_and_record_them(tmp_path, capsys):
    """hopper_probe's measuring path on what a CPU runs: eager checked at small sizes, then
    measured; the ptxas note of a step with a Hopper source goes in its row."""
    probe = _probe(tmp_path)
    small = [P12.sizes(batch_size=m, in_features=k, out_features=n) for m, k, n in hopper_probe.SMALL_SIZES[:2]]
    times = hopper_probe.measure_steps(probe, P12, [P12.variant("eager")], TINY12, small, {})
    assert set(times) == {"eager"} and times["eager"] > 0
    assert "eager: checked at 2 small odd sizes" in capsys.readouterr().out
    small45 = [P45.sizes(batch_size=m, input_size=k, hidden_size=h, output_size=n)
               for m, k, h, n in hopper_probe_p45.SMALL_SIZES[:2]]
    hopper_probe.measure_steps(probe, P45, [P45.variant("eager")], TINY45, small45, {})
    rows = _rows(tmp_path)
    assert list(rows["problem"]) == ["p12", "p45"] and rows["run_id"].nunique() == 1
    usage = {"11_wgmma_tma.cu": {"k": {"registers": 168, "spill_stores": 0, "spill_loads": 4,
                                       "shared_bytes": 1024, "stack_bytes": 0}}}
    assert hopper_probe.ptxas_note(usage, P12.variant("wgmma_tma")) == \
        "ptxas k: 168 regs, spills 0/4 B, smem 1024 B"
    assert hopper_probe.ptxas_note(usage, P12.variant("eager")) == ""


def test_a_launch_timed_alone_is_recorded_but_never_a_component(tmp_path):
    probe = _probe(tmp_path)
    t = probe.time_launch(P12, TINY12, "wgmma_fp16x3:x_split", lambda: torch.ones(64) * 2, nbytes=256.0)
    (row,) = _rows(tmp_path).to_dict("records")
    assert row["notes"].startswith(common.LAUNCH) and row["median_ms"] == t.median_ms and row["gbps"] > 0
    # results.components reads GPU rows: a launch row and a component row as a GPU run writes them.
    ctx = records.RunContext.collect()
    ctx.device, ctx.commit = "NVIDIA H200", "abc1234"
    base = dict(problem="p12", sizes=problems.fmt_sizes(P12.defaults), timer="cuda-events", median_ms=0.1)
    path = tmp_path / "gpu.csv"
    records.append_rows(path, [
        records.make_row(ctx, variant="epilogue_vec4", notes="component; 90% of a copy", **base),
        records.make_row(ctx, variant="wgmma_fp16x3:x_split", notes=f"{common.LAUNCH}; probe x", **base)])
    assert list(results.components(P12, path=path)["variant"]) == ["epilogue_vec4"]


def test_probe_clis_refuse_bad_input_in_one_line(capsys):
    cases = [(hopper_probe, ["--rep-ms", "0"], "--rep-ms='0': expected a number > 0"),
             (hopper_probe_p45, ["--sizes", "batch_size=0"], "--sizes='batch_size=0': batch_size=0"),
             (probe_p12_tf32, ["--budget-s", "0"], "--budget-s=0.0: must be > 0"),
             (probe_p12_tf32, ["--precision", "fp8"], "invalid choice: 'fp8'"),
             (sweep_p12_triton, ["--precision", "fp16"], "invalid choice: 'fp16'"),
             (probe_tma_tf32, ["--rep-ms", "x"], "--rep-ms='x': expected a number > 0")]
    for module, args, wrong in cases:
        with pytest.raises(SystemExit) as e:
            module.main(args)
        err = capsys.readouterr().err
        assert e.value.code == 2 and wrong in err and err.count("\n") == 1, (module.__name__, err)


@no_gpu
@pytest.mark.parametrize("module", [hopper_probe, hopper_probe_p45, sweep_p12_triton, small_batch_probe])
def test_gpu_probes_without_a_gpu_say_so_in_one_line(module, capsys):
    assert module.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a CUDA GPU (torch sees none)" in err[0]


def test_shell_tools_parse():
    for sh in (REPO / "devtools").glob("*.sh"):
        assert subprocess.run(["bash", "-n", str(sh)]).returncode == 0, sh


def test_gpu_session_sweep_defaults_name_real_variants_and_sizes():
    """A typo in the sweep stage's defaults would surface only on a lent GPU, costing device time."""
    from fusedkit.sweep import parse_sweep

    text = (REPO / "devtools/gpu_session.sh").read_text()
    specs = dict(re.findall(r"spec=\$\{SWEEP_(P\d+):-([^}]+)\}", text))
    variants = dict(re.findall(r"v=\$\{SWEEP_VARIANTS_(P\d+):-([^}]+)\}", text))
    assert specs.keys() == variants.keys() == {"P12", "P45"}
    for key, spec in specs.items():
        p = problems.get(key.lower())
        axes = parse_sweep(p, [spec])
        assert max(axes["batch_size"]) == p.defaults["batch_size"], "the series must reach KernelBench's size"
        assert {v.slug for v in p.ladder(variants[key].split(","))} >= {"eager"}


def test_gpu_session_probe_stage_runs_the_probes_with_their_options():
    text = (REPO / "devtools/gpu_session.sh").read_text()
    calls = re.findall(r"python3 -m \"\$m\" (.*?) 2>&1", text)
    assert calls, "the probe stage calls the Hopper probes"
    for module in (hopper_probe, hopper_probe_p45):
        assert module.__name__ in text
        for args in calls:
            with pytest.raises(SystemExit) as e:   # the options parse: --help exits 0
                module.main([*args.split(), "--help"])
            assert e.value.code == 0


def test_a_probe_says_where_a_broken_launch_broke_and_not_for_a_failed_check():
    def broken():
        raise RuntimeError("CUDA error:\n  an illegal memory access")

    try:
        broken()
    except RuntimeError as e:
        line = hopper_probe.failed(e)
    assert line.startswith("FAILED: RuntimeError: CUDA error: an illegal memory access (at ")
    assert "test_devtools.py:" in line and "\n" not in line
    try:
        raise AssertionError("full size: error 3.1e-06 over 1e-06")
    except AssertionError as e:
        assert hopper_probe.failed(e) == "FAILED: AssertionError: full size: error 3.1e-06 over 1e-06"


@pytest.mark.parametrize("args, wrong", [(["--rows", "0,4"], "must be integers >= 1"),
                                         (["--rows", "four"], "expected row counts"),
                                         (["--calls", "0"], "--calls='0': expected a number > 0"),
                                         (["--problem", "p99"], "invalid choice: 'p99'"),
                                         (["--also", "wgmma_fp16x3_splitk,nope"], "p12 has no step nope")])
def test_small_batch_probe_rejects_bad_arguments_in_one_line(args, wrong, capsys):
    with pytest.raises(SystemExit) as e:
        small_batch_probe.main(args)
    err = capsys.readouterr().err
    assert e.value.code == 2 and wrong in err and err.count("\n") == 1


def test_small_batch_probe_times_the_steps_the_by_batch_step_routes_to():
    assert small_batch_probe.steps(P12) == [
        "eager", "small_batch_stream", "wgmma_fp16x3", "triton_fp16x3", "faithful_by_batch"]
    assert small_batch_probe.steps(P45) == [
        "eager", "cublas_epilogues_vec4", "wgmma_fp16x3_lse", "triton_fused_lse_fp16x3", "faithful_by_batch"]
    # --also: a step no route names yet (p12's split-K step 18), timed in the same run, once each
    assert small_batch_probe.steps(P12, ["wgmma_fp16x3_splitk", "wgmma_fp16x3"]) == [
        "eager", "small_batch_stream", "wgmma_fp16x3", "triton_fp16x3", "wgmma_fp16x3_splitk",
        "faithful_by_batch"]


@pytest.mark.gpu
def test_small_batch_probe_times_a_step_four_ways_and_records_it(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    probe = common.Probe("small_batch_probe", rep_ms=50.0, records_path=tmp_path / "r.csv")
    row = small_batch_probe.probe_one(probe, P12, "triton_fp16x3", 4, 5)
    assert all(row[k] > 0 for k in ("host_ms", "gpu_b2b_ms", "isolated_ms", "harness_ms"))
    assert row["config"].startswith("64x")  # the few-row autotuning keeps 64-row tiles
    (rec,) = _rows(tmp_path).to_dict("records")
    assert rec["variant"] == "triton_fp16x3" and rec["median_ms"] == row["harness_ms"]
    assert re.search(r"host_ms=[\d.]+, gpu_b2b_ms=[\d.]+, isolated_ms=[\d.]+ over 5 calls", rec["notes"])


@pytest.mark.gpu
@pytest.mark.parametrize("module, sizes", [
    (hopper_probe, "batch_size=128,in_features=256,out_features=256"),
    (hopper_probe_p45, "batch_size=128,input_size=256,hidden_size=256,output_size=128")])
def test_hopper_probe_records_its_steps_and_launches(module, sizes, tmp_path):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs a Hopper (sm_90) GPU")
    assert module.main(["--sizes", sizes, "--rep-ms", "20", "--records", str(tmp_path / "r.csv")]) == 0
    rows = _rows(tmp_path)
    assert rows["run_id"].nunique() == 1 and rows["sizes"].eq(sizes).all()
    launches = rows[rows["notes"].str.startswith(common.LAUNCH)]
    assert len(launches) == 4 and launches["variant"].str.contains(":").all()
    steps = rows.drop(launches.index)
    hopper = {v.slug for v in module.P.variants.values() if v.source and "wgmma" in v.slug}
    assert hopper & set(steps["variant"]), "the Hopper steps are recorded"
    assert steps["notes"].str.contains("probe " + module.__name__.rsplit(".", 1)[1]).all()
