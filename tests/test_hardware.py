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
        assert s.mem_gbps > 500 and s.sms > 50 and s.l2_mb > 10


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
    print(f"\ndetected: {d.reason} sms={d.spec.sms} l2={d.spec.l2_mb:.1f} MB")


def test_measured_ceilings_are_labelled():
    s = hardware.spec("H200 SXM").with_measurements(mem_gbps=4300.0)
    assert s.measured and s.mem_gbps == 4300.0
