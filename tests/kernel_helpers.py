"""What the CUDA-kernel tests of every problem share: marks, PTX patterns, error measure,
poisoned allocations, sentinel-guarded views and problem 45's random operands (one copy,
imported by the tests of each problem)."""

from __future__ import annotations

import math

import pytest
import torch

from fusedkit import build

LD_V4 = r"ld\.global(\.nc)?\.v4\.f32"
ST_V4 = r"st\.global\.v4\.f32"
SENTINEL = -12345.0

needs_nvcc = pytest.mark.skipif(not build.nvcc_available(),
                                reason="nvcc (CUDA toolkit) not found; PTX checks need it, not a GPU")
_GPU_MARKS = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA GPU (torch sees none); these run on a GPU machine, "
                                        "select them with -m gpu")]


def gpu_test(fn):
    """Mark a test `gpu` and skip it cleanly where torch sees no CUDA GPU."""
    for mark in _GPU_MARKS:
        fn = mark(fn)
    return fn


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64."""
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def poison_allocator(*shapes: tuple[int, ...]) -> None:
    """Fill blocks of the given sizes (the output's, the intermediates') with NaN and free them:
    PyTorch's caching allocator tends to hand those blocks out next, so an element a kernel
    forgets to write is NaN and shows in the result."""
    junk = [torch.full(s, float("nan"), device="cuda") for s in shapes]
    del junk


def guarded_view(M: int, N: int, offset: int, fill: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A (M, N) contiguous view that starts `offset` floats into a buffer whose other elements
    hold SENTINEL, so that a write outside the view is seen afterwards. Returns (buffer, view)."""
    buf = torch.full((M * N + offset + 8,), SENTINEL, device="cuda")
    t = buf[offset:offset + M * N].view(M, N)
    t.copy_(fill)
    return buf, t


def p45_inputs(m: int, k: int, h: int, n: int, seed: int, device: str = "cpu"):
    """Problem 45's operands at (M, K, H, N): x ~ U[0, 1) like KernelBench's get_inputs; weights
    and biases like nn.Linear's init, U(+-1/sqrt(fan_in)); drawn under ``seed`` on ``device``."""
    g = torch.Generator(device=device).manual_seed(seed)

    def uniform(*shape, bound):
        return (torch.rand(*shape, generator=g, device=device) * 2 - 1) * bound

    x = torch.rand(m, k, generator=g, device=device)
    w1, b1 = uniform(h, k, bound=1 / math.sqrt(k)), uniform(h, bound=1 / math.sqrt(k))
    w2, b2 = uniform(n, h, bound=1 / math.sqrt(h)), uniform(n, bound=1 / math.sqrt(h))
    return x, w1, b1, w2, b2
