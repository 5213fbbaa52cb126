"""KernelBench level 2, problem 45: ``Linear -> Sigmoid -> Linear -> logsumexp(dim=1)``.

x is (M, K) = (batch_size, input_size); W1 is (H, K), H = hidden_size; W2 is (N, H),
N = output_size. out[i] = logsumexp_j (sigmoid(x @ W1.T + b1) @ W2.T + b2)[i, j] is (M,).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.linalg import vector_norm

from fusedkit.build import load_extension
from fusedkit.precision import ErrorModel, Rounding, row_chunks
from fusedkit.problems.base import (Component, Dim, Problem, Route, Sizes, Stage, Variant, Weights,
                                     by_batch, discover_steps)
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
              eb * (m * k + h * k + h), eb * m * h, mnk=(m, h, k)),
        Stage("sigmoid", "elementwise", SIGMOID_FLOPS * m * h, eb * m * h, eb * m * h),
        Stage("linear2 (addmm)", "gemm", 2.0 * m * n * h + m * n,
              eb * (m * h + n * h + n), eb * m * n, mnk=(m, n, h)),
        Stage("logsumexp", "reduction", LSE_FLOPS * m * n + 2 * m, eb * m * n, eb * m),
    ]


def _min_bytes(s: Sizes, eb: int) -> float:
    m, k, h, n = s["batch_size"], s["input_size"], s["hidden_size"], s["output_size"]
    return eb * (m * k + h * k + h + n * h + n + m)


def _memory(s: Sizes, eb: int) -> float:
    # Eager holds x, both weights, the two hidden activations and the GEMM2 output.
    m, k, h, n = s["batch_size"], s["input_size"], s["hidden_size"], s["output_size"]
    return eb * (m * k + h * k + h + n * h + n + 2 * m * h + 2 * m * n + m)


def _absmax(t: torch.Tensor) -> torch.Tensor:
    """The largest magnitude in each row of ``t``, without a temporary of its size."""
    return torch.maximum(t.amax(1), -t.amin(1))


def _error_variance(model: nn.Module, seen: dict, out: torch.Tensor, r: Rounding) -> torch.Tensor:
    """The predicted sum over rows of each output's squared error (float64, 0-dim), from the
    float64 forward's x (``seen["linear1"]``'s input), h = sigmoid(x @ W1.T + b1) and
    z = h @ W2.T + b2 (``seen["linear2"]``); GEMM1's output a is recovered as logit(h), chunk by
    chunk (keeping it from the forward would hold it past the point where eager frees it).

    The logsumexp's derivative by each logit z_n is its softmax weight p_n, so an output's error
    is ``sum_n p_n * dz_n``. Each GEMM's products carry the operands' errors as in problem 12 (a
    random part of rms ``r.operand`` per operand, a one-signed part of at most ``r.bias``, fp32
    sums of K or H terms). Two kinds of logit error: those of h (its own rounding, the
    sigmoid's, and GEMM1's error times the sigmoid's slope h (1 - h)) are shared by every logit
    of a row, so they reach the output through ``wbar = p @ W2`` (one GEMM of GEMM2's size);
    those of W2's operands and of GEMM2's sums are each logit's own, and average
    with weights p_n**2. Truncation's one-signed part is added without cancellation:
    ``2 * bias * sum_n p_n |z_n - b2_n|``. The logsumexp itself: an fp32 sum of N exponentials
    (each within a few units in the last place) and four roundings of the output. Where a sum
    over j of ``h_j**2 * W2_nj**2`` (or over k, GEMM1's) is needed per output, the smaller of two
    bounds from row maxima and row sums stands in for it."""
    x, _ = seen["linear1"]
    h, z = seen["linear2"]
    b1, w2, b2 = model.linear1.bias, model.linear2.weight, model.linear2.bias
    w1 = model.linear1.weight
    k, hid, n = x.shape[1], h.shape[1], z.shape[1]
    op2, bias2, eps2 = r.operand**2, r.bias**2, r.accumulate**2
    # Row norms and maxima: no temporary of an operand's size.
    w1_sum, w1_max = vector_norm(w1, dim=1).pow(2), _absmax(w1).pow(2)   # per hidden unit
    w2_sum, w2_max = vector_norm(w2, dim=1).pow(2), _absmax(w2).pow(2)   # per logit
    x_sum, x_max = vector_norm(x, dim=1).pow(2), _absmax(x).pow(2)        # per row
    total = torch.zeros((), dtype=torch.float64, device=out.device)
    for rows in row_chunks(x.shape[0], hid + n):
        hc, zc = h[rows], z[rows]
        # logit(h); saturated units (h rounded to 0 or 1) have slope h (1 - h) ~ 0 anyway. Plain
        # elementwise ops: torch.logit and torch.softmax take milliseconds on a few rows of a
        # busy 2-core CPU (they split even tiny tensors across threads), and this runs per call.
        hs = hc.clamp(1e-15, 1 - 1e-15)
        ac = hs.log() - (-hs).log1p()
        terms1 = torch.minimum(x_max[rows, None] * w1_sum, x_sum[rows, None] * w1_max)
        var_a = ((2 * op2 + k * eps2) * terms1 + (4 * bias2 + k * eps2) * (ac - b1).pow(2)
                 + 2 * eps2 * ac.pow(2))
        var_h = (hc * (1 - hc)).pow(2) * var_a + (op2 + 16 * eps2) * hc.pow(2)
        p = (zc - zc.amax(1, keepdim=True)).exp_()
        p /= p.sum(1, keepdim=True)
        wbar = p @ w2
        shared = (wbar.pow(2) * var_h).sum(1)
        terms2 = torch.minimum(_absmax(hc)[:, None].pow(2) * w2_sum,
                               vector_norm(hc, dim=1, keepdim=True).pow(2) * w2_max)
        g2 = zc - b2
        own = (p.pow(2) * ((op2 + hid * eps2) * terms2 + hid * eps2 * g2.pow(2)
                           + 2 * eps2 * zc.pow(2))).sum(1)
        biased = (2 * r.bias * (p * g2.abs()).sum(1)).pow(2)
        lse = eps2 * (n + 4 * out[rows].pow(2) + 64 * p.pow(2).sum(1))
        total = total + (shared + own + biased + lse).sum()
    return total


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
    error_model=ErrorModel({"linear1": ("input",), "linear2": ("input", "output")},
                           _error_variance),
)

for _v in baseline_variants():
    PROBLEM.add_variant(_v)


# What every kernel step takes after x: W1 (H, K), b1 (H,), W2 (N, H), b2 (N,).
WEIGHTS = Weights(("linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"))


# The ladder: one idea per step, one kernel file per step (fusedkit/kernels/p45/), each with its
# sidecar NN_slug.step saying what the registry shows of it (base.discover_steps). The steps built
# for any device come here, the Hopper ones below.
_STEPS = discover_steps("p45", WEIGHTS)
for _v in _STEPS:
    if not _v.hopper:
        PROBLEM.add_variant(_v)

# -- on Hopper: step 07 (fp32-faithful, fp16x3) and 08 (kb-pass, one fp16 product) on the hand-written
# wgmma kernel --------------------------------------------------------------------------------------

# Built apart for sm_90a (fusedkit.build): on another GPU, or on a CPU, the runner skips them with
# one line (Variant.refusal, in the plan). Also named as a group for
# python -m devtools.hopper_probe_p45 and its tests. Each build hands the extension's two GEMMs to
# its operands module, common/fp16x3_lse.py or common/fp16_lse.py (x split or cast per call, the
# weights once per weight version, GEMM1, GEMM2, the combine): the module the exported KernelBench
# file runs too (fusedkit.export).
HOPPER_VARIANTS = tuple(v for v in _STEPS if v.hopper)
for _v in HOPPER_VARIANTS:
    PROBLEM.add_variant(_v)


# The fp32-faithful tier at every batch, by p12's one rule (fusedkit.results.route_rule): the
# lowest p90 at each point of the newest sweep that timed eager and steps 3, 5 and 7. The edge at
# 512 rows lies between the measured points 256 and 1024.
FAITHFUL_ROUTES = (
    Route(512, ("cublas_epilogues_vec4",), "16 to 256 rows: step 3 (cuBLAS fp32 and our float4 "
          "epilogues, launched from C++), the lowest p90 at each point of the newest sweep"),
    Route(None, ("wgmma_fp16x3_lse", "triton_fused_lse_fp16x3"), "from 1024 rows: step 7, the "
          "lowest p90 at each point of the newest sweep; off Hopper, step 5, which beat step 3 "
          "there from 1024 rows"),
)
PROBLEM.add_variant(Variant(
    9, "faithful_by_batch", "the fp32-faithful tier at every batch: steps 3, 7 and 5 by size",
    "each call goes to the step that won at its batch size in the recorded sweeps: cuBLAS fp32 "
    "with the float4 epilogues up to 512 rows, the wgmma fp16x3 pipeline above (the Triton one "
    "off Hopper)",
    by_batch(lambda: PROBLEM, FAITHFUL_ROUTES), precision="fp16x3", needs_gpu=True,
    routes=FAITHFUL_ROUTES))


def _lse_alone(vec4: bool, version: int = 3
               ) -> Callable[[Sizes, torch.device], tuple[Callable[[], object], float]]:
    """The bias + logsumexp row reduction on its own, on random GEMM2-sized logits (``version``
    of the float4 kernel: 1, 2 or 3, the current one)."""
    def make(sizes: Sizes, device: torch.device) -> tuple[Callable[[], object], float]:
        ext = load_extension("p45")
        m, n = sizes["batch_size"], sizes["output_size"]
        z = torch.randn(m, n, device=device) * 4
        b = torch.randn(n, device=device)
        # Reads z and b, writes one float per row: the fewest bytes this reduction can move.
        return (lambda: ext.lse_only(z, b, vec4, version)), 4.0 * (m * n + n + m)
    return make


def _sigmoid_alone(sizes: Sizes, device: torch.device) -> tuple[Callable[[], object], float]:
    """The bias + sigmoid epilogue (float4) on its own, in place on a random GEMM1 output."""
    ext = load_extension("p45")
    m, h = sizes["batch_size"], sizes["hidden_size"]
    y = torch.randn(m, h, device=device)
    b = torch.randn(h, device=device)
    return (lambda: ext.sigmoid_only(y, b, True)), 4.0 * (2 * m * h + h)


for _c in (Component("lse_scalar", "bias + logsumexp row reduction alone, scalar", _lse_alone(False)),
           Component("lse_vec4", "bias + logsumexp row reduction alone, float4", _lse_alone(True)),
           Component("lse_vec4_v1", "the float4 reduction's first version: expf in a branchy select",
                     _lse_alone(True, 1)),
           Component("lse_vec4_v2", "its second version: one ex2.approx per value, no branch",
                     _lse_alone(True, 2)),
           Component("sigmoid_vec4", "bias + sigmoid alone, float4, in place", _sigmoid_alone)):
    PROBLEM.components[_c.slug] = _c
