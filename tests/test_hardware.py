"""The GPU spec table and device detection."""

import pytest
import torch

from fusedkit import hardware

REQUIRED = ["A100 SXM4 40GB", "A100 SXM4 80GB", "H100 SXM5", "H100 PCIe", "H200 SXM", "L40S",
            "RTX 4090", "B200"]


def test_table_covers_the_required_gpus_with_sources():
    for name in REQUIRED:
        s = hardware.spec(name)
        assert any(w in s.source.lower() for w in ("datasheet", "whitepaper", "brief"))
        assert 0 < s.fp32_tflops <= s.tf32_tflops * 1.01 and s.tf32_tflops < s.bf16_tflops
        assert s.mem_gbps > 500 and s.sms > 50 and s.l2_mib > 10


def test_dense_not_sparse_rates():
    # The notes quoted sparsity figures (989 TF32, 1979 BF16 on H100); dense is half.
    h100 = hardware.spec("H100 SXM5")
    assert h100.tf32_tflops == pytest.approx(494.7) and h100.bf16_tflops == pytest.approx(989.4)
    assert hardware.spec("A100 SXM4 80GB").fp32_tflops == 19.5


def test_precision_rates():
    h200 = hardware.spec("H200 SXM")
    assert h200.peak_tflops("tf32x3") == pytest.approx(494.7 / 3)
    assert h200.peak_tflops("fp32") == 67.0
    with pytest.raises(ValueError, match="valid: fp32, tf32"):
        h200.peak_tflops("fp64")


def test_unknown_gpu_name_lists_valid():
    with pytest.raises(ValueError, match="valid: A100"):
        hardware.spec("V100")


@pytest.mark.parametrize("torch_name,expected", [
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA H100 80GB HBM3", "H100 SXM5"),
    ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA L40S", "L40S"), ("NVIDIA B200", "B200")])
def test_device_names_match(torch_name, expected):
    assert hardware.match_device_name(torch_name).name == expected


def test_unknown_device_name_is_none():
    assert hardware.match_device_name("Tesla T4") is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the no-GPU fallback")
def test_fallback_without_gpu_is_stated():
    d = hardware.detect_gpu()
    assert not d.present and d.spec.name == hardware.DEFAULT_GPU and "No CUDA GPU" in d.reason


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_detects_the_gpu_present():
    d = hardware.detect_gpu()
    props = torch.cuda.get_device_properties(0)
    assert d.present and d.spec.sms == props.multi_processor_count
    assert d.spec.l2_mib == props.L2_cache_size / 2**20   # MiB, as the table gives it
    print(f"\ndetected: {d.reason} sms={d.spec.sms} l2={d.spec.l2_mib:.1f} MiB")


def test_measured_ceilings_are_labelled():
    s = hardware.spec("H200 SXM").with_measurements(mem_gbps=4300.0)
    assert s.measured and s.mem_gbps == 4300.0


@pytest.mark.parametrize("precision,ghz", [("bf16", 1.830), ("fp16x3", 1.830), ("tf32", 1.830),
                                           ("fp32", 1.983)])
def test_datasheet_rates_imply_their_clock(precision, ghz):
    # The tensor figures hold at about 1.83 GHz; the FP32 one at the 1.98 GHz maximum boost.
    assert hardware.spec("H200 SXM").implied_clock_ghz(precision) == pytest.approx(ghz, abs=5e-4)


def test_implied_clocks_of_other_parts_and_unknown_figures():
    assert hardware.spec("A100 SXM4 80GB").implied_clock_ghz("bf16") == pytest.approx(1.41, abs=0.01)
    assert hardware.spec("L40S").implied_clock_ghz("fp32") == pytest.approx(2.52, abs=0.01)
    with pytest.raises(ValueError, match="no FLOP-per-clock figures"):
        hardware.spec("B200").implied_clock_ghz("bf16")
    with pytest.raises(ValueError, match="precision='fp8' is not known"):
        hardware.spec("H200 SXM").implied_clock_ghz("fp8")
