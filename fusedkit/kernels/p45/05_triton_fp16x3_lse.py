# Computes: out = logsumexp(sigmoid(x @ W1.T + b1) @ W2.T + b2) to fp32 accuracy on fp16 tensor cores.
# Changed: both GEMMs on fp16x3 splits (weights cached); GEMM1's epilogue writes h already split.
# Roofline: compute-bound; three fp16 passes at 989 TFLOP/s (H200 datasheet): 1.25 ms.
"""Step 05 of problem 45: the step 04 pipeline on fp16 tensor cores ("fp16x3"), fp32-faithful.

The split is problem 12's (step 09; shared in ``common/fp16x3_split.py``): a float32 matrix A becomes
A = (hi + lo / 2048) * inv_scale[row], hi and lo fp16, so that A @ B.T is three fp16 GEMMs,
hi@hi + (hi@lo + lo@hi) / 2048, each chunk's hi*hi added to the fp32 accumulator outside
the tensor cores (an opaque ``add.rn.f32``) because their own accumulation truncates.

    x  (M, K): split per call, one power-of-two scale per row from the row's max;
    W1 (H, K), W2 (N, H): split once per weight version and cached (the shared cache);
    h  (M, H): split by GEMM1's epilogue, with ONE fixed scale 2**14 for every row.

Why a fixed scale works for h: h = sigmoid(.) lies in [0, 1], so hs = h * 2**14 lies in
[0, 2**14]: the top of the range is exactly where problem 12's per-row split puts each
row's max, far below fp16's largest value 65504, so nothing overflows, and no row max is
needed (a max would need the whole row of h, which no GEMM1 tile holds). Values
h >= 2**-28 land on normal fp16 numbers (hs >= 2**-14) and keep hi's 11 + lo's 11 bits,
~2**-22 relative. Below that, hi and lo are subnormal and the absolute error is at most
half lo's spacing, 2**-25, divided by 2048 and 2**14: 2**-50 in h. Such values (logits
below about -17 give h < 2**-24) are negligible anyway beside the O(1) entries of the
same row of h, in an fp32 dot product whose terms have magnitude ~ |W2| <= 1/sqrt(H).

Runs on CUDA tensors, and on CPU tensors under Triton's interpreter, where the hi*hi
chunks are added with a plain add (no inline PTX there) and every dot is fp32 numpy:
CPU runs check the logic (splits, padding, masks, epilogues), not the tensor cores.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedkit.kernels import load_step

_base = load_step("common", "triton_base.py")  # interpreter flag, configs, tile order
_checks = load_step("common", "checks.py")
_split = load_step("common", "fp16x3_split.py")  # the split, its weight cache, the GEMM tile
_lse = load_step("common", "lse.py")  # the partial logsumexp epilogue and the combine
INTERPRET: bool = _base.INTERPRET
Fp16x3Split = _split.Fp16x3Split
split_fp16x3 = _split.split_fp16x3
split_weight_cached = _split.split_weight_cached
clear_weight_cache = _split.clear_weight_cache
K_ALIGN: int = _split.K_ALIGN  # K and H are padded (with zeros) to a multiple of this
check_inputs = _checks.check_two_layers
combine_lse = _lse.combine_lse

# Kernels may only read module-level JIT functions and constexprs.
_fp16x3_tile = _split.fp16x3_tile
_LO_SCALE = _split.LO_SCALE  # 2**11
_grouped_tile = _base.grouped_tile
_sigmoid = _base.sigmoid
_partial_lse_store = _lse.partial_lse_store
H_SCALE = 2.0**14  # the fixed scale of h's split (see the module docstring)
_H_SCALE = tl.constexpr(H_SCALE)

_cfg = _base.make_config  # (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) -> Config with GROUP_M=8
# Problem 12's fp16x3 tiles (four fp16 tiles per stage, three fp32 accumulators in
# registers), measured there and compiled without spills for sm_90a: 64x128x64 is 48 KB a
# stage (4 stages fit), 128x128x64 is 64 KB (3 stages fit).
_GPU_CONFIGS = [
    _cfg(64, 128, 64, 4, 4),
    _cfg(128, 128, 64, 3, 8),
    _cfg(128, 128, 32, 4, 8),
    _cfg(64, 128, 32, 4, 4),
]
_CONFIGS = [_cfg(*_base.INTERPRET_TILE)] if INTERPRET else _GPU_CONFIGS
# The unmasked K loop is only right if every BLOCK_K divides the padding multiple.
assert all(K_ALIGN % c.kwargs["BLOCK_K"] == 0 for c in _CONFIGS), "BLOCK_K must divide K_ALIGN"
MIN_BLOCK_N = min(c.kwargs["BLOCK_N"] for c in _CONFIGS)


# ----------------------------------------------------------------------------------------
# 1. GEMM1 + bias + sigmoid, storing h already split: hh, hl (M, H_pad) fp16
# ----------------------------------------------------------------------------------------
@triton.autotune(configs=_CONFIGS, key=["M", "N", "K"])
@triton.jit
def _fp16x3_linear_sigmoid_split_kernel(
    xh_ptr, xl_ptr, x_inv_ptr, wh_ptr, wl_ptr, w_inv_ptr, b_ptr, hh_ptr, hl_ptr,
    M, N, K,
    stride_xm, stride_wn, stride_b, stride_hm,
    USE_ASM_ADD: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # N is the hidden size H, K the padded input size.
    pid_m, pid_n = _grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    v = _fp16x3_tile(xh_ptr, xl_ptr, wh_ptr, wl_ptr, M, N, K, stride_xm, stride_wn,
                     pid_m, pid_n, USE_ASM_ADD, BLOCK_M, BLOCK_N, BLOCK_K)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # unwrapped, for masks and loads
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = offs_m < M
    col_ok = offs_n < N
    # Undo the operand splits' power-of-two row scales (exact), add the bias, sigmoid.
    x_inv = tl.load(x_inv_ptr + offs_m, mask=row_ok, other=1.0)
    w_inv = tl.load(w_inv_ptr + offs_n, mask=col_ok, other=1.0)
    bias = tl.load(b_ptr + offs_n * stride_b, mask=col_ok, other=0.0)
    h = _sigmoid(v * x_inv[:, None] * w_inv[None, :] + bias[None, :])
    # Split h for GEMM2 (same rounding as p12's split kernel): hs = h * 2**14 is exact,
    # hi = fp16(hs) rounds to nearest even, hs - hi and * 2048 are exact, lo rounds once.
    hs = h * _H_SCALE
    hi = hs.to(tl.float16)
    lo = ((hs - hi.to(tl.float32)) * _LO_SCALE).to(tl.float16)
    dst = offs_m[:, None].to(tl.int64) * stride_hm + offs_n[None, :]
    mask = row_ok[:, None] & col_ok[None, :]
    tl.store(hh_ptr + dst, hi, mask=mask)
    tl.store(hl_ptr + dst, lo, mask=mask)


# ----------------------------------------------------------------------------------------
# 2. GEMM2 on the split h and W2 + bias + partial logsumexp: pmax, psum (M, T)
# ----------------------------------------------------------------------------------------
@triton.autotune(configs=_CONFIGS, key=["M", "N", "K"])
@triton.jit
def _fp16x3_linear_partial_lse_kernel(
    hh_ptr, hl_ptr, h_inv_ptr, wh_ptr, wl_ptr, w_inv_ptr, b_ptr, pmax_ptr, psum_ptr,
    M, N, K,
    stride_hm, stride_wn, stride_b, stride_pm, stride_pt, stride_sm, stride_st,
    USE_ASM_ADD: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # N is the output size, K the padded hidden size.
    pid_m, pid_n = _grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    v = _fp16x3_tile(hh_ptr, hl_ptr, wh_ptr, wl_ptr, M, N, K, stride_hm, stride_wn,
                     pid_m, pid_n, USE_ASM_ADD, BLOCK_M, BLOCK_N, BLOCK_K)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    h_inv = tl.load(h_inv_ptr + offs_m, mask=offs_m < M, other=1.0)
    w_inv = tl.load(w_inv_ptr + offs_n, mask=offs_n < N, other=1.0)
    bias = tl.load(b_ptr + offs_n * stride_b, mask=offs_n < N, other=0.0)
    z = v * h_inv[:, None] * w_inv[None, :] + bias[None, :]
    _partial_lse_store(z, offs_m, offs_n, M, N, pid_n, pmax_ptr, psum_ptr,
                       stride_pm, stride_pt, stride_sm, stride_st)


# ----------------------------------------------------------------------------------------
# Wrappers
# ----------------------------------------------------------------------------------------
def linear_sigmoid_split(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                         *, check_finite: bool = False) -> Fp16x3Split:
    """h = sigmoid(x @ w1.T + b1) on fp16 tensor cores, returned as its fp16x3 split.

    Args:
        x: (M, K) float32, split per call; w1: (H, K) float32, split cached (see
            ``linear_sigmoid_linear_lse_fp16x3``); b1: (H,) float32.
        check_finite: raise ValueError if x holds inf or NaN (one host sync); off by
            default, when such rows of h come out NaN.

    Returns:
        Fp16x3Split(hi, lo, inv_scale): hi, lo (M, H_pad) float16, H_pad = H rounded up to
        K_ALIGN, columns H.. zero; inv_scale (M,) all 2**-14. h = (hi + lo/2048) * 2**-14.
    """
    m, k, h = _checks.check_layer("x", x, "w1", w1, "b1", b1)
    ws = split_weight_cached(w1)
    xs = split_fp16x3(x, pad_cols_to=K_ALIGN)  # same padded K as the weight's split
    if check_finite:
        _split.reject_non_finite(xs, "x")
    h_pad = triton.cdiv(h, K_ALIGN) * K_ALIGN
    hh = torch.empty((m, h_pad), device=x.device, dtype=torch.float16)
    hl = torch.empty((m, h_pad), device=x.device, dtype=torch.float16)
    if h_pad > h:  # GEMM2 sums over all H_pad columns: the padding must add nothing
        hh[:, h:].zero_()
        hl[:, h:].zero_()
    with _base.on_device(x.device):
        _fp16x3_linear_sigmoid_split_kernel[_base.tile_grid(m, h)](
            xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo, ws.inv_scale, b1, hh, hl,
            m, h, xs.hi.shape[1],  # the padded K
            xs.hi.stride(0), ws.hi.stride(0), b1.stride(0), hh.stride(0),
            USE_ASM_ADD=not INTERPRET,
        )
    inv_scale = torch.full((m,), 1.0 / H_SCALE, device=x.device, dtype=torch.float32)
    return Fp16x3Split(hh, hl, inv_scale)


def linear_partial_lse_split(h: Fp16x3Split, w2: torch.Tensor, b2: torch.Tensor,
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tile logsumexp pieces of z = h @ w2.T + b2 on fp16 tensor cores, z never stored.

    Args:
        h: the split of h (M, H) as ``linear_sigmoid_split`` (or ``split_fp16x3`` with
            ``pad_cols_to=K_ALIGN``) returns it: hi, lo (M, H_pad) contiguous.
        w2: (N, H) float32, split cached; b2: (N,) float32.

    Returns:
        (pmax, psum), each (M, T) float32, T = cdiv(N, BLOCK_N) of the chosen config, as
        step 04's ``linear_partial_lse`` defines them.
    """
    if not isinstance(h, Fp16x3Split):
        raise TypeError(f"h must be an Fp16x3Split (hi, lo, inv_scale), got {type(h).__name__}")
    _checks.check_tensors([("w2", w2, 2), ("b2", b2, 1)])
    n, hw = w2.shape
    if b2.shape[0] != n:
        raise ValueError(f"b2.shape={tuple(b2.shape)}: it must be ({n},), w2's first dim")
    ws = split_weight_cached(w2)
    if h.hi.shape != h.lo.shape or h.hi.shape[1] != ws.hi.shape[1] or not h.hi.is_contiguous() \
            or h.inv_scale.shape != (h.hi.shape[0],):
        raise ValueError(f"h.hi.shape={tuple(h.hi.shape)}: it must be contiguous (M, {ws.hi.shape[1]}), "
                         f"H = w2.shape[1] = {hw} padded to K_ALIGN, with lo alike and inv_scale (M,)")
    m = h.hi.shape[0]
    pmax, psum = _lse.partial_buffers(m, n, MIN_BLOCK_N, w2.device)
    with _base.on_device(w2.device):
        _fp16x3_linear_partial_lse_kernel[_base.tile_grid(m, n)](
            h.hi, h.lo, h.inv_scale, ws.hi, ws.lo, ws.inv_scale, b2, pmax, psum,
            m, n, h.hi.shape[1],  # the padded H
            h.hi.stride(0), ws.hi.stride(0), b2.stride(0),
            pmax.stride(0), pmax.stride(1), psum.stride(0), psum.stride(1),
            USE_ASM_ADD=not INTERPRET,
        )
    return _lse.used_tiles(_fp16x3_linear_partial_lse_kernel, pmax, psum, n)


def linear_sigmoid_linear_lse_fp16x3(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                                     w2: torch.Tensor, b2: torch.Tensor,
                                     *, check_finite: bool = False) -> torch.Tensor:
    """out[m] = logsumexp_n(sigmoid(x @ w1.T + b1) @ w2.T + b2)[m, n], fp32-accurate on
    fp16 tensor cores (three fp16 dots per GEMM on hi/lo splits).

    Args:
        x: (M, K) float32 activations, split on every call.
        w1: (H, K), b1: (H,); w2: (N, H), b2: (N,): float32. The splits of w1 and w2 are
            CACHED (the shared weight cache, keyed on data_ptr, ``_version``, shape, strides,
            device while the tensor lives): in-place changes through the tensor are seen,
            changes behind the version counter (``w.data.copy_``, custom kernels) are not,
            so call ``clear_weight_cache()`` after those. Weights with inf/NaN are rejected.
        check_finite: raise ValueError if x holds inf or NaN. Off by default: the check
            waits for the GPU on every call (0.44 ms of idle GPU per call measured on the
            H200); without it such rows of out become NaN, never a finite wrong number.

    Returns:
        (M,) float32 on x's device.

    Any sizes >= 1; K and H are padded with zeros to multiples of K_ALIGN inside the
    splits. Non-contiguous inputs are read through strides. CUDA tensors, or CPU tensors
    under TRITON_INTERPRET=1. The first call for new sizes autotunes both GEMMs.
    """
    check_inputs(x, w1, b1, w2, b2)
    hs = linear_sigmoid_split(x, w1, b1, check_finite=check_finite)
    pmax, psum = linear_partial_lse_split(hs, w2, b2)
    return combine_lse(pmax, psum)
