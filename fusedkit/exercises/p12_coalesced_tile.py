"""Exercise p12_coalesced_tile: read W along K, the axis it is laid out in. Neighbouring lanes take
neighbouring k of one W row (whole 128-byte lines per warp), and a reduction over k finishes each
output: a (BLOCK_N, BLOCK_K) tile of W whose fast axis is k, summed into BLOCK_N outputs of a row of y."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from fusedkit.exercises._triton import Mistake, P12Exercise, p12_epilogue64, p12_last_chunk, p12_zero_acc


@triton.jit
def coalesced_tile_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                          multiplier, negative_slope,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Row m of y, columns cols: y[m, cols] = LeakyReLU((W[cols, :] @ x[m, :] + b[cols]) * multiplier).
    m = tl.program_id(0)                                            # one row of x and of y
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)       # rows of W, columns of y
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        xk = tl.load(x_ptr + m * stride_xm + ks, mask=ks < K, other=0.0)   # (BLOCK_K,) of row m
        # 1: w = the (BLOCK_N, BLOCK_K) tile W[cols, ks], k along the fast axis (unit stride in
        #    memory, so neighbouring lanes read neighbouring floats): mask both edges, other=0.0
        w = tl.load(w_ptr + cols[:, None] * stride_wn + ks[None, :],
                    mask=(cols[:, None] < N) & (ks[None, :] < K), other=0.0)
        # 2: acc += the sum over k of w * xk (xk[None, :] spreads the chunk over the tile's rows)
        acc += tl.sum(w * xk[None, :], axis=1)
    # The epilogue on the BLOCK_N outputs, then one store.
    bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0)
    v = (acc + bias) * multiplier
    v = tl.where(v > 0, v, v * negative_slope)
    tl.store(y_ptr + m * stride_ym + cols, v, mask=cols < N)


def _strides_swapped(p: dict) -> torch.Tensor:
    # w[j, i] read at w_ptr + cols[j] + ks[i] * stride_wn: W.flat[ks * K + cols], NaN past W.
    n, k = p["w"].shape
    flat = torch.cat([p["w"].flatten(), p["w"].new_full((k * k + n,), math.nan)])
    cols, ks = torch.arange(n), torch.arange(k)
    return p12_epilogue64(p, p["x"] @ flat[ks[None, :] * k + cols[:, None]].t())


def _no_k_mask(p: dict) -> torch.Tensor | None:
    # Past K the tile reads on into the next row of W (times x's zeros: harmless) and, at the
    # last row of W, into the margin: NaN * 0 is NaN in y's last column.
    if p["w"].shape[1] % p["bk"] == 0:
        return None
    out = p12_epilogue64(p, p["acc"])
    out[:, -1] = math.nan
    return out


class CoalescedTile(P12Exercise):
    name, answer, solution = "p12_coalesced_tile", "coalesced_tile_kernel", coalesced_tile_kernel
    # GPU: 32 W rows x 128 k per step, 4 floats per lane along k at 4 warps. Interpreter:
    # 128 x 16, so 17 x 33 x 65 has one ragged block of N per row and a ragged last chunk of K.
    gpu_blocks, cpu_blocks = dict(BLOCK_N=32, BLOCK_K=128), dict(BLOCK_N=128, BLOCK_K=16)
    w_fill = math.nan   # an unmasked load past W's end reads NaN, which then shows in y
    mistakes = (
        Mistake("the accumulator was never updated: y is the epilogue of acc = 0, the same for every x",
                "TODO 1-2: load the W tile, then acc += tl.sum(w * xk[None, :], axis=1)", p12_zero_acc),
        Mistake("y holds only the last K chunk's sum: acc was replaced, not added to",
                "TODO 2: acc += tl.sum(...), not acc = tl.sum(...)", p12_last_chunk),
        Mistake("the strides are swapped: the tile read W.flat[ks * K + cols] instead of W[cols, ks]",
                "TODO 1: W is (N, K) row-major: row cols times stride_wn, plus ks, the unit-stride "
                "axis: w_ptr + cols[:, None] * stride_wn + ks[None, :]", _strides_swapped),
        Mistake("y's last column is NaN: the last chunk read past the end of W (its margin is NaN here; "
                "on a GPU it is another tensor's memory, or a fault)",
                "TODO 1: mask the K edge too: mask=(cols[:, None] < N) & (ks[None, :] < K), other=0.0",
                _no_k_mask),
    )
    hints = dict(
        raised="check the kernel's signature (keep the skeleton's parameters) and TODO 1-2: the W tile "
               "is (BLOCK_N, BLOCK_K), so tl.sum(w * xk[None, :], axis=1) gives one value per column of y",
        some_unwritten="NaN outputs come from loads past W's end: mask both edges of the W tile, "
                       "(cols[:, None] < N) & (ks[None, :] < K), with other=0.0",
        outside="keep the store's mask cols < N",
        specialised="mask the W tile on both edges (cols < N and ks < K) with other=0.0: nothing may "
                    "assume K or N is a multiple of the block",
        precision="keep the products and the sum in fp32 (w and xk are fp32 loads)",
        wrong="check the W tile: w[j, i] = W[cols[j], ks[i]] at w_ptr + cols[:, None] * stride_wn + "
              "ks[None, :], its mask on both edges, and that acc adds each chunk's tl.sum(..., axis=1)",
    )


EXERCISE = CoalescedTile()
