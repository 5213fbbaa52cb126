"""W transposed once per weight version (the shared weight cache), for a CUDA step that reads
the weight as Wt (K, N) instead of nn.Linear's W (N, K): lanes that walk along n then read
consecutive floats of one row of Wt.

Loaded like a step (``load_step("common", "transposed_weight.py")``); torch only, no Triton.
"""

from __future__ import annotations

from typing import Callable

import torch

from fusedkit.kernels import load_step

_weights = load_step("common", "weight_cache.py")  # one transposed copy per weight version


def transposed(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (N, K) as a new contiguous (K, N) tensor: one read and one write of W."""
    return weight.t().contiguous()


def call_wt(fn: Callable[..., torch.Tensor], x: torch.Tensor, weight: torch.Tensor,
            bias: torch.Tensor, *constants: float) -> torch.Tensor:
    """``fn(x, wt, bias, *constants)`` with wt = weight.T made contiguous, (K, N), once per
    weight version (an unchanged weight is not transposed again); x (M, K) as it is."""
    if weight.dim() != 2 or x.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"x must be 2-D with {weight.shape[-1]} columns (weight is (N, K) = "
                         f"{tuple(weight.shape)}), got shape {tuple(x.shape)}")
    return fn(x, _weights.cached(weight, "transposed", transposed), bias, *constants)
