"""Peak rates of the GPUs people learn on, each with the datasheet it comes from.

Rates are *dense* (no 2:4 sparsity) and in TFLOP/s; bandwidth in GB/s (1e9 bytes/s).
Datasheet peaks are leads, not ceilings you will reach: the notebooks measure a copy and a
large matrix product on the device at hand and use those where they exist.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from fusedkit.precision import PASSES, PRECISIONS

# Every published sheet quotes tensor-core rates "with sparsity" first; these are halved.
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-nvidia-us-2188504-web, 2021)"
_AMPERE_WP = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), table 3"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM and PCIe columns"
_HOPPER_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), table 3"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column"
_L40S = "NVIDIA L40S GPU datasheet (2023)"
_ADA_WP = "NVIDIA Ada GPU Architecture whitepaper v2.1 (2023), appendix A tables"
_B200 = "NVIDIA Blackwell Architecture Technical Brief (2024), HGX B200 at 1000 W"


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's datasheet numbers. Rates in TFLOP/s (dense), bandwidth in GB/s."""

    name: str
    fp32_tflops: float       # plain FP32 on the CUDA cores (FFMA), not tensor cores
    tf32_tflops: float       # TF32 tensor cores, dense
    bf16_tflops: float       # BF16 tensor cores with FP32 accumulation, dense
    mem_gbps: float          # device memory bandwidth
    l2_mb: float             # L2 cache in MB (1e6 bytes)
    sms: int                 # streaming multiprocessors
    memory_gb: float         # device memory in GB
    source: str              # where the numbers come from
    matches: tuple[str, ...] = ()   # substrings of torch's device name that identify it
    measured: bool = False   # True when fields were replaced by measurements on this device

    def peak_tflops(self, precision: str) -> float:
        """Peak rate of the unit that a ``precision`` (see :data:`PRECISIONS`) runs on."""
        unit = PRECISIONS.get(precision)
        if unit is None:
            raise ValueError(f"precision={precision!r} is not known; valid: {', '.join(PRECISIONS)}")
        return getattr(self, unit) / PASSES.get(precision, 1)

    def with_measurements(self, *, mem_gbps: float | None = None,
                          bf16_tflops: float | None = None) -> "GpuSpec":
        """A copy with measured ceilings in place of datasheet ones (labelled ``measured``)."""
        changes = {k: v for k, v in (("mem_gbps", mem_gbps), ("bf16_tflops", bf16_tflops)) if v}
        return replace(self, measured=True, **changes) if changes else self


SPECS: dict[str, GpuSpec] = {s.name: s for s in [
    GpuSpec("A100 SXM4 40GB", 19.5, 156.0, 312.0, 1555.0, 40.0, 108, 40.0,
            f"{_A100}; SMs and L2: {_AMPERE_WP}", ("A100-SXM4-40GB", "A100 SXM4 40GB")),
    GpuSpec("A100 SXM4 80GB", 19.5, 156.0, 312.0, 2039.0, 40.0, 108, 80.0,
            f"{_A100}; SMs and L2: {_AMPERE_WP}", ("A100-SXM4-80GB", "A100 SXM4 80GB", "A100 80GB")),
    GpuSpec("H100 SXM5", 67.0, 494.7, 989.4, 3350.0, 50.0, 132, 80.0,
            f"{_H100}; SMs and L2: {_HOPPER_WP}", ("H100 80GB HBM3", "H100 SXM", "H100-SXM")),
    GpuSpec("H100 PCIe", 51.0, 378.0, 756.0, 2000.0, 50.0, 114, 80.0,
            f"{_H100}; SMs and L2: {_HOPPER_WP}", ("H100 PCIe", "H100-PCIE")),
    GpuSpec("H200 SXM", 67.0, 494.7, 989.4, 4800.0, 50.0, 132, 141.0,
            f"{_H200}; SMs and L2 as H100 SXM5: {_HOPPER_WP}", ("H200",)),
    GpuSpec("L40S", 91.6, 183.0, 362.05, 864.0, 96.0, 142, 48.0,
            f"{_L40S}; SMs and L2: {_ADA_WP}", ("L40S",)),
    GpuSpec("RTX 4090", 82.6, 82.6, 165.2, 1008.0, 72.0, 128, 24.0,
            _ADA_WP, ("RTX 4090",)),
    GpuSpec("B200", 80.0, 1100.0, 2250.0, 8000.0, 126.0, 148, 180.0,
            f"{_B200}; L2 and SMs from the CUDA device query", ("B200",)),
]}

DEFAULT_GPU = "H200 SXM"   # what the notebooks assume when no GPU is present


def spec(name: str) -> GpuSpec:
    """The spec called ``name`` exactly (see :data:`SPECS`)."""
    try:
        return SPECS[name]
    except KeyError:
        raise ValueError(f"gpu={name!r} is not in the spec table; valid: {', '.join(SPECS)}") from None


def match_device_name(device_name: str) -> GpuSpec | None:
    """The spec whose identifying substring appears in a torch device name, or None."""
    for s in SPECS.values():
        if any(m.lower() in device_name.lower() for m in s.matches):
            return s
    return None


@dataclass(frozen=True)
class Detected:
    """The GPU the notebooks plan for, and why that one."""

    spec: GpuSpec
    present: bool     # a GPU of this kind is in this process
    reason: str       # one sentence for the notebook


def detect_gpu() -> Detected:
    """The current GPU's spec; falls back to :data:`DEFAULT_GPU` (stated, not silent).

    An unknown GPU keeps the default's rates but reports its own SM count and L2 size.
    """
    if not torch.cuda.is_available():
        return Detected(SPECS[DEFAULT_GPU], False,
                        f"No CUDA GPU here: the roofline uses the {DEFAULT_GPU} datasheet numbers.")
    props = torch.cuda.get_device_properties(0)
    found = match_device_name(props.name)
    l2_mb = getattr(props, "L2_cache_size", 0) / 1e6
    if found is None:
        base = SPECS[DEFAULT_GPU]
        guess = replace(base, name=props.name, sms=props.multi_processor_count,
                        l2_mb=l2_mb or base.l2_mb, source=f"unknown GPU; rates of {base.name}")
        return Detected(guess, True, f"{props.name} is not in the spec table: using "
                        f"{base.name}'s rates as a stand-in (add it to fusedkit.hardware.SPECS).")
    # The device's own SM count and L2 size beat the datasheet (variants differ).
    here = replace(found, sms=props.multi_processor_count, l2_mb=l2_mb or found.l2_mb)
    return Detected(here, True, f"Detected {props.name}: using the {found.name} datasheet.")
