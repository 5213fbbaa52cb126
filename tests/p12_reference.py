"""Shared by problem 12's kernel tests: fresh inputs and the float64 yardstick."""

from __future__ import annotations

import math

import torch

from fusedkit.check import rel_error  # noqa: F401  (re-exported for the kernel tests)

MULT, SLOPE = 2.0, 0.1  # KernelBench's problem 12 constants


def make_inputs(m: int, n: int, k: int, seed: int, device: str = "cpu"):
    """x ~ U[0, 1) like KernelBench's get_inputs; W, b like nn.Linear's init, U(+-1/sqrt(K))."""
    g = torch.Generator(device=device).manual_seed(seed)
    bound = 1.0 / math.sqrt(k)
    x = torch.rand(m, k, generator=g, device=device)
    w = (torch.rand(n, k, generator=g, device=device) * 2 - 1) * bound
    b = (torch.rand(n, generator=g, device=device) * 2 - 1) * bound
    return x, w, b


def reference64(x, w, b, mult=MULT, slope=SLOPE) -> torch.Tensor:
    """The model in float64: the yardstick every variant's error is measured against."""
    y = (x.double() @ w.double().T + b.double()) * mult
    return torch.nn.functional.leaky_relu(y, slope)
