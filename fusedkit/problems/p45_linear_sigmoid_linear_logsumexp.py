"""KernelBench level 2, problem 45: ``Linear -> Sigmoid -> Linear -> logsumexp(dim=1)``.

x is (M, K) = (batch_size, input_size); W1 is (H, K), H = hidden_size; W2 is (N, H),
N = output_size. out[i] = logsumexp_j (sigmoid(x @ W1.T + b1) @ W2.T + b2)[i, j] is (M,).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from fusedkit.problems.base import (Component, Dim, Problem, Route, Sizes, Stage, Variant, by_batch,
                                     cuda_step, hopper_step, triton_step)
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


def _weights(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The model's own Linear weights, as every kernel step takes them: W1, b1, W2, b2."""
    return (model.linear1.weight.detach(), model.linear1.bias.detach(),
            model.linear2.weight.detach(), model.linear2.bias.detach())


def _cuda_step(function: str) -> Callable[[nn.Module], Callable[..., torch.Tensor]]:
    return cuda_step("p45", function, _weights)


def _triton_step(filename: str, function: str, **options: object
                 ) -> Callable[[nn.Module], Callable[..., torch.Tensor]]:
    return triton_step("p45", filename, function, _weights, **options)


# The ladder: one idea per step, one kernel file per step (fusedkit/kernels/p45/).
_STEPS = [
    Variant(1, "naive", "naive: one thread per output of each stage",
            "GEMM1 + sigmoid, GEMM2 + bias and the row logsumexp as three untiled kernels; every "
            "thread re-reads a row of its operands from memory", _cuda_step("naive"),
            needs_gpu=True, source="p45/01_naive.cu"),
    Variant(2, "cublas_epilogues", "cuBLAS GEMMs + fused bias-sigmoid + fused bias-logsumexp",
            "both GEMMs in cublasSgemm (PyTorch's handle and stream), the bias and sigmoid in one "
            "pass over h, the bias and logsumexp in one warp-per-row reduction",
            _cuda_step("cublas_epilogues"), needs_gpu=True, source="p45/02_cublas_epilogues.cu"),
    Variant(3, "cublas_epilogues_vec4", "cuBLAS GEMMs + float4 epilogues",
            "the two epilogue kernels with 16-byte loads and stores, several in flight per lane",
            _cuda_step("cublas_epilogues_vec4"), needs_gpu=True,
            source="p45/03_cublas_epilogues_vec4.cu"),
    Variant(3, "cublas_tf32_epilogues_vec4", "cuBLAS GEMMs on TF32 tensor cores + float4 epilogues",
            "step 3 with cuBLAS's TF32 math: eager TF32's GEMMs with one pass per epilogue",
            _cuda_step("cublas_tf32_epilogues_vec4"), precision="tf32", needs_gpu=True,
            source="p45/03_cublas_epilogues_vec4.cu"),
    *[Variant(4, f"triton_fused_lse_{prec}", f"Triton GEMMs, sigmoid and partial logsumexp fused, {prec} dots",
              "GEMM2's tiles reduce to per-row (max, sum-exp) pairs: the 16384x1024 logits are never "
              "written; a small kernel combines the pairs", 
              _triton_step("04_triton_fused_lse.py", "linear_sigmoid_linear_lse", precision=prec),
              precision={"ieee": "fp32"}.get(prec, prec), source="p45/04_triton_fused_lse.py",
              triton=True) for prec in ("ieee", "tf32x3", "tf32")],
    Variant(5, "triton_fused_lse_fp16x3", "fp16x3 Triton GEMMs with the fused epilogues",
            "x, W1, W2 split into fp16 hi + lo; GEMM1 writes sigmoid(h) already split, so GEMM2 "
            "needs no split pass of its own; fp32-faithful on fp16 tensor cores",
            _triton_step("05_triton_fp16x3_lse.py", "linear_sigmoid_linear_lse_fp16x3"),
            precision="fp16x3", source="p45/05_triton_fp16x3_lse.py", triton=True),
    *[Variant(6, f"triton_fused_lse_{prec}", f"Triton GEMMs on {prec} tensor cores, one product per term",
              f"x rounded to {prec} as GEMM1 loads it, the weights cast once (cached), h stored in "
              f"{prec}: one 16-bit MMA per chunk instead of three, fp32 sums",
              _triton_step("06_triton_fp16_lse.py", "linear_sigmoid_linear_lse_fp16", precision=prec),
              precision=prec, source="p45/06_triton_fp16_lse.py", triton=True)
      for prec in ("fp16", "bf16")],
]
for _v in _STEPS:
    PROBLEM.add_variant(_v)

# -- fp32-faithful on Hopper: step 07, the fp16x3 pipeline on the hand-written wgmma kernel --------

# Built apart for sm_90a (fusedkit.build): on another GPU, or on a CPU, the runner skips it with
# one line (fusedkit.check.device_refusal). Also named as a group for
# python -m fusedkit.devtools.hopper_probe_p45 and its tests. Its build hands the extension's two
# GEMMs to common/fp16x3_lse.py (x split per call, the weights once per weight version, GEMM1,
# GEMM2, the combine): the module the exported KernelBench file runs too (fusedkit.export).
HOPPER_VARIANTS = (
    Variant(7, "wgmma_fp16x3_lse", "fp32-faithful wgmma: both GEMMs on fp16x3 splits",
            "step 05's pipeline on p12 step 14's persistent wgmma kernel: GEMM1's epilogue "
            "writes sigmoid(h) already split, GEMM2's reduces each 128-column tile to per-row "
            "(max, sum-exp) pairs from the registers (quad shuffles); the combine as step 04",
            hopper_step("p45", ("wgmma_fp16x3_sigmoid_split", "wgmma_fp16x3_partial_lse"), _weights,
                        "fp16x3_lse.py", "call_fp16x3_lse"), precision="fp16x3", needs_gpu=True,
            source="p45/07_wgmma_fp16x3_lse.cu"),
)
for _v in HOPPER_VARIANTS:
    PROBLEM.add_variant(_v)


# The fp32-faithful tier at every batch (see p12's FAITHFUL_ROUTES): the bands rest on the
# recorded H200 batch sweeps that timed steps 3, 5 and 7 at every point (fusedkit.results.
# route_evidence). The edge at 512 rows lies between the measured points 256 and 1024.
FAITHFUL_ROUTES = (
    Route(512, ("cublas_epilogues_vec4",), "16 to 256 rows: step 3 (cuBLAS fp32 and our float4 "
          "epilogues, launched from C++) had the lowest median and p90 at every point; step 7's "
          "best calls were faster at 256 rows, but its spread is wide there (host-bound)"),
    Route(None, ("wgmma_fp16x3_lse", "triton_fused_lse_fp16x3"), "from 1024 rows step 7, the "
          "fastest by GPU time, median and p90 at every point; off Hopper, step 5, which beat "
          "step 3 from 1024 rows"),
)
PROBLEM.add_variant(Variant(
    8, "faithful_by_batch", "the fp32-faithful tier at every batch: steps 3, 7 and 5 by size",
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
        from fusedkit.build import load_extension  # noqa: PLC0415 - GPU mode only

        ext = load_extension("p45")
        m, n = sizes["batch_size"], sizes["output_size"]
        z = torch.randn(m, n, device=device) * 4
        b = torch.randn(n, device=device)
        # Reads z and b, writes one float per row: the fewest bytes this reduction can move.
        return (lambda: ext.lse_only(z, b, vec4, version)), 4.0 * (m * n + n + m)
    return make


def _sigmoid_alone(sizes: Sizes, device: torch.device) -> tuple[Callable[[], object], float]:
    """The bias + sigmoid epilogue (float4) on its own, in place on a random GEMM1 output."""
    from fusedkit.build import load_extension  # noqa: PLC0415 - GPU mode only

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
