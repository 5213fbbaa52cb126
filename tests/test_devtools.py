"""The GPU devtools still run: in Triton's interpreter on the CPU they check logic only."""

import subprocess
import sys

import pytest
import torch


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU run is the real probe")
@pytest.mark.parametrize("tool", ["probe_p12_tf32", "probe_tma_tf32"])
def test_probe_runs_in_the_interpreter(tool):
    out = subprocess.run([sys.executable, "-m", f"fusedkit.devtools.{tool}"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "rel. error" in out.stdout and "FAILED" not in out.stdout


def test_shell_tools_parse():
    from pathlib import Path

    for sh in Path(__file__).resolve().parents[1].glob("fusedkit/devtools/*.sh"):
        assert subprocess.run(["bash", "-n", str(sh)]).returncode == 0, sh


def test_gpu_session_sweep_defaults_name_real_variants_and_sizes():
    """A typo in the sweep stage's defaults would surface only on a lent GPU, costing device time."""
    import re
    from pathlib import Path

    from fusedkit import problems
    from fusedkit.sweep import parse_sweep

    text = (Path(__file__).resolve().parents[1] / "fusedkit/devtools/gpu_session.sh").read_text()
    specs = dict(re.findall(r"spec=\$\{SWEEP_(P\d+):-([^}]+)\}", text))
    variants = dict(re.findall(r"v=\$\{SWEEP_VARIANTS_(P\d+):-([^}]+)\}", text))
    assert specs.keys() == variants.keys() == {"P12", "P45"}
    for key, spec in specs.items():
        p = problems.get(key.lower())
        axes = parse_sweep(p, [spec])
        assert max(axes["batch_size"]) == p.defaults["batch_size"], "the series must reach KernelBench's size"
        assert {v.slug for v in p.ladder(variants[key].split(","))} >= {"eager"}


def test_probe_logs_are_read_as_they_print():
    from fusedkit import records as rec
    from fusedkit.devtools import probe_p12_tf32

    for path in sorted((rec.default_path().parent / "logs").glob("probe_p12_tf32_h200*.txt")):
        log = probe_p12_tf32.read_log(path)
        assert log["eager"] and all(0.1 < e < 1.0 for e in log["eager"])
        cfg = log["configs"]
        assert len(cfg) > 0 and cfg.loc[~cfg["failed"], "ms"].notna().all()
        assert cfg.loc[cfg["failed"], "ms"].isna().all()


def test_p45_hopper_probe_logs_are_read_as_they_print():
    from fusedkit import records as rec
    from fusedkit.devtools import hopper_probe_p45

    logs = sorted((rec.default_path().parent / "logs").glob("hopper_probe_p45_h200*.txt"))
    assert logs, "the notebook reads these logs"
    for path in logs:
        log = hopper_probe_p45.read_log(path)
        assert set(log["ptxas"]["kernel"]) == {"p45_wgmma_fp16x3_sigmoid_split_kernel",
                                              "p45_wgmma_fp16x3_partial_lse_kernel"}
        v = log["variants"].set_index("variant")
        assert {"eager", "wgmma_fp16x3_lse", "triton_fused_lse_fp16x3"} <= set(v.index)
        assert (v["ms"] > 0).all() and v.loc["eager", "x_eager"] == 1.0
        assert v.loc["wgmma_fp16x3_lse", "small_err"] < 1e-6 and v["small_err"].isna().sum() == 2
        launches = log["launches"].set_index("launch")
        assert list(launches.index) == ["x split", "GEMM1 + sigmoid + h split", "GEMM2 + partial lse",
                                        "combine"]
        assert (launches["ms"] > 0).all() and launches["tflops"].notna().sum() == 2


def test_p12_hopper_probe_logs_are_read_as_they_print():
    from fusedkit import records as rec
    from fusedkit.devtools import hopper_probe

    logs = sorted((rec.default_path().parent / "logs").glob("hopper_probe_h200_*.txt"))
    assert logs, "the notebook reads these logs"
    for path in logs:
        log = hopper_probe.read_log(path)
        steps = log["steps"].set_index("step")
        assert "cublas_fp16_epilogue" in steps.index and (steps["ms"] > 0).all()
        launches = log["launches"]
        if "wgmma_fp16x3_fused_split" in steps.index:   # logs from step 15 on time the launches
            assert list(launches["launch"]) == ["12: x split (Triton)", "12: GEMM", "13: x row scales",
                                                "13: GEMM, split in smem"]
            assert (launches["ms"] > 0).all() and launches["tflops"].notna().sum() == 2
        else:
            assert launches.empty


def test_p45_hopper_probe_log_reader_skips_failed_lines(tmp_path):
    from fusedkit.devtools import hopper_probe_p45

    path = tmp_path / "log.txt"
    path.write_text("# title\nvariant  small checks  err/f64  ms  TFLOP/s  x eager\n"
                    "eager                          -  2.90e-08   8.4128     49.0        -\n"
                    "wgmma_fp16x3_lse               FAILED: AssertionError: 3 NaN outputs\n")
    log = hopper_probe_p45.read_log(path)
    assert log["title"] == "title" and list(log["variants"]["variant"]) == ["eager"]
    assert log["launches"].empty and log["ptxas"].empty


def test_a_probe_says_where_a_broken_step_broke_and_not_for_a_failed_check():
    from fusedkit.devtools.hopper_probe import failed

    def broken():
        raise RuntimeError("CUDA error:\n  an illegal memory access")

    try:
        broken()
    except RuntimeError as e:
        line = failed(e)
    assert line.startswith("FAILED: RuntimeError: CUDA error: an illegal memory access (at ")
    assert "test_devtools.py:" in line and "\n" not in line
    try:
        raise AssertionError("full size: error 3.1e-06 over 1e-06")
    except AssertionError as e:
        assert failed(e) == "FAILED: AssertionError: full size: error 3.1e-06 over 1e-06"


def test_small_batch_probe_without_a_gpu_says_so_in_one_line(capsys):
    import torch

    from fusedkit.devtools import small_batch_probe

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the probe would run")
    assert small_batch_probe.main(["--rows", "4", "--calls", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["small_batch_probe: needs a CUDA GPU (torch sees none); run it on the GPU machine"]


@pytest.mark.parametrize("args, wrong", [(["--rows", "0,4"], "must be integers >= 1"),
                                         (["--rows", "four"], "expected row counts"),
                                         (["--calls", "0"], "an integer >= 1"),
                                         (["--problem", "p99"], "invalid choice: 'p99'")])
def test_small_batch_probe_rejects_bad_arguments_in_one_line(args, wrong, capsys):
    from fusedkit.devtools import small_batch_probe

    with pytest.raises(SystemExit) as e:
        small_batch_probe.main(args)
    assert e.value.code == 2 and wrong in capsys.readouterr().err


def test_small_batch_probe_times_the_steps_the_by_batch_step_routes_to():
    from fusedkit import problems
    from fusedkit.devtools import small_batch_probe

    assert small_batch_probe.steps(problems.get("p12")) == [
        "eager", "small_batch_stream", "triton_fp16x3", "wgmma_fp16x3", "faithful_by_batch"]
    assert small_batch_probe.steps(problems.get("p45")) == [
        "eager", "cublas_epilogues_vec4", "wgmma_fp16x3_lse", "triton_fused_lse_fp16x3", "faithful_by_batch"]


@pytest.mark.gpu
def test_small_batch_probe_times_a_step_four_ways():
    import torch

    from fusedkit import problems
    from fusedkit.devtools import small_batch_probe

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    row = small_batch_probe.probe_one(problems.get("p12"), "triton_fp16x3", 4, 5, torch.device("cuda"))
    assert all(row[k] > 0 for k in ("host_ms", "gpu_b2b_ms", "isolated_ms", "harness_ms"))
    assert row["config"].startswith("64x")  # the few-row autotuning keeps 64-row tiles
