"""The host side of problem 45's one-product Hopper step (08) and its bf16 twin: step 07's
pipeline (common/fp16x3_lse.py) with one 16-bit copy of each operand instead of fp16x3 splits,
around two compiled GEMMs, which the caller hands in (the Hopper extension's functions, or
stand-ins in a test). fp16 keeps 11 significant bits up to 65504; bf16 keeps 8, over fp32's range.

    x (M, K): cast per call, K padded by zeros to a multiple of 8 (TMA's 16-byte rows);
    W1 (H, K), W2 (N, H): cast once per weight version (the shared weight cache), W2's H padded
    by zeros to Hp, h's width; a weight whose cast holds inf or NaN is refused;
    GEMM1 writes h = sigmoid(x @ W1.T + b1) rounded once, (M, Hp), H padded to 64 with zero columns;
    GEMM2 reduces z = h @ W2.T + b2 to per-row (max, sum-exp) pairs of 128-column tiles, and
    common/lse.py's combine turns the pairs into out (M,).

Odd sizes need no other path: the casts pad K and H, TMA zero-fills the edge tiles, and a new
allocation is 16-byte aligned whatever the inputs' offsets or strides. One module for fusedkit's
build (``base.hopper_step``) and the exported KernelBench file. Loaded like a step
(``load_step("common", "fp16_lse.py")``).
"""

from __future__ import annotations

from typing import Callable

import torch

from fusedkit.kernels import load_step

_checks = load_step("common", "checks.py")
_fp16 = load_step("common", "fp16_operands.py")  # the cast with K padded, per call or per weight
_weights = load_step("common", "weight_cache.py")
_lse = load_step("common", "lse.py")  # the combine of the partial logsumexp pairs

H_ALIGN = 64
"""h's width Hp is H rounded up to this (the Hopper binding's kHopperPad, as in step 07)."""


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def weight_16bit_cached(weight: torch.Tensor, cols: int, name: str,
                        dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """``weight`` (R, C) as a contiguous (R, cols) copy in ``dtype`` (fp16 or bf16), zero columns
    past C, made once per weight version (the shared weight cache). Raises ValueError (one host
    sync per new weight, never per call) if the cast holds inf or NaN (fp16 overflows beyond 65504)."""
    def cast(w: torch.Tensor) -> torch.Tensor:
        w16 = _fp16.fp16_k_padded(w, cols, dtype)
        if not bool(torch.isfinite(w16).all()):
            raise ValueError(f"{name} holds inf or NaN in {dtype}: it holds magnitudes up to "
                             f"{torch.finfo(dtype).max:g}")
        return w16
    return _weights.cached(weight, f"{dtype} k={cols}", cast)


def call_fp16_lse(sigmoid: Callable[..., torch.Tensor],
                  partial_lse: Callable[..., tuple[torch.Tensor, torch.Tensor]],
                  x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                  b2: torch.Tensor, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """out[m] = logsumexp_n(sigmoid(x @ w1.T + b1) @ w2.T + b2)[m, n] through the two GEMMs:
    ``sigmoid(x16, w1_16, b1) -> h`` and ``partial_lse(h, w2_16, b2) -> (pmax, psum)``
    (binding_hopper.cpp's ``wgmma_fp16_sigmoid`` and ``wgmma_fp16_partial_lse``, which take
    either 16-bit type), then the combine. ``dtype``: the operands' and h's, fp16 or bf16.

    x (M, K), w1 (H, K), b1 (H,), w2 (N, H), b2 (N,): float32 on one device, any strides. Three
    launches and the cast of x, no host sync. A row of x holding inf or NaN (or, in fp16, a value
    beyond 65504) gives NaN or inf in that row of out.
    """
    _, k, h, _ = _checks.check_two_layers(x, w1, b1, w2, b2)
    kp = _round_up(k, _fp16.K_ALIGN)
    w1_16 = weight_16bit_cached(w1, kp, "w1", dtype)
    w2_16 = weight_16bit_cached(w2, _round_up(h, H_ALIGN), "w2", dtype)
    hid = sigmoid(_fp16.fp16_k_padded(x, kp, dtype), w1_16, b1)
    pmax, psum = partial_lse(hid, w2_16, b2)
    return _lse.combine_lse(pmax, psum)


def call_bf16_lse(sigmoid: Callable[..., torch.Tensor],
                  partial_lse: Callable[..., tuple[torch.Tensor, torch.Tensor]],
                  x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                  b2: torch.Tensor) -> torch.Tensor:
    """:func:`call_fp16_lse` on bf16 operands: step 08's bf16 twin."""
    return call_fp16_lse(sigmoid, partial_lse, x, w1, b1, w2, b2, torch.bfloat16)
