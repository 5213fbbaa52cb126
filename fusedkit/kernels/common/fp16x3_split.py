"""The fp16x3 split (Ootomo and Yokota's idea, with fp16 instead of tf32): a float32 matrix as
two fp16 matrices, and the GEMM tile that multiplies such splits to fp32 accuracy on fp16
tensor cores. Used by problem 12's step 09 and problem 45's step 05.

    each row r of a matrix A is scaled by a power of two s_r so that max|A[r]| * s_r lies
    in [2**14, 2**15): exact, a power of two only moves the exponent, and the largest
    value stays far from fp16's 65504 while small values stay clear of fp16's subnormals;
    hi = fp16(A * s)                  (11 significant bits)
    lo = fp16((A * s - hi) * 2048)    (the next 11 bits; A*s - hi and * 2048 are exact)
    so A * s = hi + lo / 2048 to about 2**-22 relative.

    x @ W.T = (xh @ Wh.T + (xh @ Wl.T + xl @ Wh.T) / 2048) / (s_x[m] * s_w[n]);
    the dropped xl @ Wl.T / 2048**2 term is ~2**-22 relative.

Per-row scales (rather than one per tensor) cost nothing extra (the epilogue multiplies
by 1/s_x[m] and 1/s_w[n]), keep each row in fp16's sweet spot even when rows differ in
range by many orders of magnitude, and keep a bad row from spoiling the others.

Why add each chunk's hi*hi outside the tensor cores: the MMA's own fp32 accumulation is
not IEEE round-to-nearest (it truncates; Fasi et al., "Numerical behavior of NVIDIA tensor
cores", 2021), so its errors share a sign and grow with K: over K = 8192 the rel. error
was 9.7e-6 with the sum inside the MMA, 2.5e-7 outside (H200). A plain ``acc += tl.dot(a, b)`` does not
help, since Triton folds the add back into the MMA's accumulator; an opaque
``add.rn.f32`` from inline PTX cannot be folded. The small cross terms stay on the
tensor cores: their truncation error is 2**-11 times smaller.

Loaded like a step (``load_step("common", "fp16x3_split.py")``); weight splits live in the
shared weight cache (``common/weight_cache.py``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
import triton
import triton.language as tl

from fusedkit.kernels import load_step

_base = load_step("common", "triton_base.py")
_weights = load_step("common", "weight_cache.py")  # one weight split per weight version
INTERPRET: bool = _base.INTERPRET
SPLIT_BLOCK = (32, 128) if INTERPRET else (1, 2048)
"""The split's (rows, columns) per program: wide rows on a GPU, square-ish tiles in the interpreter."""
_on_device = _base.on_device

# The split pads K up to a multiple of this (zeros add nothing): every BLOCK_K divides
# it, so the GEMM needs no K masks, and each fp16 row starts 128-byte aligned, so loads
# stay 16-byte vectors that the pipeliner can prefetch (with an odd K such as 8191 fp16
# rows are only 2-byte aligned and Triton gives up multi-stage pipelining).
K_ALIGN = 64

# constexpr globals: Triton kernels may only read module-level constants declared so.
LO_SCALE = tl.constexpr(2048.0)  # 2**11: lifts the residual A*s - hi (< half an fp16 ulp of hi) to hi's magnitude
_TARGET_EXP = tl.constexpr(15)  # rows are scaled so that max|row| * s lies in [2**14, 2**15)


# ----------------------------------------------------------------------------------------
# 1. The split: each program takes BLOCK_R rows and makes two passes over them (max, then
#    split); the second pass reads the rows again, mostly from L2. Writes hi and lo as
#    (R, C_pad) fp16, contiguous, zero in columns C..C_pad-1, and 1/s per row.
# ----------------------------------------------------------------------------------------
@triton.jit
def _split_rows_kernel(src_ptr, hi_ptr, lo_ptr, inv_scale_ptr, R, C, C_pad, stride_r, stride_c,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < R
    rows64 = rows.to(tl.int64)  # int64: rows * stride may pass 2**31 elements
    cols = tl.arange(0, BLOCK_C)

    # Pass 1: max |value| per row. NaN becomes inf so that a NaN anywhere makes the row's
    # max non-finite, whatever max's NaN rules are on the hardware at hand.
    amax_tile = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        c = c0 + cols
        mask = row_ok[:, None] & (c[None, :] < C)
        v = tl.load(src_ptr + rows64[:, None] * stride_r + c[None, :] * stride_c, mask=mask, other=0.0)
        a = tl.abs(v)
        a = tl.where(a == a, a, float("inf"))
        amax_tile = tl.maximum(amax_tile, a)
    amax = tl.max(amax_tile, axis=1)  # (BLOCK_R,)

    # Power-of-two scale from amax's exponent bits: amax lies in [2**(E-127), 2**(E-126))
    # for biased exponent E, so shift = 141 - E puts amax * 2**shift in [2**14, 2**15).
    # Clamping to [-126, 126] keeps 2**shift and 2**-shift normal fp32 numbers; only rows
    # whose max is below 2**-111 (zero rows included) end up below the target range.
    biased = (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF
    shift = tl.minimum(tl.maximum(_TARGET_EXP + 126 - biased, -126), 126)
    scale = ((shift + 127) << 23).to(tl.float32, bitcast=True)  # 2**shift built from bits
    inv_scale = ((127 - shift) << 23).to(tl.float32, bitcast=True)  # 2**-shift
    # E == 255 means inf or NaN in the row: publish NaN so callers can reject the input,
    # and so that the GEMM turns this row into NaN instead of silent garbage.
    inv_scale = tl.where(biased == 255, float("nan"), inv_scale)
    tl.store(inv_scale_ptr + rows, inv_scale, mask=row_ok)

    # Pass 2: hi = fp16(v*s) (round to nearest even), lo = fp16((v*s - hi) * 2048);
    # v*s and v*s - hi are exact in fp32, only the two fp16 roundings lose bits.
    # Columns C..C_pad-1 load as 0 and so store hi = lo = 0: padding that adds nothing.
    for c0 in range(0, C_pad, BLOCK_C):
        c = c0 + cols
        v = tl.load(src_ptr + rows64[:, None] * stride_r + c[None, :] * stride_c,
                    mask=row_ok[:, None] & (c[None, :] < C), other=0.0)
        v = v * scale[:, None]
        hi = v.to(tl.float16)
        lo = ((v - hi.to(tl.float32)) * LO_SCALE).to(tl.float16)
        dst = rows64[:, None] * C_pad + c[None, :]
        keep = row_ok[:, None] & (c[None, :] < C_pad)
        tl.store(hi_ptr + dst, hi, mask=keep)
        tl.store(lo_ptr + dst, lo, mask=keep)


class Fp16x3Split(NamedTuple):
    """A float32 matrix A (R, C) as fp16 parts: A = (hi + lo / 2048)[:, :C] * inv_scale[:, None]."""

    hi: torch.Tensor  # (R, C_pad) float16, contiguous; columns C.. are zero
    lo: torch.Tensor  # (R, C_pad) float16, contiguous: the residual times 2048
    inv_scale: torch.Tensor  # (R,) float32: 2**-shift per row; NaN where the row had inf/NaN


def split_fp16x3(a: torch.Tensor, pad_cols_to: int = 1) -> Fp16x3Split:
    """Split a 2-D float32 tensor row by row into fp16 hi + 2048-scaled lo (see module doc).

    Args:
        a: (R, C) float32, any strides, on CUDA (or CPU under TRITON_INTERPRET=1).
        pad_cols_to: hi and lo get C_pad = C rounded up to a multiple of this, zero-filled.

    Returns:
        Fp16x3Split(hi, lo, inv_scale). Reconstruction ``(hi + lo/2048)[:, :C] *
        inv_scale[:, None]`` (in float64) is within ~2**-22 relative of ``a``. Rows
        containing inf or NaN get ``inv_scale`` NaN; this function does not raise, the
        wrappers do.
    """
    if not isinstance(a, torch.Tensor) or a.dtype != torch.float32 or a.dim() != 2:
        got = f"{a.dtype} {a.dim()}-D tensor" if isinstance(a, torch.Tensor) else type(a).__name__
        raise TypeError(f"a: expected a 2-D torch.float32 tensor, got {got}")
    if isinstance(pad_cols_to, bool) or not isinstance(pad_cols_to, int) or pad_cols_to < 1:
        raise ValueError(f"pad_cols_to={pad_cols_to!r}: must be an int >= 1")
    r, c = a.shape
    c_pad = triton.cdiv(c, pad_cols_to) * pad_cols_to
    hi = torch.empty((r, c_pad), device=a.device, dtype=torch.float16)
    lo = torch.empty((r, c_pad), device=a.device, dtype=torch.float16)
    inv_scale = torch.empty((r,), device=a.device, dtype=torch.float32)
    if r == 0 or c == 0:  # nothing to split; the wrappers reject empty dims earlier
        inv_scale.fill_(1.0)
        return Fp16x3Split(hi, lo, inv_scale)
    # GPU: one row per program, 2048 fp32 per chunk = 16 per thread at 4 warps, loaded as
    # 16-byte vectors. Interpreter: every program costs milliseconds of Python, so one
    # program takes many rows at once (numpy does the arithmetic).
    block_r, block_c = SPLIT_BLOCK
    with _on_device(a.device):
        _split_rows_kernel[(triton.cdiv(r, block_r),)](
            a, hi, lo, inv_scale, r, c, c_pad, a.stride(0), a.stride(1),
            BLOCK_R=block_r, BLOCK_C=block_c, num_warps=4)
    return Fp16x3Split(hi, lo, inv_scale)


# ----------------------------------------------------------------------------------------
# 2. The W split, cached: W is read once per change instead of once per call.
# ----------------------------------------------------------------------------------------
def clear_weight_cache() -> None:
    """Forget every cached weight split (use after changing a weight behind autograd's back,
    e.g. through ``weight.data`` or a custom kernel, which does not bump ``weight._version``)."""
    _weights.clear()


def _split_checked(weight: torch.Tensor) -> Fp16x3Split:
    split = split_fp16x3(weight, pad_cols_to=K_ALIGN)
    bad = ~torch.isfinite(split.inv_scale)
    if bool(bad.any()):  # one host sync per new weight, not per call
        row = int(bad.nonzero()[0, 0])
        raise ValueError(f"weight contains inf or NaN (first in row {row}): the fp16x3 split needs finite values")
    return split


def split_weight_cached(weight: torch.Tensor) -> Fp16x3Split:
    """The fp16x3 split of ``weight`` (N, K), K padded to a multiple of K_ALIGN, computed
    once per (address, version, shape, strides, device) and reused while the same tensor
    stays alive and unmodified (the shared weight cache).

    Raises ValueError if the weight contains inf or NaN (checked once per split, one sync).
    Inference-mode tensors have no version counter, so they are split on every call.
    """
    return _weights.cached(weight, "fp16x3", _split_checked)


def call_fp16x3(fn: Callable[..., torch.Tensor], x: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor, *constants: float) -> torch.Tensor:
    """``fn(xh, xl, x_inv, wh, wl, w_inv, b32, *constants)`` on the splits of x (M, K), made per
    call, and of weight (N, K), from the weight cache, both with K padded to K_ALIGN: how a
    compiled fp16x3 GEMM (p12's step 14, CUDA) is fed. A row of x holding inf or NaN gives a
    NaN row of y; a weight holding one raises ValueError."""
    if x.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"x must be 2-D with {weight.shape[1]} columns (weight is (N, K) = "
                         f"{tuple(weight.shape)}), got shape {tuple(x.shape)}")
    ws = split_weight_cached(weight)
    xs = split_fp16x3(x, pad_cols_to=K_ALIGN)
    return fn(xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo, ws.inv_scale, bias.float().contiguous(),
              *constants)


def fused_x_eligible(x: torch.Tensor) -> bool:
    """Whether p12's step 15 can TMA-load x (M, K) as it is: float32 on CUDA, contiguous, 16-byte
    aligned, K a positive multiple of 4 (TMA's row stride is a multiple of 16 bytes)."""
    return (x.dtype == torch.float32 and x.is_cuda and x.dim() == 2 and x.shape[1] > 0
            and x.shape[1] % 4 == 0 and x.is_contiguous() and x.data_ptr() % 16 == 0)


def call_fp16x3_fused_x(scales_fn: Callable[..., tuple[torch.Tensor, torch.Tensor]],
                        fused_fn: Callable[..., torch.Tensor], fallback_fn: Callable[..., torch.Tensor],
                        x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                        *constants: float) -> torch.Tensor:
    """How p12's step 15 is fed: ``scale, inv = scales_fn(x)`` (x's row scales, one read of x),
    then ``fused_fn(x, scale, inv, wh, wl, w_inv, b32, *constants)`` with x in float32 as it is
    and weight's split from the weight cache (K padded to K_ALIGN); the GEMM splits x in shared
    memory. When x does not qualify (:func:`fused_x_eligible`), step 14's path instead:
    ``call_fp16x3(fallback_fn, x, ...)``, the same result. Rows of x holding inf or NaN give NaN
    rows of y; a weight holding one raises ValueError."""
    if x.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"x must be 2-D with {weight.shape[1]} columns (weight is (N, K) = "
                         f"{tuple(weight.shape)}), got shape {tuple(x.shape)}")
    if not fused_x_eligible(x):
        return call_fp16x3(fallback_fn, x, weight, bias, *constants)
    ws = split_weight_cached(weight)
    scale, inv = scales_fn(x)
    return fused_fn(x, scale, inv, ws.hi, ws.lo, ws.inv_scale, bias.float().contiguous(), *constants)


def reject_non_finite(split: Fp16x3Split, name: str) -> None:
    """Raise ValueError if a row of the split matrix held inf or NaN (one host sync)."""
    bad = ~torch.isfinite(split.inv_scale)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(f"{name} contains inf or NaN (first in row {row}): the fp16x3 split needs "
                         "finite values (check_finite=False turns such rows into NaN instead)")


# ----------------------------------------------------------------------------------------
# 3. The GEMM: three fp16 dots per K-chunk, the hi*hi one added outside the tensor cores.
# ----------------------------------------------------------------------------------------
@triton.jit
def _add_rn(a, b):
    # An opaque round-to-nearest fp32 add: the compiler cannot see that it is an add, so it
    # cannot fold it into the MMA accumulator as it does with `acc + tl.dot(...)`.
    return tl.inline_asm_elementwise("add.rn.f32 $0, $1, $2;", "=r,r,r", [a, b],
                                     dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def fp16x3_tile(ah_ptr, al_ptr, wh_ptr, wl_ptr, M, N, K, stride_am, stride_wn, pid_m, pid_n,
                USE_ASM_ADD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr):
    """(hi + lo/2048) @ (hi + lo/2048).T of A (M, K) and W (N, K), both split and padded to
    a K that is a multiple of BLOCK_K (no K masks), unit stride along K; the per-row scales
    are the caller's. Rows/columns past M/N wrap (% M, % N); the caller's store masks them.
    Each K-chunk's hi*hi is added outside the MMA (_add_rn) when USE_ASM_ADD."""
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_off = offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :]  # (BLOCK_M, BLOCK_K)
    w_off = offs_k[:, None] + offs_n[None, :].to(tl.int64) * stride_wn  # W^T: (BLOCK_K, BLOCK_N)
    ah_ptrs, al_ptrs = ah_ptr + a_off, al_ptr + a_off
    wh_ptrs, wl_ptrs = wh_ptr + w_off, wl_ptr + w_off
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # sum of hi*hi, added outside the MMA
    cross = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # hi*lo + lo*hi, inside the MMA
    for _ in range(0, K // BLOCK_K):
        ah = tl.load(ah_ptrs)
        al = tl.load(al_ptrs)
        wh = tl.load(wh_ptrs)
        wl = tl.load(wl_ptrs)
        # Cross terms are ~2**-11 of the result: the MMA's own accumulation is enough.
        cross = tl.dot(ah, wl, cross)
        cross = tl.dot(al, wh, cross)
        # This chunk's hi*hi from a zero accumulator, then one round-to-nearest fp32 add.
        chunk = tl.dot(ah, wh)
        if USE_ASM_ADD:
            acc = _add_rn(acc, chunk)
        else:
            acc = acc + chunk  # the interpreter cannot run inline PTX; numpy adds in IEEE fp32
        ah_ptrs += BLOCK_K
        al_ptrs += BLOCK_K
        wh_ptrs += BLOCK_K
        wl_ptrs += BLOCK_K
    return acc + cross * (1.0 / LO_SCALE)  # 1/2048: exact
