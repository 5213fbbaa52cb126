"""The host side of problem 45's Hopper step (07): step 05's fp16x3 pipeline around two compiled
GEMMs, which the caller hands in (the Hopper extension's functions, or stand-ins in a test).

    x (M, K): split per call, K padded by zeros to a multiple of K_ALIGN (64);
    W1 (H, K), W2 (N, H): split once per weight version (the shared weight cache);
    GEMM1 writes h = sigmoid(x @ W1.T + b1) already split (one fixed scale 2**14, H padded to
    64 with zero columns), GEMM2 reduces z = h @ W2.T + b2 to per-row (max, sum-exp) pairs of
    128-column tiles, and common/lse.py's combine turns the pairs into out (M,).

One module for fusedkit's build (``base.hopper_step``) and the exported KernelBench file, so both
feed the kernels the very same operands. Loaded like a step (``load_step("common",
"fp16x3_lse.py")``).
"""

from __future__ import annotations

from typing import Callable

import torch

from fusedkit.kernels import load_step

_checks = load_step("common", "checks.py")
_split = load_step("common", "fp16x3_split.py")  # the split and its weight cache
_lse = load_step("common", "lse.py")  # the combine of the partial logsumexp pairs


def call_fp16x3_lse(sigmoid_split: Callable[..., tuple[torch.Tensor, torch.Tensor]],
                    partial_lse: Callable[..., tuple[torch.Tensor, torch.Tensor]],
                    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                    b2: torch.Tensor) -> torch.Tensor:
    """out[m] = logsumexp_n(sigmoid(x @ w1.T + b1) @ w2.T + b2)[m, n] through the two GEMMs:
    ``sigmoid_split(xh, xl, x_inv, w1h, w1l, w1_inv, b1) -> (hh, hl)`` and
    ``partial_lse(hh, hl, w2h, w2l, w2_inv, b2) -> (pmax, psum)`` (binding_hopper.cpp's
    ``wgmma_fp16x3_sigmoid_split`` and ``wgmma_fp16x3_partial_lse``), then the combine.

    x (M, K), w1 (H, K), b1 (H,), w2 (N, H), b2 (N,): float32 on one device (checked in one
    line, as step 05's wrapper does). Three launches and the x split, no host sync. A row of x
    holding inf or NaN gives NaN in that row of out; a weight holding one raises ValueError
    (checked once per weight version).
    """
    _checks.check_two_layers(x, w1, b1, w2, b2)
    w1s, w2s = _split.split_weight_cached(w1), _split.split_weight_cached(w2)
    xs = _split.split_fp16x3(x, pad_cols_to=_split.K_ALIGN)  # the weights' padded K
    hh, hl = sigmoid_split(xs.hi, xs.lo, xs.inv_scale, w1s.hi, w1s.lo, w1s.inv_scale, b1)
    pmax, psum = partial_lse(hh, hl, w2s.hi, w2s.lo, w2s.inv_scale, b2)
    return _lse.combine_lse(pmax, psum)
