"""The logsumexp pieces of problem 45's fused steps: GEMM2's epilogue reduces each tile of logits
to per-row (max, sum-exp) pairs, and a small kernel combines a row's pairs into its logsumexp.

    pmax[m, t] = max_n z[m, n]      psum[m, t] = sum_n exp(z[m, n] - pmax[m, t])   (tile t)
    out[m] = M_m + log(sum_t psum[m, t] * exp(pmax[m, t] - M_m)),  M_m = max_t pmax[m, t]

The combine is exact algebra, and every exponent stays <= 0, so no exp overflows whatever the
logits' size. Loaded like a step (``load_step("common", "lse.py")``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedkit.kernels import load_step

_base = load_step("common", "triton_base.py")
check_tensors = load_step("common", "checks.py").check_tensors
INTERPRET: bool = _base.INTERPRET
COMBINE_BLOCK = (128, 16) if INTERPRET else (64, 16)
"""The combine's (rows, partials) per program."""
on_device = _base.on_device


@triton.jit
def partial_lse_store(z, offs_m, offs_n, M, N, pid_n, pmax_ptr, psum_ptr,
                       stride_pm, stride_pt, stride_sm, stride_st):
    """Reduce one (BLOCK_M, BLOCK_N) tile of logits z (unwrapped indices offs_m / offs_n) to
    its per-row (max, sum of exp(z - max)) over the valid columns; store them at tile pid_n."""
    # Columns past N become -inf: they lose the max and add exp(-inf) = 0 to the sum.
    z = tl.where(offs_n[None, :] < N, z, float("-inf"))
    tile_max = tl.max(z, axis=1)  # finite: every tile holds at least one valid column
    tile_sum = tl.sum(tl.exp(z - tile_max[:, None]), axis=1)  # in [1, BLOCK_N]
    rows = offs_m.to(tl.int64)
    row_ok = offs_m < M
    tl.store(pmax_ptr + rows * stride_pm + pid_n * stride_pt, tile_max, mask=row_ok)
    tl.store(psum_ptr + rows * stride_sm + pid_n * stride_st, tile_sum, mask=row_ok)


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


def combine_lse(pmax: torch.Tensor, psum: torch.Tensor) -> torch.Tensor:
    """out[m] = M_m + log(sum_t psum[m, t] * exp(pmax[m, t] - M_m)), M_m = max_t pmax[m, t].

    Args:
        pmax, psum: (M, T) float32 on one device, any strides (as ``linear_partial_lse``
            returns them).

    Returns:
        (M,) float32: the logsumexp of each row of the logits the pairs summarise.
    """
    check_tensors([("pmax", pmax, 2), ("psum", psum, 2)])
    if pmax.shape != psum.shape:
        raise ValueError(f"psum.shape={tuple(psum.shape)}: it must equal pmax.shape={tuple(pmax.shape)}")
    m, t = pmax.shape
    out = torch.empty((m,), device=pmax.device, dtype=torch.float32)
    # GPU: 64 rows x 16 tiles per program (8 values per thread at 4 warps), 256 programs at
    # M = 16384. Interpreter: many rows per program, since each program costs Python time.
    block_r, block_t = COMBINE_BLOCK
    with on_device(pmax.device):
        _combine_lse_kernel[(triton.cdiv(m, block_r),)](
            pmax, psum, out, m, t,
            pmax.stride(0), pmax.stride(1), psum.stride(0), psum.stride(1), out.stride(0),
            BLOCK_R=block_r, BLOCK_T=block_t, num_warps=4)
    return out
