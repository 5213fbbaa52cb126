"""KernelBench level 2, problem 45: ``Linear -> Sigmoid -> Linear -> logsumexp(dim=1)``.

x is (M, K) = (batch_size, input_size); W1 is (H, K), H = hidden_size; W2 is (N, H),
N = output_size. out[i] = logsumexp_j (sigmoid(x @ W1.T + b1) @ W2.T + b2)[i, j] is (M,).
"""

from __future__ import annotations

import torch
from torch import nn

from fusedkit.problems.base import Dim, Problem, Sizes, Stage
from fusedkit.problems.baselines import baseline_variants


class Model(nn.Module):
    """Exactly KernelBench's reference model for problem 45."""

    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        x = torch.sigmoid(self.linear1(x))
        return torch.logsumexp(self.linear2(x), dim=1)


def _factory(batch_size: int, input_size: int, hidden_size: int, output_size: int) -> nn.Module:
    return Model(input_size, hidden_size, output_size)


# Elementwise conventions (negligible beside the GEMMs): sigmoid = 4 FLOPs (negate, exp,
# add, divide); logsumexp = 4 per element (max, subtract, exp, add) + 2 per row (log, add).
SIGMOID_FLOPS = 4
LSE_FLOPS = 4


def _stages(s: Sizes, eb: int) -> list[Stage]:
    m, k, h, n = s["batch_size"], s["input_size"], s["hidden_size"], s["output_size"]
    return [
        Stage("linear1 (addmm)", "gemm", 2.0 * m * h * k + m * h,
              eb * (m * k + h * k + h), eb * m * h),
        Stage("sigmoid", "elementwise", SIGMOID_FLOPS * m * h, eb * m * h, eb * m * h),
        Stage("linear2 (addmm)", "gemm", 2.0 * m * n * h + m * n,
              eb * (m * h + n * h + n), eb * m * n),
        Stage("logsumexp", "reduction", LSE_FLOPS * m * n + 2 * m, eb * m * n, eb * m),
    ]


def _min_bytes(s: Sizes, eb: int) -> float:
    m, k, h, n = s["batch_size"], s["input_size"], s["hidden_size"], s["output_size"]
    return eb * (m * k + h * k + h + n * h + n + m)


def _memory(s: Sizes, eb: int) -> float:
    # Eager holds x, both weights, the two hidden activations and the GEMM2 output.
    m, k, h, n = s["batch_size"], s["input_size"], s["hidden_size"], s["output_size"]
    return eb * (m * k + h * k + h + n * h + n + 2 * m * h + 2 * m * n + m)


PROBLEM = Problem(
    key="p45",
    slug="linear_sigmoid_linear_logsumexp",
    kernelbench_id=45,
    title="Linear -> Sigmoid -> Linear -> logsumexp",
    dims=(
        Dim("batch_size", 16384, "rows of x (M)"),
        Dim("input_size", 2048, "columns of x, GEMM1's reduction length (K)"),
        Dim("hidden_size", 4096, "GEMM1's outputs, GEMM2's reduction length (H)"),
        Dim("output_size", 1024, "GEMM2's outputs, the logsumexp length (N)"),
    ),
    constants={},
    model_factory=_factory,
    stage_counter=_stages,
    min_bytes_counter=_min_bytes,
    output_shape=lambda s: (s["batch_size"],),
    memory_counter=_memory,
)

for _v in baseline_variants():
    PROBLEM.add_variant(_v)
