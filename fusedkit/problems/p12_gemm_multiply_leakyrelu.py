"""KernelBench level 2, problem 12: ``Linear -> * multiplier -> LeakyReLU``.

x is (M, K) = (batch_size, in_features); W is (N, K) = (out_features, in_features);
y = LeakyReLU((x @ W.T + b) * multiplier, negative_slope) is (M, N).
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
              eb * (m * k + n * k + n), eb * m * n, mnk=(m, n, k)),
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


def _error_variance(model: nn.Module, seen: dict, out: torch.Tensor, r: Rounding) -> torch.Tensor:
    """The predicted sum over all outputs of each output's squared error (float64, 0-dim), from
    the float64 GEMM's input x and output y = x @ W.T + b (``seen["gemm"]``).

    Each output is ``s * y`` with ``s`` the multiplier (times the slope where y < 0). Its dot
    product ``g = y - b`` sums K products ``x_k * w_k``, each off by the two operands' errors:
    a random part of rms ``r.operand`` (a random walk: variance ``2 u**2 * sum_k x_k**2 w_k**2``)
    and a one-signed part of at most ``r.bias`` each (``2 * bias * |g|``, no cancellation). The
    fp32 sum rounds each partial sum, K of them, of size between a random walk's and the drift
    to g: variance ``K * eps**2 * (sum_k x_k**2 w_k**2 + g**2)``. The epilogue rounds four times
    (bias, multiplier, slope, store): ``4 * eps**2 * y**2``. The random walk's sum over all
    outputs is bounded by the largest ``s`` times ``sum_k (sum_m x_mk**2) (sum_n w_nk**2)``, so
    nothing here is of the GEMM's cost."""
    x, y = seen["gemm"]
    w, b = model.gemm.weight, model.gemm.bias
    c, slope = float(model.multiplier), float(model.leaky_relu.negative_slope)
    k = x.shape[1]
    eps2 = r.accumulate**2
    # sum over m, n, k of x**2 w**2, as column norms (no temporary of x's or W's size)
    terms = (vector_norm(x, dim=0).pow(2) * vector_norm(w, dim=0).pow(2)).sum()
    total = (2 * r.operand**2 + k * eps2) * c**2 * max(1.0, slope**2) * terms
    for rows in row_chunks(y.shape[0], y.shape[1]):
        yc = y[rows]
        s2 = torch.where(yc > 0, c**2, (c * slope) ** 2)
        g2 = (yc - b).pow_(2)
        total = total + (s2 * ((4 * r.bias**2 + k * eps2) * g2 + 4 * eps2 * yc.pow(2))).sum()
    return total


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


# What every kernel step takes after x: W (N, K) and b (N,), then the multiplier and the slope.
WEIGHTS = Weights(("gemm.weight", "gemm.bias"), ("multiplier", "leaky_relu.negative_slope"))


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
    error_model=ErrorModel({"gemm": ("input", "output")}, _error_variance),
)

for _v in baseline_variants():
    PROBLEM.add_variant(_v)
PROBLEM.add_variant(Variant(
    0, "addmm_alpha_beta", "addmm with alpha = beta = multiplier, then LeakyReLU in place",
    "the multiply folded into cuBLAS's alpha/beta: one elementwise pass instead of two",
    _addmm_alpha_beta, precision="fp32", baseline=True))

# The ladder: one idea per step, one kernel file per step (fusedkit/kernels/p12/), each with its
# sidecar NN_slug.step saying what the registry shows of it (base.discover_steps). The steps built
# for any device come here; the Hopper ones below, after the cuBLAS fp16 bar they are measured against.
_STEPS = discover_steps("p12", WEIGHTS)
for _v in _STEPS:
    if not _v.hopper:
        PROBLEM.add_variant(_v)


# -- on Hopper: the wgmma steps (11-16, 18) and the cuBLAS fp16 bar -----------------------------


def _cublas_fp16_epilogue(model: nn.Module) -> Callable[..., torch.Tensor]:
    """cuBLAS's fp16 GEMM (fp16 operands, fp32 accumulation and output, through
    ``torch.mm(..., out_dtype=torch.float32)``) then step 04's float4 epilogue in place: the bar
    the wgmma steps are measured against. W is cast once at build, x per call. GPU only (the
    CPU build of torch has no fp16 x fp16 -> fp32 mm)."""
    ext = load_extension("p12")
    w, b, c, slope = WEIGHTS(model)
    w16 = w.half().contiguous()
    b32 = b.float().contiguous()

    def run(x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x.half(), w16.t(), out_dtype=torch.float32)
        return ext.epilogue_only(y, b32, c, slope, True)
    return run


# The Hopper steps, built apart for sm_90a (fusedkit.build): on another GPU, or on a CPU, the
# runner skips them with one line (Variant.refusal, in the plan). The cuBLAS fp16 bar runs on any
# GPU. Also named as a group for python -m devtools.hopper_probe and their tests.
HOPPER_VARIANTS = (
    Variant(0, "cublas_fp16_epilogue", "cuBLAS fp16 GEMM (fp32 accumulate) + float4 epilogue",
            "torch.mm on fp16 x and W with an fp32 output, then step 04's epilogue: the fp16 bar "
            "the wgmma steps are measured against", _cublas_fp16_epilogue, precision="fp16",
            needs_gpu=True, baseline=True),
    *(v for v in _STEPS if v.hopper),
)
for _v in HOPPER_VARIANTS:
    PROBLEM.add_variant(_v)

# The fp32-faithful tier at every batch: no one kernel wins everywhere, so this step hands each
# call to the step that won at its size. One rule for both problems (fusedkit.results.route_rule):
# at each point of the newest recorded sweep that timed eager and every step named here, the step
# whose slowest tenth of calls is fastest (the lowest p90). Each edge is the last measured point
# of its band; between measured points the choice is untested.
FAITHFUL_ROUTES = (
    Route(4, ("small_batch_stream",), "1 to 4 rows: the weight stream, the lowest p90 at each point "
          "of the newest sweep"),
    Route(None, ("wgmma_fp16x3", "triton_fp16x3"), "from 8 rows: step 14, the lowest p90 at each "
          "point of the newest sweep; off Hopper, step 9"),
)
PROBLEM.add_variant(Variant(
    19, "faithful_by_batch", "the fp32-faithful tier at every batch: steps 17 and 14 (9) by size",
    "each call goes to the step that won at its batch size in the recorded sweeps: the weight "
    "stream up to 4 rows, the wgmma fp16x3 kernel above (the Triton fp16x3 tiles off Hopper)",
    by_batch(lambda: PROBLEM, FAITHFUL_ROUTES), precision="fp16x3", needs_gpu=True,
    routes=FAITHFUL_ROUTES))


def _epilogue_alone(vec4: bool) -> Callable[[Sizes, torch.device], tuple[Callable[[], object], float]]:
    """The epilogue kernel on its own, in place on a random GEMM-sized output."""
    def make(sizes: Sizes, device: torch.device) -> tuple[Callable[[], object], float]:
        ext = load_extension("p12")
        m, n = sizes["batch_size"], sizes["out_features"]
        y = torch.randn(m, n, device=device)
        b = torch.randn(n, device=device)
        # Reads y and b, writes y: the fewest bytes this pass can move.
        return (lambda: ext.epilogue_only(y, b, 2.0, 0.1, vec4)), 4.0 * (2 * m * n + n)
    return make


for _c in (Component("epilogue_scalar", "bias + multiply + LeakyReLU alone, scalar", _epilogue_alone(False)),
           Component("epilogue_vec4", "bias + multiply + LeakyReLU alone, float4", _epilogue_alone(True))):
    PROBLEM.components[_c.slug] = _c
