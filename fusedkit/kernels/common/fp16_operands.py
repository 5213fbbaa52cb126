"""The operands of a one-fp16-product Hopper step (wgmma fed by TMA): x cast to fp16 on every
call, W cast once per weight version (the shared weight cache), both with K padded by zero
columns to a multiple of 8, so that every row is 16 bytes long as TMA needs.

Loaded like a step (``load_step("common", "fp16_operands.py")``); torch only, no Triton.
"""

from __future__ import annotations

from typing import Callable

import torch

from fusedkit.kernels import load_step

_weights = load_step("common", "weight_cache.py")  # one fp16 copy per weight version

K_ALIGN = 8  # fp16 elements per 16 bytes: TMA copies rows whose stride is a multiple of 16 bytes


def fp16_k_padded(t: torch.Tensor, k_padded: int, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """``t`` (R, K) as a new contiguous (R, k_padded) tensor of ``dtype`` (fp16, or bf16: 2 bytes
    either way), zero columns past K, in one pass over ``t``. A fresh allocation is 16-byte
    aligned, as TMA needs; zero columns add nothing to x @ W.T, so padding K changes no result."""
    rows, k = t.shape
    if k_padded < k:
        raise ValueError(f"k_padded={k_padded} must be >= t.shape[1] = {k}")
    out = torch.empty((rows, k_padded), dtype=dtype, device=t.device)
    if k_padded > k:
        out[:, k:].zero_()
    out[:, :k].copy_(t)
    return out


def call_fp16(fn: Callable[..., torch.Tensor], x: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor, *constants: float) -> torch.Tensor:
    """``fn(x16, w16, b32, *constants)``: x (M, K) and weight (N, K) as fp16 with K padded to a
    multiple of :data:`K_ALIGN` (x per call, one extra pass over x; W once per weight version),
    bias (N,) as fp32. Odd M and N are the kernel's business (TMA zero-fills, masked stores)."""
    if x.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"x must be 2-D with {weight.shape[1]} columns (weight is (N, K) = "
                         f"{tuple(weight.shape)}), got shape {tuple(x.shape)}")
    k_padded = -(-weight.shape[1] // K_ALIGN) * K_ALIGN
    w16 = _weights.cached(weight, f"fp16 k={k_padded}", lambda w: fp16_k_padded(w, k_padded))
    return fn(fp16_k_padded(x, k_padded), w16, bias.float().contiguous(), *constants)
