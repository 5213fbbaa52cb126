# Computes: y = LeakyReLU((x @ W.T + b) * multiplier) in one Triton kernel, epilogue fused.
# Changed: tl.dot on tensor cores (ieee / tf32x3 / tf32) instead of hand-written SIMT tiles.
# Roofline: compute-bound; H200 datasheet floors tf32 0.28 ms, tf32x3 0.83 ms, ieee 2.05 ms.
"""Step 08 of problem 12: a fused Triton GEMM + epilogue in three dot precisions.

``linear_leakyrelu(x, weight, bias, multiplier, negative_slope, precision)`` runs on CUDA
tensors, and on CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1``). The
interpreter ignores ``input_precision`` (it computes every dot in full fp32 with numpy),
so on the CPU all three precisions give the same, fp32-accurate result: CPU runs check
the indexing, masks and epilogue, never the precision.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedkit.kernels import load_step

_base = load_step("common", "triton_base.py")  # interpreter flag, configs, tile order, dot loop
INTERPRET: bool = _base.INTERPRET  # decided when triton.jit decorates, i.e. at import
on_device = _base.on_device
check_inputs = load_step("common", "checks.py").check_linear
# Kernels read module-level JIT functions only, hence the aliases.
grouped_tile = _base.grouped_tile
dot_tile = _base.dot_tile

PRECISIONS = ("ieee", "tf32x3", "tf32")


# Shared memory per pipeline stage is 4 bytes * (BLOCK_M + BLOCK_N) * BLOCK_K; the H100/H200
# limit is ~227 KB per block, e.g. 128x128x64 is 64 KB/stage (3 stages fit, 4 do not) and
# 128x256x32 is 48 KB/stage (4 stages fit). Keys are (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps).
_GPU_SPACE = {
    # FMA path: no tensor cores, so moderate tiles and deeper pipelines hide load latency.
    "ieee": [(128, 128, 32, 3, 8), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 128, 16, 4, 8)],
    # 3 MMAs per chunk plus the operand split: 128x128x64 / 3 stages / 8 warps measured 1.43 ms.
    # (128x256, 64x256 and 128x64x64 at 4 warps spill registers in ptxas for sm_90a: left out.)
    "tf32x3": [(128, 128, 64, 3, 8), (128, 128, 32, 4, 8), (128, 128, 32, 3, 8), (64, 128, 64, 4, 4)],
    # 1 MMA per chunk: large tiles to raise the FLOP per loaded byte; 128x256x32 measured 0.44 ms.
    # (128x128x64 and 256x128x32 at 8 warps make ptxas serialize the wgmma pipeline, C7515.)
    "tf32": [(128, 256, 32, 3, 8), (128, 256, 32, 4, 8), (128, 128, 32, 4, 4), (64, 256, 32, 4, 4)],
}
_CONFIGS, _prune_by_precision = _base.autotune_space(_GPU_SPACE)


@triton.autotune(configs=_CONFIGS, key=["M", "N", "K", "INPUT_PRECISION"],
                 prune_configs_by={"early_config_prune": _prune_by_precision})
@triton.heuristics({"EVEN_K": lambda a: a["K"] % a["BLOCK_K"] == 0})
@triton.jit
def _linear_leakyrelu_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_b, stride_ym, stride_yn,
    multiplier, negative_slope,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid_m, pid_n = grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = dot_tile(x_ptr, w_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk,
                   pid_m, pid_n, INPUT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K)

    # --- fused epilogue on the fp32 accumulator, in eager's order: + b, * multiplier, LeakyReLU.
    offs_ym = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # unwrapped indices, for the masks
    offs_yn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    bias = tl.load(b_ptr + offs_yn * stride_b, mask=offs_yn < N, other=0.0)
    v = (acc + bias[None, :]) * multiplier
    v = tl.where(v > 0, v, v * negative_slope)  # torch's LeakyReLU: x if x > 0 else slope * x
    y_ptrs = y_ptr + offs_ym[:, None].to(tl.int64) * stride_ym + offs_yn[None, :] * stride_yn
    tl.store(y_ptrs, v, mask=(offs_ym[:, None] < M) & (offs_yn[None, :] < N))


def linear_leakyrelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                     multiplier: float, negative_slope: float,
                     precision: str = "tf32x3") -> torch.Tensor:
    """y = LeakyReLU((x @ weight.T + bias) * multiplier, negative_slope) in one Triton kernel.

    Args:
        x: (M, K) float32 activations.
        weight: (N, K) float32, ``nn.Linear.weight``; read as W.T through its strides (no copy).
        bias: (N,) float32.
        multiplier: scalar applied after the bias (computed in fp32).
        negative_slope: LeakyReLU slope for negative values (computed in fp32).
        precision: ``tl.dot`` input precision: "ieee" (fp32 FMAs, slow, exact fp32 products),
            "tf32x3" (default; three tf32 tensor-core passes, about fp32 accuracy) or
            "tf32" (one pass, fastest, ~1e-3 relative error).

    Returns:
        (M, N) float32, contiguous, on x's device.

    Any M, N, K >= 1 works (tails are masked); non-contiguous x, weight or bias are read
    through their strides. CUDA tensors, or CPU tensors under TRITON_INTERPRET=1, where
    ``precision`` has no effect (the interpreter computes every dot in full fp32).
    The first call for a new (M, N, K, precision) autotunes, which takes seconds.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: allowed values are {PRECISIONS}")
    m, n, k = check_inputs(x, weight, bias, multiplier, negative_slope)
    y = torch.empty((m, n), device=x.device, dtype=torch.float32)
    with on_device(x.device):
        _linear_leakyrelu_kernel[_base.tile_grid(m, n)](
            x, weight, bias, y, m, n, k,
            x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), bias.stride(0),
            y.stride(0), y.stride(1),
            float(multiplier), float(negative_slope),
            INPUT_PRECISION=precision,
        )
    return y
