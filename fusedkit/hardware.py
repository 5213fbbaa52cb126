"""Peak rates of the GPUs people learn on, each with the datasheet it comes from.

Rates are *dense* (no 2:4 sparsity) TFLOP/s, bandwidth GB/s (1e9 bytes/s): leads, not ceilings you
will reach. A datasheet rate is SMs x FLOP per clock per SM x a clock, and NVIDIA does not quote
every unit at the same clock: on the H100 and H200 SXM the FP32 figure (67 TFLOP/s) works out at
the 1.98 GHz maximum boost, the tensor figures (494.7 TF32, 989.4 FP16 / BF16) at about 1.83 GHz
(:meth:`GpuSpec.implied_clock_ghz`); under a long tensor-core load the GPU may run slower still.
The records' ``% of floor`` is taken against these figures; :mod:`fusedkit.ceilings` reads the
device's own measured ceilings for a ``% of measured`` beside it.
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


def precision_unit(precision: str) -> str:
    """The :class:`GpuSpec` rate of the unit ``precision`` runs on (``"tf32_tflops"``)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is not known; valid: {', '.join(PRECISIONS)}")
    return PRECISIONS[precision]


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's datasheet numbers. Rates in TFLOP/s (dense), bandwidth in GB/s."""

    name: str
    fp32_tflops: float       # plain FP32 on the CUDA cores (FFMA), not tensor cores
    tf32_tflops: float       # TF32 tensor cores, dense
    bf16_tflops: float       # BF16 tensor cores with FP32 accumulation, dense
    mem_gbps: float          # device memory bandwidth
    l2_mib: float            # L2 cache in MiB (2**20 bytes), as the CUDA device query gives it
    sms: int                 # streaming multiprocessors
    source: str              # where the numbers come from
    matches: tuple[str, ...] = ()   # substrings of torch's device name that identify it
    measured: bool = False   # True when fields were replaced by measurements on this device
    # Datasheet values: dense FLOP per clock per SM of the units behind fp32_tflops, tf32_tflops
    # and bf16_tflops (an FMA is 2 FLOP), from the architecture whitepaper; () where not known.
    flop_per_clock_sm: tuple[int, int, int] = ()

    def peak_tflops(self, precision: str) -> float:
        """Peak rate of the unit that a ``precision`` (see :data:`PRECISIONS`) runs on."""
        return getattr(self, precision_unit(precision)) / PASSES.get(precision, 1)

    def implied_clock_ghz(self, precision: str) -> float:
        """The SM clock (GHz) at which the datasheet's rate of ``precision``'s unit is reached: rate /
        (SMs x FLOP per clock per SM); H200 SXM: bf16 989.4e12 / (132 x 4096) = 1.83 GHz."""
        unit = precision_unit(precision)
        if not self.flop_per_clock_sm:
            raise ValueError(f"gpu={self.name!r} has no FLOP-per-clock figures in the spec table")
        per_clock = dict(zip(_UNITS, self.flop_per_clock_sm))[unit]
        return getattr(self, unit) * 1e12 / (self.sms * per_clock) / 1e9

    def with_measurements(self, *, mem_gbps: float) -> "GpuSpec":
        """A copy with the measured copy bandwidth in place of the datasheet's (labelled ``measured``)."""
        return replace(self, measured=True, mem_gbps=mem_gbps)


_UNITS = ("fp32_tflops", "tf32_tflops", "bf16_tflops")   # the order of flop_per_clock_sm
# Dense FLOP per clock per SM (FP32, TF32, FP16/BF16 with FP32 accumulation), whitepaper values:
_AMPERE_CLK = (128, 1024, 2048)   # 64 FP32 cores, 4 tensor cores of 256 FP16 FMA a clock
_HOPPER_CLK = (256, 2048, 4096)   # 128 FP32 cores, 4 tensor cores of 512 FP16 FMA a clock
_ADA_CLK = (256, 512, 1024)       # L40S (GeForce parts halve FP16 with FP32 accumulation)

SPECS: dict[str, GpuSpec] = {s.name: s for s in [
    GpuSpec("A100 SXM4 40GB", 19.5, 156.0, 312.0, 1555.0, 40.0, 108,
            f"{_A100}; SMs and L2: {_AMPERE_WP}", ("A100-SXM4-40GB", "A100 SXM4 40GB"),
            flop_per_clock_sm=_AMPERE_CLK),
    GpuSpec("A100 SXM4 80GB", 19.5, 156.0, 312.0, 2039.0, 40.0, 108,
            f"{_A100}; SMs and L2: {_AMPERE_WP}", ("A100-SXM4-80GB", "A100 SXM4 80GB", "A100 80GB"),
            flop_per_clock_sm=_AMPERE_CLK),
    GpuSpec("H100 SXM5", 67.0, 494.7, 989.4, 3350.0, 50.0, 132,
            f"{_H100}; SMs and L2: {_HOPPER_WP}", ("H100 80GB HBM3", "H100 SXM", "H100-SXM"),
            flop_per_clock_sm=_HOPPER_CLK),
    GpuSpec("H100 PCIe", 51.0, 378.0, 756.0, 2000.0, 50.0, 114,
            f"{_H100}; SMs and L2: {_HOPPER_WP}", ("H100 PCIe", "H100-PCIE"), flop_per_clock_sm=_HOPPER_CLK),
    GpuSpec("H200 SXM", 67.0, 494.7, 989.4, 4800.0, 50.0, 132,
            f"{_H200}; SMs and L2 as H100 SXM5: {_HOPPER_WP}", ("H200",), flop_per_clock_sm=_HOPPER_CLK),
    GpuSpec("L40S", 91.6, 183.0, 362.05, 864.0, 96.0, 142,
            f"{_L40S}; SMs and L2: {_ADA_WP}", ("L40S",), flop_per_clock_sm=_ADA_CLK),
    GpuSpec("RTX 4090", 82.6, 82.6, 165.2, 1008.0, 72.0, 128,
            _ADA_WP, ("RTX 4090",), flop_per_clock_sm=(256, 256, 512)),
    GpuSpec("B200", 80.0, 1100.0, 2250.0, 8000.0, 126.0, 148,
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
    return next((s for s in SPECS.values() if any(m.lower() in device_name.lower() for m in s.matches)), None)


@dataclass(frozen=True)
class Detected:
    """The GPU the notebooks plan for, and why that one."""

    spec: GpuSpec
    present: bool     # a GPU of this kind is in this process
    reason: str       # one sentence for the notebook


def detect_gpu() -> Detected:
    """The current GPU's spec; falls back to :data:`DEFAULT_GPU` (stated, not silent)."""
    if not torch.cuda.is_available():
        return Detected(SPECS[DEFAULT_GPU], False,
                        f"No CUDA GPU here: the roofline uses the {DEFAULT_GPU} datasheet numbers.")
    props = torch.cuda.get_device_properties(0)
    found = match_device_name(props.name)
    l2_mib = getattr(props, "L2_cache_size", 0) / 2**20
    if found is None:
        base = SPECS[DEFAULT_GPU]
        guess = replace(base, name=props.name, sms=props.multi_processor_count,
                        l2_mib=l2_mib or base.l2_mib, source=f"unknown GPU; rates of {base.name}",
                        flop_per_clock_sm=())
        return Detected(guess, True, f"{props.name} is not in the spec table: using "
                        f"{base.name}'s rates as a stand-in (add it to fusedkit.hardware.SPECS).")
    # The device's own SM count and L2 size beat the datasheet (variants differ).
    here = replace(found, sms=props.multi_processor_count, l2_mib=l2_mib or found.l2_mib)
    return Detected(here, True, f"Detected {props.name}: using the {found.name} datasheet.")
