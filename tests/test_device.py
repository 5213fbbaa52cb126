"""What a run measures beside its kernels (:mod:`fusedkit.device`): the ceilings, timed and
checked, and the clocks read by a background nvidia-smi; on a CPU, what can be shown there."""

import os
import stat
import subprocess
import sys
import time

import pytest
import torch

from fusedkit import ceilings, clocks, device, hardware, problems, records

P12, P45 = problems.get("p12"), problems.get("p45")
CTX = records.RunContext(run_id="20261202T000000Z-000003", timestamp="2026-12-02T00:00:00Z",
                         commit="abc1234", device="NVIDIA H200", driver="580.1", cuda="12.8",
                         torch="2.11.0", triton="3.5.0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the machine without a GPU")
def test_cli_ceilings_without_gpu_says_so():
    out = subprocess.run([sys.executable, "-m", "fusedkit", "ceilings"], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU is visible here" in lines[0], out.stderr
    with pytest.raises(ValueError, match="GPU measurements"):
        device.time_ceilings(CTX, device="cpu")


# --- on the GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_measured_ceilings_on_the_gpu(tmp_path):
    got = device.record_run([P12, P45], tmp_path / "records.csv")
    print("\n" + ceilings.table(got).to_string(index=False))
    gpu = hardware.detect_gpu().spec
    assert (got["rate"] > 0).all() and len(got) == 3 + 3 * len(ceilings.GEMM_OPERANDS)
    copy = got.loc[got["kind"] == "copy", "rate"].item()
    dram = got.loc[got["kind"] == "dram_read", "rate"].item()
    l2 = got.loc[got["kind"] == "l2_read", "rate"].item()
    assert copy < gpu.mem_gbps and dram < gpu.mem_gbps
    assert l2 > dram, f"L2 read {l2:.0f} GB/s is not above the DRAM read {dram:.0f} GB/s"
    # The datasheet's margin: its FP32 rate is at the maximum boost clock, its tensor rates at
    # a lower clock (1.83 GHz on the H200), which the GPU may exceed up to its maximum boost.
    boost = gpu.implied_clock_ghz("fp32") if gpu.flop_per_clock_sm else 1.0
    for r in got[got["kind"] == "gemm"].itertuples():
        unit = device._UNIT[r.operands]
        margin = boost / gpu.implied_clock_ghz(unit) if gpu.flop_per_clock_sm else 1.1
        assert r.rate < gpu.peak_tflops(unit) * margin, (r.operands, r.m, r.rate)
    for p in (P12, P45):
        f = ceilings.measured_floor(p, p.defaults, "fp16", got)
        assert f is not None and f.floor_ms > 0


def test_a_gemm_of_other_arithmetic_is_recorded_as_a_fact_not_raised(monkeypatch):
    # At one row cuBLAS runs "tf32" as a plain fp32 kernel (rel. error 1.5e-7 on the H200 at
    # m=1): before, time_gemm raised and a batch sweep from one row lost its whole series. The
    # CPU's torch.mm is plain fp32 whatever TF32's setting, the same mechanism.
    monkeypatch.setattr(device, "_cuda", lambda device: torch.device("cpu"))
    timing, _, fault = device.time_gemm(1, 64, 256, "tf32", "cpu", warmup_ms=1, rep_ms=5)
    assert timing.median_ms > 0
    assert fault.startswith("cuBLAS tf32 at m=1, n=64, k=256: rel. error ") and "\n" not in fault
    assert "more exact than tf32 arithmetic gives" in fault and ceilings.NOT_ITS_ARITHMETIC in fault
    assert device.time_gemm(1, 64, 256, "fp32", "cpu", warmup_ms=1, rep_ms=5)[2] == ""


def test_sampling_without_nvidia_smi_says_so_and_records_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(device.shutil, "which", lambda name: None)
    said = []
    with device.sampling("20261202T100000Z-aaaaaa", tmp_path / "clocks.csv", say=said.append):
        pass
    assert said == ["clocks: no nvidia-smi here; the SM clock and power of this run are not recorded"]
    assert not (tmp_path / "clocks.csv").exists()


FAKE_SMI = """#!/bin/sh
# A stand-in for nvidia-smi: lists its fields, answers a probe, then reads "forever".
case "$*" in
  *--help-query-gpu*) echo '"timestamp" "clocks.sm" "clocks.max.sm" "clocks.mem" "power.draw"'
                      echo '"power.limit" "temperature.gpu" "utilization.gpu" "clocks_event_reasons.active"'; exit 0 ;;
  *-lms*) i=0; while true; do
            echo "2026/12/02 10:00:00.$((100 + i)), 1755, 1980, 2619, 650.5, 700.00, 61, 100, 0x0000000000000004"
            i=$((i + 1)); sleep 0.05; done ;;
  *) echo "2026/12/02 10:00:00.000"; exit 0 ;;
esac
"""


def test_sampler_reads_a_background_nvidia_smi_and_stops_it(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(FAKE_SMI)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    said = []
    with device.sampling("20261202T100000Z-aaaaaa", tmp_path / "clocks.csv", say=said.append) as s:
        time.sleep(0.4)
    assert s._proc is None   # stopped
    back = clocks.read_clocks(tmp_path / "clocks.csv")
    assert len(back) >= 2 and (back["sm_mhz"] == 1755).all()
    assert said and "SM clock median 1755 MHz" in said[-1] and "100% of them" in said[-1]


