"""KernelBench level 2, problem 12: ``Linear -> * multiplier -> LeakyReLU``.

x is (M, K) = (batch_size, in_features); W is (N, K) = (out_features, in_features);
y = LeakyReLU((x @ W.T + b) * multiplier, negative_slope) is (M, N).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from fusedkit.problems.base import Dim, Problem, Sizes, Stage, Variant
from fusedkit.problems.baselines import baseline_variants, tf32_matmul


class Model(nn.Module):
    """Exactly KernelBench's reference model for problem 12."""

    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        return self.leaky_relu(self.gemm(x) * self.multiplier)


def _factory(batch_size: int, in_features: int, out_features: int,
             multiplier: float, negative_slope: float) -> nn.Module:
    return Model(in_features, out_features, multiplier, negative_slope)


def _stages(s: Sizes, eb: int) -> list[Stage]:
    m, k, n = s["batch_size"], s["in_features"], s["out_features"]
    # Elementwise convention: one FLOP per multiply or add; LeakyReLU's select is free,
    # its multiply by the slope counts one.
    return [
        Stage("gemm + bias (addmm)", "gemm", 2.0 * m * n * k + m * n,
              eb * (m * k + n * k + n), eb * m * n),
        Stage("* multiplier", "elementwise", m * n, eb * m * n, eb * m * n),
        Stage("LeakyReLU", "elementwise", m * n, eb * m * n, eb * m * n),
    ]


def _min_bytes(s: Sizes, eb: int) -> float:
    m, k, n = s["batch_size"], s["in_features"], s["out_features"]
    return eb * (m * k + n * k + n + m * n)


def _memory(s: Sizes, eb: int) -> float:
    # Eager holds x, W, b, the GEMM output and the product at once (plus the result).
    m, k, n = s["batch_size"], s["in_features"], s["out_features"]
    return eb * (m * k + n * k + n + 3 * m * n)


def _addmm_alpha_beta(model: nn.Module) -> Callable[..., torch.Tensor]:
    """The notes' trick: fold the multiplier into cuBLAS's alpha and beta.

    (x @ W.T + b) * c == c * (x @ W.T) + c * b, so ``addmm(b, x, W.T, beta=c, alpha=c)``
    does the GEMM, the bias and the multiply in one call; LeakyReLU runs in place after.
    """
    lin, c = model.gemm, float(model.multiplier)
    slope = float(model.leaky_relu.negative_slope)

    @torch.no_grad()
    def run(x: torch.Tensor) -> torch.Tensor:
        with tf32_matmul(False):
            y = torch.addmm(lin.bias, x, lin.weight.t(), beta=c, alpha=c)
        return torch.nn.functional.leaky_relu_(y, slope)
    return run


PROBLEM = Problem(
    key="p12",
    slug="gemm_multiply_leakyrelu",
    kernelbench_id=12,
    title="Linear -> * multiplier -> LeakyReLU",
    dims=(
        Dim("batch_size", 1024, "rows of x (M)"),
        Dim("in_features", 8192, "columns of x, the reduction length (K)"),
        Dim("out_features", 8192, "rows of W, columns of y (N)"),
    ),
    constants={"multiplier": 2.0, "negative_slope": 0.1},
    model_factory=_factory,
    stage_counter=_stages,
    min_bytes_counter=_min_bytes,
    output_shape=lambda s: (s["batch_size"], s["out_features"]),
    memory_counter=_memory,
)

for _v in baseline_variants():
    PROBLEM.add_variant(_v)
PROBLEM.add_variant(Variant(
    0, "addmm_alpha_beta", "addmm with alpha = beta = multiplier, then LeakyReLU in place",
    "the multiply folded into cuBLAS's alpha/beta: one elementwise pass instead of two",
    _addmm_alpha_beta, precision="fp32", baseline=True))
