# Computes: y = LeakyReLU((x @ W.T + b) * multiplier) to fp32 accuracy on fp16 tensor cores.
# Changed: x and W split into fp16 hi + lo (W once, cached); three fp16 MMAs per chunk, not tf32x3.
# Roofline: compute-bound; three fp16 passes at 989 TFLOP/s (H200 datasheet): 0.42 ms.
"""Step 09 of problem 12: an "fp16x3" GEMM that is fp32-faithful and faster than tf32x3.

x @ W.T = (xh @ Wh.T + (xh @ Wl.T + xl @ Wh.T) / 2048) / (s_x[m] * s_w[n]), with each
operand split row by row into fp16 ``hi`` and 2048-scaled ``lo`` (the split, its derivation
and the GEMM tile that adds each chunk's hi*hi outside the tensor cores are shared with
problem 45: ``common/fp16x3_split.py``). W's split is cached per weight version; x is split
on every call. The epilogue undoes the power-of-two row scales (exact multiplies), then
applies step 08's bias, multiplier and LeakyReLU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedkit.kernels import load_step

_base = load_step("common", "triton_base.py")  # interpreter flag, configs, tile order
_split = load_step("common", "fp16x3_split.py")  # the split, its weight cache, the GEMM tile
INTERPRET: bool = _base.INTERPRET  # decided when triton.jit decorates, i.e. at import
check_inputs = load_step("common", "checks.py").check_linear
K_ALIGN: int = _split.K_ALIGN  # K is padded (with zeros) to a multiple of this
Fp16x3Split = _split.Fp16x3Split
split_fp16x3 = _split.split_fp16x3
split_weight_cached = _split.split_weight_cached
clear_weight_cache = _split.clear_weight_cache
# Kernels read module-level JIT functions only, hence the aliases.
grouped_tile = _base.grouped_tile
fp16x3_tile = _split.fp16x3_tile
# Names p12's step 17 (in progress) still reads from this file; new code loads them from common.
_add_rn, _LO_SCALE, _on_device = _split._add_rn, _split.LO_SCALE, _base.on_device


_cfg = _base.make_config  # (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) -> Config with GROUP_M=8


# Four fp16 tiles per stage: 2 bytes * 2 * (BLOCK_M + BLOCK_N) * BLOCK_K; 64x128x64 is
# 48 KB (4 stages = 192 KB fit the ~227 KB limit), 128x128x64 is 64 KB (3 stages fit).
# Three fp32 accumulators live in registers (acc, cross, the chunk's hi*hi), so tiles stay
# at 128x128 or below: 3 * 64*128 / 128 threads = 192 accumulator registers per thread at
# 4 warps, out of 255; ptxas (sm_90a) fits every config below without spilling.
_GPU_CONFIGS = [
    _cfg(64, 128, 64, 4, 4),  # measured 0.93-0.96 ms at 1024x8192x8192 on the H200
    _cfg(64, 128, 64, 3, 8),
    _cfg(128, 64, 64, 4, 4),
    _cfg(128, 128, 64, 3, 8),
    _cfg(128, 128, 32, 4, 8),
    _cfg(64, 128, 32, 4, 4),
    _cfg(64, 128, 64, 3, 4),
]  # (64x256x32 at 8 warps spills registers in ptxas for sm_90a, so it is out.)
# One small config in the interpreter: a single config is never benchmarked.
_CONFIGS = [_cfg(*_base.INTERPRET_TILE)] if INTERPRET else _GPU_CONFIGS
# The unmasked K loop is only right if every BLOCK_K divides the padding multiple.
assert all(K_ALIGN % c.kwargs["BLOCK_K"] == 0 for c in _CONFIGS), "BLOCK_K must divide K_ALIGN"


def _prune_small_batches(configs: list[triton.Config], named_args: dict, **kwargs
                         ) -> list[triton.Config]:
    """Below one tile per SM, the smallest row tiles only (triton_base.small_batch_configs)."""
    sms = torch.cuda.get_device_properties(named_args["y_ptr"].device).multi_processor_count
    return _base.small_batch_configs(configs, named_args["M"], named_args["N"], sms)


@triton.autotune(configs=_CONFIGS, key=["M", "N", "K"],
                 prune_configs_by=None if INTERPRET else {"early_config_prune": _prune_small_batches})
@triton.jit
def _fp16x3_linear_leakyrelu_kernel(
    xh_ptr, xl_ptr, x_inv_ptr, wh_ptr, wl_ptr, w_inv_ptr, b_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_wn, stride_b, stride_ym,
    multiplier, negative_slope,
    USE_ASM_ADD: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # K here is the padded K, a multiple of BLOCK_K (see K_ALIGN): no masks along K.
    pid_m, pid_n = grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    v = fp16x3_tile(xh_ptr, xl_ptr, wh_ptr, wl_ptr, M, N, K, stride_xm, stride_wn,
                    pid_m, pid_n, USE_ASM_ADD, BLOCK_M, BLOCK_N, BLOCK_K)

    # --- epilogue: undo the split's power-of-two row scales (exact multiplies), then
    # eager's order: + b, * multiplier, LeakyReLU; one store.
    offs_ym = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # unwrapped indices, for the masks
    offs_yn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    x_inv = tl.load(x_inv_ptr + offs_ym, mask=offs_ym < M, other=1.0)
    w_inv = tl.load(w_inv_ptr + offs_yn, mask=offs_yn < N, other=1.0)
    v = v * x_inv[:, None] * w_inv[None, :]
    bias = tl.load(b_ptr + offs_yn * stride_b, mask=offs_yn < N, other=0.0)
    v = (v + bias[None, :]) * multiplier
    v = tl.where(v > 0, v, v * negative_slope)  # torch's LeakyReLU: x if x > 0 else slope * x
    y_ptrs = y_ptr + offs_ym[:, None].to(tl.int64) * stride_ym + offs_yn[None, :]
    tl.store(y_ptrs, v, mask=(offs_ym[:, None] < M) & (offs_yn[None, :] < N))


def linear_leakyrelu_fp16x3(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                            multiplier: float, negative_slope: float,
                            *, check_finite: bool = False) -> torch.Tensor:
    """y = LeakyReLU((x @ weight.T + bias) * multiplier, negative_slope), fp32-accurate on
    fp16 tensor cores (three fp16 dots on hi/lo splits of x and weight).

    Args:
        x: (M, K) float32 activations; split into fp16 hi/lo on every call.
        weight: (N, K) float32, ``nn.Linear.weight``. Its split is CACHED, keyed on
            (data_ptr, ``weight._version``, shape, strides, device) while the tensor is
            alive: in-place changes through the tensor (``copy_``, ``mul_``, optimizer
            steps) bump ``_version`` and force a new split. Changes that bypass the version
            counter (``weight.data.copy_(...)``, raw pointers, custom kernels) are NOT seen:
            call ``clear_weight_cache()`` after them. Pass the same tensor object each call
            (e.g. the nn.Parameter) so the cache can hit.
        bias: (N,) float32.
        multiplier: scalar applied after the bias (computed in fp32).
        negative_slope: LeakyReLU slope for negative values (computed in fp32).
        check_finite: raise ValueError if x holds inf or NaN. Off by default: the check
            waits for the GPU (one host sync per call, measured at 0.15 ms of idle GPU per
            call on the H200), and without it a row of x holding inf/NaN yields a NaN
            output row (its split's scale is NaN), never a finite wrong number.

    Returns:
        (M, N) float32, contiguous, on x's device.

    Any M, N, K >= 1; non-contiguous inputs are read through their strides. A weight with
    inf or NaN is always rejected (when it is split). CUDA tensors, or CPU tensors under
    TRITON_INTERPRET=1, where the hi*hi chunks are added with a plain add (the interpreter
    cannot run inline PTX) and every dot is exact-product fp32 numpy: CPU runs check the
    logic, not the tensor cores' rounding. The first call for new (M, N, K) autotunes.
    """
    m, n, _ = check_inputs(x, weight, bias, multiplier, negative_slope)
    ws = split_weight_cached(weight)
    xs = split_fp16x3(x, pad_cols_to=K_ALIGN)  # same padded K as the weight's split
    if check_finite:
        _split.reject_non_finite(xs, "x")
    y = torch.empty((m, n), device=x.device, dtype=torch.float32)
    with _base.on_device(x.device):
        _fp16x3_linear_leakyrelu_kernel[_base.tile_grid(m, n)](
            xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo, ws.inv_scale, bias, y,
            m, n, xs.hi.shape[1],  # the padded K
            xs.hi.stride(0), ws.hi.stride(0), bias.stride(0), y.stride(0),
            float(multiplier), float(negative_slope),
            USE_ASM_ADD=not INTERPRET,
        )
    return y
