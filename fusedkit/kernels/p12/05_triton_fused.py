# Computes y = LeakyReLU((x @ W.T + b) * multiplier, negative_slope) in ONE Triton kernel: a tiled tensor-core GEMM whose epilogue (bias, multiply, LeakyReLU) runs on the accumulator before the only store.
# Changed vs step 04 (hand-written shared-memory SIMT tiles): tl.dot issues the MMAs, in three precisions (ieee FMA / tf32x3 three passes / tf32 one pass); grouped tile order for L2 reuse; autotuned tiles.
# Roofline: compute-bound (~410 FLOP/byte at 1024x8192x8192). H200 datasheet floors: tf32 0.28 ms (494.7 TFLOP/s dense), tf32x3 three times that, 0.83 ms; ieee on the FP32 cores 2.05 ms (67 TFLOP/s).
"""Step 05 of problem 12: a fused Triton GEMM + epilogue in three dot precisions.

``linear_leakyrelu(x, weight, bias, multiplier, negative_slope, precision)`` runs on CUDA
tensors, and on CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1``). The
interpreter ignores ``input_precision`` (it computes every dot in full fp32 with numpy),
so on the CPU all three precisions give the same, fp32-accurate result: CPU runs check
the indexing, masks and epilogue, never the precision.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable

import torch
import triton
import triton.language as tl

PRECISIONS = ("ieee", "tf32x3", "tf32")


def _interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (read once, like triton.jit does)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:  # Triton >= 3.4 parses TRITON_INTERPRET itself ("1", "true", "on" ...)
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


# triton.jit decides at decoration time whether it builds a GPU kernel or an interpreted
# one, so the tile configurations are chosen at import time as well.
INTERPRET = _interpreting()




def _cfg(bm: int, bn: int, bk: int, stages: int, warps: int) -> triton.Config:
    # GROUP_M=8: eight row-blocks of tiles share each column-block of W while it sits in L2.
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                         num_stages=stages, num_warps=warps)


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
def _config_key(c: triton.Config) -> tuple[int, int, int, int, int]:
    kw = c.kwargs
    return (kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], c.num_stages, c.num_warps)


def autotune_space(space: dict[str, list[tuple[int, int, int, int, int]]]
                   ) -> tuple[list[triton.Config], Callable[..., list[triton.Config]]]:
    """The configs of one autotuner serving three precisions, and its pruner.

    ``space`` maps each precision to its (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) keys.
    On a GPU the configs are the union of the keys and the pruner keeps the call's
    INPUT_PRECISION subset; under the interpreter one small config (a single config is
    neither pruned nor benchmarked, and small tiles keep numpy's work cheap on test shapes).
    """
    def prune(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
        wanted = set(space[kwargs["INPUT_PRECISION"]])
        return [c for c in configs if _config_key(c) in wanted]

    if INTERPRET:
        return [_cfg(32, 32, 32, 1, 4)], prune
    keys = dict.fromkeys(k for p in PRECISIONS for k in space[p])  # union, in order
    return [_cfg(*k) for k in keys], prune


_CONFIGS, _prune_by_precision = autotune_space(_GPU_SPACE)


@triton.jit
def grouped_tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of this program in grouped order: consecutive programs walk GROUP_M
    row-blocks down one column of tiles before moving right, so the weight tiles they share
    are still in L2. (Shared by every tiled GEMM of the workbook; inlined by the compiler.)"""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)  # the last group may be short
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def dot_tile(a_ptr, w_ptr, M, N, K, stride_am, stride_ak, stride_wn, stride_wk, pid_m, pid_n,
             INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    """fp32 accumulator of A[tile rows] @ W[tile cols].T for A (M, K) and W (N, K), any strides.

    Rows/columns past M/N wrap around (% M, % N): the loads stay in bounds without masks,
    and the caller's store masks the wrapped results away."""
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    # int64 row offsets: M * stride_am or N * stride_wn can pass 2**31 elements on big inputs.
    # The A tile is (BLOCK_M, BLOCK_K); W is read as its transpose (BLOCK_K, BLOCK_N) through
    # the strides, no copy; with contiguous operands K is the unit-stride axis of both tiles.
    a_ptrs = a_ptr + (offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak)
    w_ptrs = w_ptr + (offs_k[:, None] * stride_wk + offs_n[None, :].to(tl.int64) * stride_wn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(w_ptrs)
        else:
            # Zero-fill past K so the tail chunk adds nothing to the dot product.
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        # "ieee": fp32 FMAs; "tf32": one tensor-core pass on 10-bit mantissas;
        # "tf32x3": big*big + big*small + small*big, three passes recovering ~fp32 accuracy.
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk
    return acc


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


def on_device(device: torch.device) -> contextlib.AbstractContextManager:
    """Triton launches on torch's current CUDA device: make it the tensors' device."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def check_inputs(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                 multiplier: float, negative_slope: float) -> tuple[int, int, int]:
    """Validate the operands of ``linear_leakyrelu``; return (M, N, K).

    Raises TypeError / ValueError with one line naming the parameter, its value and what
    is allowed. Non-contiguous tensors are accepted: kernels read them through strides.
    """
    for name, t in (("x", x), ("weight", weight), ("bias", bias)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != torch.float32:
            raise TypeError(f"{name}.dtype={t.dtype}: only torch.float32 is allowed")
    for name, t, ndim in (("x", x, 2), ("weight", weight, 2), ("bias", bias, 1)):
        if t.dim() != ndim:
            raise ValueError(f"{name} has shape {tuple(t.shape)}: it must be {ndim}-D")
    (m, k), (n, kw) = x.shape, weight.shape
    if kw != k:
        raise ValueError(f"weight.shape={tuple(weight.shape)} does not match x.shape={tuple(x.shape)}: "
                         f"weight must be (N, K) with K = x.shape[1] = {k}")
    if bias.shape[0] != n:
        raise ValueError(f"bias.shape={tuple(bias.shape)}: it must be (N,) = ({n},), weight's first dim")
    for name, size in (("M = x.shape[0]", m), ("K = x.shape[1]", k), ("N = weight.shape[0]", n)):
        if size == 0:
            raise ValueError(f"{name} is 0: empty inputs are not allowed (every dim must be >= 1)")
    devices = {x.device, weight.device, bias.device}
    if len(devices) != 1:
        raise ValueError(f"x, weight and bias must share one device, got x on {x.device}, "
                         f"weight on {weight.device}, bias on {bias.device}")
    if x.device.type != "cuda" and not INTERPRET:
        raise ValueError(f"x.device={x.device}: Triton kernels need CUDA tensors "
                         "(CPU tensors only under TRITON_INTERPRET=1, set before triton is imported)")
    if INTERPRET and x.device.type != "cpu":
        raise ValueError(f"x.device={x.device}: under TRITON_INTERPRET=1 the tensors must be on the CPU")
    for name, value in (("multiplier", multiplier), ("negative_slope", negative_slope)):
        # bool is an int subclass but surely a mistake here; tensors would force a sync.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name}={value!r}: must be a Python float or int")
    return m, n, k


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

    def grid(meta: dict) -> tuple[int]:
        # 1-D grid over all output tiles; the kernel remaps ids into GROUP_M-tall groups.
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    with on_device(x.device):
        _linear_leakyrelu_kernel[grid](
            x, weight, bias, y, m, n, k,
            x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), bias.stride(0),
            y.stride(0), y.stride(1),
            float(multiplier), float(negative_slope),
            INPUT_PRECISION=precision,
        )
    return y
