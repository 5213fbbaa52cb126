"""Timing, the ladder runner and the command line."""

import subprocess
import sys

import pandas as pd
import pytest
import torch

from fusedkit import bench, records
from fusedkit.cli import main
from fusedkit.problems import get
from fusedkit.runner import run_ladder


def test_cpu_timing_is_labelled_and_ordered():
    t = bench.time_fn(lambda: torch.randn(64, 64) @ torch.randn(64, 64), warmup_ms=5, rep_ms=30,
                      device="cpu")
    assert t.timer == "cpu-wall" and t.repeats >= 3 and 0 < t.p10_ms <= t.median_ms <= t.p90_ms


def test_timing_rejects_bad_budgets():
    with pytest.raises(ValueError, match="rep_ms"):
        bench.time_fn(lambda: None, rep_ms=0, device="cpu")


def test_gpu_ceilings_refuse_cpu():
    with pytest.raises(ValueError, match="GPU measurement"):
        bench.copy_bandwidth_gbps(device="cpu")


def test_ladder_on_cpu_records_rows(tmp_path):
    path = tmp_path / "records.csv"
    p = get("p12")
    df = run_ladder(p, p.sizes(batch_size=8, in_features=64, out_features=16), seeds=2,
                    warmup_ms=1, rep_ms=10, records_path=path, progress=False)
    on_disk = records.read_records(path)
    gpu = torch.cuda.is_available()
    ran = {v.slug for v in p.ladder() if gpu or not v.needs_gpu}
    assert set(df["variant"]) == set(on_disk["variant"]) == ran
    assert (on_disk["timer"] == ("cpu-wall" if not torch.cuda.is_available() else "cuda-events")).all()
    assert df.loc[df["variant"] == "eager", "speedup"].item() == pytest.approx(1.0)
    assert (on_disk["median_ms"] > 0).all()
    # fp32 variants are faithful everywhere; on CPU the interpreter computes every precision in fp32
    fp32 = on_disk[on_disk["variant"].isin(["eager", "addmm_alpha_beta", "triton_ieee"])]
    assert fp32["tier"].isin(["reference", "fp32-faithful"]).all()


def test_cli_info_runs():
    out = subprocess.run([sys.executable, "-m", "fusedkit", "info"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "mode" in out.stdout and "torch" in out.stdout and "roofline gpu" in out.stdout


@pytest.mark.parametrize("argv,msg", [
    (["bench", "--problem", "p99"], "problem='p99' is not known; valid: p12, p45"),
    (["bench", "--problem", "p12", "--sizes", "batch_size=0"], "batch_size=0 is out of range"),
    (["bench", "--problem", "p12", "--sizes", "batch_size=x"], "batch_size='x' is not an integer"),
    (["bench", "--problem", "p12", "--variants", "eager,magic"], "variant='magic' is not a variant"),
    (["bench", "--problem", "p12", "--sizes", "batch_size=65536"], "GiB while checked and timed"),
])
def test_cli_bad_input_is_one_line(argv, msg, capsys):
    if "65536" in " ".join(argv) and torch.cuda.is_available():
        pytest.skip("CPU budget case")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_cli_bench_small_cpu(tmp_path, capsys):
    path = tmp_path / "r.csv"
    rc = main(["bench", "--problem", "p45", "--sizes",
               "batch_size=4,input_size=8,hidden_size=16,output_size=8",
               "--variants", "eager", "--seeds", "2", "--rep-ms", "5", "--records", str(path)])
    assert rc == 0
    assert "eager" in capsys.readouterr().out
    assert len(pd.read_csv(path)) == 1


def test_peak_memory_refuses_cpu():
    with pytest.raises(ValueError, match="device=cpu"):
        bench.peak_memory_mb(lambda: torch.ones(3), "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_peak_memory_counts_what_a_call_allocates():
    held = torch.rand(25_000_000, device="cuda")   # 100 MB allocated before: not counted
    n = int(torch.randint(10_000_000, 20_000_000, ()).item())

    def call():
        tmp = torch.rand(n, device="cuda")          # a temporary, freed inside the call
        return tmp[: n // 2].clone()                # the output, held until measured
    mb = bench.peak_memory_mb(call, "cuda")
    expect = 4 * (n + n // 2) / 1e6
    assert expect <= mb < expect + 5, (mb, expect)
    assert held.numel() == 25_000_000


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU default")
def test_cpu_bench_records_to_the_ignored_local_file(tmp_path, monkeypatch, capsys):
    tracked = tmp_path / "data" / "records.csv"
    monkeypatch.delenv("FUSEDKIT_RECORDS", raising=False)
    monkeypatch.setattr(records, "default_path", lambda: tracked)
    rc = main(["bench", "--problem", "p12", "--sizes", "batch_size=4,in_features=8,out_features=8",
               "--variants", "eager", "--seeds", "1", "--rep-ms", "2"])
    assert rc == 0, capsys.readouterr().err
    assert not tracked.exists()
    local = records.read_records(tmp_path / "data" / "local" / "records.csv")
    assert list(local["variant"]) == ["eager"] and (local["timer"] == "cpu-wall").all()


def test_a_caught_variant_is_named_not_recorded_and_fails_the_bench(tmp_path, monkeypatch, capsys):
    import dataclasses

    import adversarial as bad
    p = get("p12")
    monkeypatch.setitem(p.variants, "addmm_alpha_beta",
                        dataclasses.replace(p.variants["addmm_alpha_beta"], build=bad.caching))
    path = tmp_path / "r.csv"
    rc = main(["bench", "--problem", "p12", "--sizes", "batch_size=8,in_features=16,out_features=8",
               "--variants", "eager,addmm_alpha_beta", "--seeds", "1", "--rep-ms", "2",
               "--records", str(path)])
    err = capsys.readouterr().err
    assert rc == 1 and "not recorded: addmm_alpha_beta" in err and "result reuse" in err
    assert list(records.read_records(path)["variant"]) == ["eager"]
