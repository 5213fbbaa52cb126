"""Step 0 of every ladder: PyTorch itself, the numbers every kernel is compared with.

- ``eager``: the reference model in fp32 with TF32 off (KernelBench's reference).
- ``eager_tf32``: the same with TF32 matmuls allowed (the one-line speed-up, and its error).
- ``compile``: ``torch.compile`` in its default mode.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
from torch import nn

from fusedkit.problems.base import Variant


@contextlib.contextmanager
def tf32_matmul(enabled: bool) -> Iterator[None]:
    """Allow or forbid TF32 in fp32 matmuls for the block, restoring the old setting.

    PyTorch's default has been ``allow_tf32 = False`` for matmuls since 1.12 (cuDNN
    convolutions keep TF32 on); the notebooks measure both settings rather than trust it.
    """
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def _eager(tf32: bool) -> Callable[[nn.Module], Callable[..., torch.Tensor]]:
    def build(model: nn.Module) -> Callable[..., torch.Tensor]:
        @torch.no_grad()
        def run(*inputs: torch.Tensor) -> torch.Tensor:
            with tf32_matmul(tf32):
                return model(*inputs)
        return run
    return build


def _compiled(model: nn.Module) -> Callable[..., torch.Tensor]:
    compiled = torch.compile(model)

    @torch.no_grad()
    def run(*inputs: torch.Tensor) -> torch.Tensor:
        with tf32_matmul(False):
            return compiled(*inputs)
    return run


def baseline_variants() -> list[Variant]:
    """Fresh baseline variants for one problem's registry."""
    return [
        Variant(0, "eager", "PyTorch eager, fp32 (TF32 off)",
                "the reference: one cuBLAS GEMM plus one kernel per elementwise op",
                _eager(False), precision="fp32", baseline=True),
        Variant(0, "eager_tf32", "PyTorch eager, TF32 matmuls on",
                "the same model with allow_tf32=True: tensor cores, 10-bit mantissas",
                _eager(True), precision="tf32", needs_gpu=True, baseline=True),
        Variant(0, "compile", "torch.compile (default mode)",
                "Inductor fuses the elementwise tail and calls cuBLAS for the GEMM",
                _compiled, precision="fp32", needs_gpu=True, baseline=True),
    ]
