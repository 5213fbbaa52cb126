"""The precision vocabulary (the arithmetic a variant declares, the tiers a check assigns), and
reduced-precision tensor-core inputs emulated on any device, to measure their error without a GPU.

A TF32 tensor-core product rounds each fp32 input to 10 explicit mantissa bits and accumulates
in (at least) fp32. Rounding the inputs here and multiplying in float64 isolates the input
rounding, which dominates at K in the thousands; the GPU's fp32 accumulation adds a little.
"""

from __future__ import annotations

import torch

# Which rate each arithmetic precision runs at (a field of fusedkit.hardware.GpuSpec).
# "tf32x3" is three TF32 products per multiply-add (hi*hi + hi*lo + lo*hi) to recover FP32
# accuracy: a third of the TF32 rate; "fp16x3" likewise on the fp16 tensor cores.
PRECISIONS: dict[str, str] = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops",
    "tf32x3": "tf32_tflops",
    "fp16x3": "bf16_tflops",   # fp16 and bf16 tensor rates are equal on these parts
    "fp16": "bf16_tflops",     # one fp16 product per multiply-add, fp32 accumulation
    "bf16": "bf16_tflops",
}
PASSES: dict[str, int] = {"tf32x3": 3, "fp16x3": 3}

TIERS: tuple[str, ...] = ("reference", "fp32-faithful", "kb-pass", "fast")
"""Precision tiers from the most to the least accurate (rules in :mod:`fusedkit.check`)."""
KERNEL_TIERS: tuple[str, ...] = TIERS[1:]
"""The tiers a kernel of ours can reach ("reference" is eager fp32 itself); a variant of one
tier also meets every later one."""


def to_tf32(t: torch.Tensor) -> torch.Tensor:
    """``t`` (float32) rounded to nearest to TF32's 10 explicit mantissa bits, still stored as
    float32: the low 13 bits of each value are cleared after adding half of their range."""
    if t.dtype != torch.float32:
        raise TypeError(f"t must be torch.float32, got {t.dtype}")
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32).view_as(t)


def to_fp16(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to nearest even to fp16 (10 explicit mantissa bits, as TF32, but a 5-bit
    exponent: magnitudes below 2**-14 lose bits, above 65504 overflow), stored as float32."""
    return t.half().float()


def to_bf16(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to nearest even to bf16 (7 explicit mantissa bits, fp32's exponent),
    stored as float32."""
    return t.bfloat16().float()


def tf32_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T + bias`` with x and weight rounded to TF32, accumulated in float64
    (returns float64): the input-rounding error of one TF32 GEMM, nothing else."""
    return to_tf32(x).double() @ to_tf32(weight).double().T + bias.double()
