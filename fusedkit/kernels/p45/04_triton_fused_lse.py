# Computes out[m] = logsumexp_n(sigmoid(x @ W1.T + b1) @ W2.T + b2) with three Triton kernels: GEMM1 + bias + sigmoid (writes h), GEMM2 + bias + a per-tile partial logsumexp (z is never written), and a tiny combine.
# Changed vs step 03 (cuBLAS + two epilogue kernels): both GEMMs are Triton tl.dot loops in three precisions (ieee / tf32x3 / tf32), sigmoid fused into GEMM1's store, logsumexp split into per-tile (max, sum) pairs fused into GEMM2, so the (M, N) logits never reach HBM.
# Roofline: compute-bound (412 GFLOP, ~0.72 GB with h written and read once: ~570 FLOP/byte at 16384x2048x4096x1024). H200 floors: tf32 0.83 ms (494.7 TFLOP/s), tf32x3 2.50 ms, ieee 6.15 ms (67 TFLOP/s FP32); HBM alone 0.15 ms.
"""Step 04 of problem 45: two fused Triton GEMMs and a logsumexp combine, three precisions.

The data flow, for x (M, K), W1 (H, K), W2 (N, H):

    GEMM1  h = sigmoid(x @ W1.T + b1)                 (M, H) fp32, written once, read once
    GEMM2  z = h @ W2.T + b2, tile by tile; z stays in registers. Each (BLOCK_M, BLOCK_N)
           tile t reduces its rows to two numbers, over the tile's valid columns only:
               pmax[m, t] = max_n z[m, n]      psum[m, t] = sum_n exp(z[m, n] - pmax[m, t])
           (M, T) each, T = cdiv(N, BLOCK_N): 8 bytes per row per tile instead of the tile.
    combine out[m] = M_m + log(sum_t psum[m, t] * exp(pmax[m, t] - M_m)),  M_m = max_t pmax[m, t]

The combine is exact algebra: psum[m, t] * exp(pmax[m, t] - M_m) = sum_n exp(z[m, n] - M_m)
over tile t, and every exponent stays <= 0, so no exp overflows whatever the logits' size.

Everything runs on CUDA tensors, and on CPU tensors under Triton's interpreter
(``TRITON_INTERPRET=1``), which ignores ``input_precision`` and computes every dot in full
fp32: CPU runs check the indexing, masks and epilogues, never the precision.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedkit.kernels import load_step

_p12 = load_step("p12", "05_triton_fused.py")  # interpreter flag, config maker, device guard
INTERPRET: bool = _p12.INTERPRET  # decided when triton.jit decorates, i.e. at import
on_device = _p12.on_device

PRECISIONS = ("ieee", "tf32x3", "tf32")

# A few configs per precision, shared by both GEMMs (GEMM1 is 16384x4096x2048, GEMM2
# 16384x1024x4096 at KernelBench's size), chosen from the tiles problem 12 measured and
# compiled without spills for sm_90a with these epilogues (ptxas -v, on the CPU; tf32x3
# spills at 128x128x64 / 8 warps and 64x128 at 4 warps, tf32 at 128x128x32 / 4 warps).
# Shared memory per stage: 4 B * (BLOCK_M + BLOCK_N) * BLOCK_K, e.g. 128x256x32 is 48 KB
# (4 stages, 192 KB, fit the ~227 KB limit).
_GPU_SPACE = {
    # FMA path: moderate tiles, deeper pipelines to hide load latency.
    "ieee": [(128, 128, 32, 3, 8), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4)],
    # Three MMAs per chunk plus the operand split in registers: 128x128 at most.
    "tf32x3": [(128, 128, 32, 4, 8), (128, 128, 32, 3, 8), (64, 128, 32, 4, 8)],
    # One MMA per chunk: wide tiles raise the FLOP per loaded byte.
    "tf32": [(128, 256, 32, 3, 8), (128, 256, 32, 4, 8), (128, 128, 32, 4, 8)],
}
_CONFIGS, _prune_by_precision = _p12.autotune_space(_GPU_SPACE)

# GEMM2's tile width is the autotuner's choice, known only after the launch; the partial
# buffers are allocated for the narrowest candidate and sliced to the chosen T afterwards.
MIN_BLOCK_N = min(c.kwargs["BLOCK_N"] for c in _CONFIGS)


# ----------------------------------------------------------------------------------------
# Pieces shared by the GEMM kernels here and in step 05 (inlined by the compiler); the tile
# order and the dot-product loop are problem 12's (its step 05): kernels read module-level
# JIT functions only, hence the aliases.
# ----------------------------------------------------------------------------------------
grouped_tile = _p12.grouped_tile
dot_tile = _p12.dot_tile


@triton.jit
def _sigmoid(v):
    # 1 / (1 + exp(-v)) for v >= 0 and exp(v) / (1 + exp(v)) below: exp never overflows
    # and tiny outputs keep their relative accuracy.
    e = tl.exp(-tl.abs(v))
    return tl.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@triton.jit
def _partial_lse_store(z, offs_m, offs_n, M, N, pid_n, pmax_ptr, psum_ptr,
                       stride_pm, stride_pt, stride_sm, stride_st):
    # z is one (BLOCK_M, BLOCK_N) tile of logits with unwrapped indices offs_m / offs_n.
    # Columns past N become -inf: they lose the max and add exp(-inf) = 0 to the sum.
    z = tl.where(offs_n[None, :] < N, z, float("-inf"))
    tile_max = tl.max(z, axis=1)  # finite: every tile holds at least one valid column
    tile_sum = tl.sum(tl.exp(z - tile_max[:, None]), axis=1)  # in [1, BLOCK_N]
    rows = offs_m.to(tl.int64)
    row_ok = offs_m < M
    tl.store(pmax_ptr + rows * stride_pm + pid_n * stride_pt, tile_max, mask=row_ok)
    tl.store(psum_ptr + rows * stride_sm + pid_n * stride_st, tile_sum, mask=row_ok)


# ----------------------------------------------------------------------------------------
# 1. GEMM1 + bias + sigmoid: h (M, H) fp32
# ----------------------------------------------------------------------------------------
@triton.autotune(configs=_CONFIGS, key=["M", "N", "K", "INPUT_PRECISION"],
                 prune_configs_by={"early_config_prune": _prune_by_precision})
@triton.heuristics({"EVEN_K": lambda a: a["K"] % a["BLOCK_K"] == 0})
@triton.jit
def _linear_sigmoid_kernel(
    x_ptr, w_ptr, b_ptr, h_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_b, stride_hm, stride_hn,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    # Here N is the hidden size H and K the input size: x (M, K) @ W1.T (K, H).
    pid_m, pid_n = grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = dot_tile(x_ptr, w_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk,
                    pid_m, pid_n, INPUT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K)
    # Epilogue on the fp32 accumulator, then the only store of the tile.
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # unwrapped indices, for the masks
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    bias = tl.load(b_ptr + offs_n * stride_b, mask=offs_n < N, other=0.0)
    h = _sigmoid(acc + bias[None, :])
    h_ptrs = h_ptr + offs_m[:, None].to(tl.int64) * stride_hm + offs_n[None, :] * stride_hn
    tl.store(h_ptrs, h, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# ----------------------------------------------------------------------------------------
# 2. GEMM2 + bias + partial logsumexp: pmax, psum (M, T); z (M, N) is never stored
# ----------------------------------------------------------------------------------------
@triton.autotune(configs=_CONFIGS, key=["M", "N", "K", "INPUT_PRECISION"],
                 prune_configs_by={"early_config_prune": _prune_by_precision})
@triton.heuristics({"EVEN_K": lambda a: a["K"] % a["BLOCK_K"] == 0})
@triton.jit
def _linear_partial_lse_kernel(
    h_ptr, w_ptr, b_ptr, pmax_ptr, psum_ptr,
    M, N, K,
    stride_hm, stride_hk, stride_wn, stride_wk, stride_b,
    stride_pm, stride_pt, stride_sm, stride_st,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    # Here K is the hidden size H and N the output size: h (M, H) @ W2.T (H, N).
    pid_m, pid_n = grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = dot_tile(h_ptr, w_ptr, M, N, K, stride_hm, stride_hk, stride_wn, stride_wk,
                    pid_m, pid_n, INPUT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    bias = tl.load(b_ptr + offs_n * stride_b, mask=offs_n < N, other=0.0)
    _partial_lse_store(acc + bias[None, :], offs_m, offs_n, M, N, pid_n, pmax_ptr, psum_ptr,
                       stride_pm, stride_pt, stride_sm, stride_st)


# ----------------------------------------------------------------------------------------
# 3. Combine: out[m] from the T (max, sum) pairs of row m
# ----------------------------------------------------------------------------------------
@triton.jit
def _combine_lse_kernel(pmax_ptr, psum_ptr, out_ptr, M, T,
                        stride_pm, stride_pt, stride_sm, stride_st, stride_o,
                        BLOCK_R: tl.constexpr, BLOCK_T: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < M
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, BLOCK_T)
    # Pass 1: the row's max over its tiles' maxima (T is small: 4-16 at KernelBench's N).
    # Elementwise across chunks, reduced once after the loop (a reduction carried through
    # the loop trips an assertion in Triton 3.6's OptimizeThreadLocality pass).
    mx_tile = tl.full((BLOCK_R, BLOCK_T), float("-inf"), dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        t = t0 + cols
        mask = row_ok[:, None] & (t[None, :] < T)
        pm = tl.load(pmax_ptr + rows64[:, None] * stride_pm + t[None, :] * stride_pt,
                     mask=mask, other=float("-inf"))
        mx_tile = tl.maximum(mx_tile, pm)
    mx = tl.max(mx_tile, axis=1)
    # Padding rows (past M) have mx = -inf; shift them by 0 so they compute no NaN.
    shift = tl.where(mx == float("-inf"), 0.0, mx)
    # Pass 2: rescale each tile's sum from its own max to the row's max (exponents <= 0).
    s_tile = tl.zeros((BLOCK_R, BLOCK_T), dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        t = t0 + cols
        mask = row_ok[:, None] & (t[None, :] < T)
        pm = tl.load(pmax_ptr + rows64[:, None] * stride_pm + t[None, :] * stride_pt,
                     mask=mask, other=float("-inf"))
        ps = tl.load(psum_ptr + rows64[:, None] * stride_sm + t[None, :] * stride_st,
                     mask=mask, other=0.0)
        s_tile += ps * tl.exp(pm - shift[:, None])
    s = tl.sum(s_tile, axis=1)
    s = tl.where(row_ok, s, 1.0)  # padding rows: log(1), not log(0), though never stored
    tl.store(out_ptr + rows64 * stride_o, shift + tl.log(s), mask=row_ok)


# ----------------------------------------------------------------------------------------
# Checks and wrappers
# ----------------------------------------------------------------------------------------
def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: allowed values are {PRECISIONS}")


def _check_tensors(named: list[tuple[str, torch.Tensor, int]]) -> None:
    """Type, dtype, rank and device rules shared by every wrapper here."""
    for name, t, _ in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != torch.float32:
            raise TypeError(f"{name}.dtype={t.dtype}: only torch.float32 is allowed")
    for name, t, ndim in named:
        if t.dim() != ndim:
            raise ValueError(f"{name} has shape {tuple(t.shape)}: it must be {ndim}-D")
    for name, t, _ in named:
        for d, size in enumerate(t.shape):
            if size == 0:
                raise ValueError(f"{name}.shape[{d}] is 0 (shape {tuple(t.shape)}): empty inputs are "
                                 "not allowed (every dim must be >= 1)")
    devices = {t.device for _, t, _ in named}
    if len(devices) != 1:
        where = ", ".join(f"{name} on {t.device}" for name, t, _ in named)
        raise ValueError(f"the tensors must share one device, got {where}")
    dev = named[0][1].device
    if dev.type != "cuda" and not INTERPRET:
        raise ValueError(f"{named[0][0]}.device={dev}: Triton kernels need CUDA tensors "
                         "(CPU tensors only under TRITON_INTERPRET=1, set before triton is imported)")
    if INTERPRET and dev.type != "cpu":
        raise ValueError(f"{named[0][0]}.device={dev}: under TRITON_INTERPRET=1 the tensors must be on the CPU")


def _check_layer(a_name: str, a: torch.Tensor, w_name: str, w: torch.Tensor,
                 b_name: str, b: torch.Tensor) -> tuple[int, int, int]:
    """One Linear layer a (M, K) @ w (N, K).T + b (N,); returns (M, K, N)."""
    _check_tensors([(a_name, a, 2), (w_name, w, 2), (b_name, b, 1)])
    (m, k), (n, kw) = a.shape, w.shape
    if kw != k:
        raise ValueError(f"{w_name}.shape={tuple(w.shape)} does not match {a_name}.shape={tuple(a.shape)}: "
                         f"{w_name} must be ({n}, {k}), its second dim = {a_name}.shape[1] = {k}")
    if b.shape[0] != n:
        raise ValueError(f"{b_name}.shape={tuple(b.shape)}: it must be ({n},), {w_name}'s first dim")
    return m, k, n


def check_inputs(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                 w2: torch.Tensor, b2: torch.Tensor) -> tuple[int, int, int, int]:
    """Validate the operands of ``linear_sigmoid_linear_lse``; return (M, K, H, N).

    x (M, K), w1 (H, K), b1 (H,), w2 (N, H), b2 (N,): float32, one device (CUDA, or the
    CPU under TRITON_INTERPRET=1), every dim >= 1. Non-contiguous tensors are accepted:
    the kernels read them through strides. Raises TypeError / ValueError with one line
    naming the parameter, its value and what is allowed.
    """
    _check_tensors([("x", x, 2), ("w1", w1, 2), ("b1", b1, 1), ("w2", w2, 2), ("b2", b2, 1)])
    m, k, h = _check_layer("x", x, "w1", w1, "b1", b1)
    if w2.shape[1] != h:
        raise ValueError(f"w2.shape={tuple(w2.shape)} does not match w1.shape={tuple(w1.shape)}: "
                         f"w2 must be (N, {h}), its second dim = H = w1.shape[0] = {h}")
    if b2.shape[0] != w2.shape[0]:
        raise ValueError(f"b2.shape={tuple(b2.shape)}: it must be ({w2.shape[0]},), w2's first dim")
    return m, k, h, w2.shape[0]


def _grid(m: int, n: int):
    def grid(meta: dict) -> tuple[int]:
        # 1-D grid over all output tiles; the kernels remap ids into GROUP_M-tall groups.
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
    return grid


def partial_buffers(m: int, n: int, min_block_n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Uninitialised pmax, psum of (m, cdiv(n, min_block_n)) float32: room for any config."""
    t_max = triton.cdiv(n, min_block_n)
    return (torch.empty((m, t_max), device=device, dtype=torch.float32),
            torch.empty((m, t_max), device=device, dtype=torch.float32))


def used_tiles(kernel, pmax: torch.Tensor, psum: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first T = cdiv(n, BLOCK_N) columns, BLOCK_N being the config the autotuned
    ``kernel`` just ran with (views, no copy)."""
    t = triton.cdiv(n, kernel.best_config.kwargs["BLOCK_N"])
    return pmax[:, :t], psum[:, :t]


def linear_sigmoid(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                   precision: str = "tf32") -> torch.Tensor:
    """h = sigmoid(x @ w1.T + b1) in one Triton kernel (GEMM with the sigmoid fused).

    Args:
        x: (M, K) float32; w1: (H, K) float32 (``nn.Linear.weight``, read transposed through
            its strides); b1: (H,) float32.
        precision: ``tl.dot`` input precision, one of PRECISIONS.

    Returns:
        (M, H) float32, contiguous, values in [0, 1].
    """
    _check_precision(precision)
    m, k, h = _check_layer("x", x, "w1", w1, "b1", b1)
    out = torch.empty((m, h), device=x.device, dtype=torch.float32)
    with on_device(x.device):
        _linear_sigmoid_kernel[_grid(m, h)](
            x, w1, b1, out, m, h, k,
            x.stride(0), x.stride(1), w1.stride(0), w1.stride(1), b1.stride(0),
            out.stride(0), out.stride(1),
            INPUT_PRECISION=precision,
        )
    return out


def linear_partial_lse(h: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor,
                       precision: str = "tf32") -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tile logsumexp pieces of z = h @ w2.T + b2, without storing z.

    Args:
        h: (M, H) float32; w2: (N, H) float32; b2: (N,) float32.
        precision: ``tl.dot`` input precision, one of PRECISIONS.

    Returns:
        (pmax, psum), each (M, T) float32 with T = cdiv(N, BLOCK_N) for the BLOCK_N the
        autotuner picked: pmax[m, t] is the max of z[m, n] over tile t's columns n < N,
        psum[m, t] = sum over them of exp(z[m, n] - pmax[m, t]), in [1, BLOCK_N]. Views
        (row stride T_max >= T) of buffers sized for the narrowest config.
    """
    _check_precision(precision)
    m, hk, n = _check_layer("h", h, "w2", w2, "b2", b2)
    pmax, psum = partial_buffers(m, n, MIN_BLOCK_N, h.device)
    with on_device(h.device):
        _linear_partial_lse_kernel[_grid(m, n)](
            h, w2, b2, pmax, psum, m, n, hk,
            h.stride(0), h.stride(1), w2.stride(0), w2.stride(1), b2.stride(0),
            pmax.stride(0), pmax.stride(1), psum.stride(0), psum.stride(1),
            INPUT_PRECISION=precision,
        )
    return used_tiles(_linear_partial_lse_kernel, pmax, psum, n)


def combine_lse(pmax: torch.Tensor, psum: torch.Tensor) -> torch.Tensor:
    """out[m] = M_m + log(sum_t psum[m, t] * exp(pmax[m, t] - M_m)), M_m = max_t pmax[m, t].

    Args:
        pmax, psum: (M, T) float32 on one device, any strides (as ``linear_partial_lse``
            returns them).

    Returns:
        (M,) float32: the logsumexp of each row of the logits the pairs summarise.
    """
    _check_tensors([("pmax", pmax, 2), ("psum", psum, 2)])
    if pmax.shape != psum.shape:
        raise ValueError(f"psum.shape={tuple(psum.shape)}: it must equal pmax.shape={tuple(pmax.shape)}")
    m, t = pmax.shape
    out = torch.empty((m,), device=pmax.device, dtype=torch.float32)
    # GPU: 64 rows x 16 tiles per program (8 values per thread at 4 warps), 256 programs at
    # M = 16384. Interpreter: many rows per program, since each program costs Python time.
    block_r, block_t = (128, 16) if INTERPRET else (64, 16)
    with on_device(pmax.device):
        _combine_lse_kernel[(triton.cdiv(m, block_r),)](
            pmax, psum, out, m, t,
            pmax.stride(0), pmax.stride(1), psum.stride(0), psum.stride(1), out.stride(0),
            BLOCK_R=block_r, BLOCK_T=block_t, num_warps=4)
    return out


def linear_sigmoid_linear_lse(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                              w2: torch.Tensor, b2: torch.Tensor,
                              precision: str = "tf32") -> torch.Tensor:
    """out[m] = logsumexp_n(sigmoid(x @ w1.T + b1) @ w2.T + b2)[m, n] in three Triton kernels.

    Args:
        x: (M, K) float32 activations.
        w1: (H, K), b1: (H,): the first ``nn.Linear``; w2: (N, H), b2: (N,): the second.
        precision: ``tl.dot`` input precision for both GEMMs: "ieee" (fp32 FMAs, slowest),
            "tf32x3" (three tf32 passes, about fp32 accuracy) or "tf32" (default; one pass,
            fastest, 10-bit mantissas: well under 1e-3 relative error on out).

    Returns:
        (M,) float32 on x's device.

    Any sizes >= 1 (tails are masked); non-contiguous inputs are read through strides.
    Holds h (M, H) fp32 and 2 * M * cdiv(N, BLOCK_N) partials; never the (M, N) logits.
    CUDA tensors, or CPU tensors under TRITON_INTERPRET=1 (where ``precision`` has no
    effect). The first call for new sizes and precision autotunes both GEMMs (seconds).
    """
    _check_precision(precision)
    check_inputs(x, w1, b1, w2, b2)
    h = linear_sigmoid(x, w1, b1, precision)
    pmax, psum = linear_partial_lse(h, w2, b2, precision)
    return combine_lse(pmax, psum)
