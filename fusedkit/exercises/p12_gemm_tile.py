"""Exercise p12_gemm_tile: one tile of p12's fused GEMM in Triton, step 8 without its autotuning: a K
loop of tl.dot (ieee: fp32 products) into an fp32 accumulator, the epilogue on the tile in registers,
one store. The learner loads W.T's tile through W's strides (no copy) and accumulates."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedkit.exercises._triton import Mistake, P12Exercise, p12_epilogue64, p12_last_chunk, p12_zero_acc


@triton.jit
def gemm_tile_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                     multiplier, negative_slope,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # This program's tile of y = LeakyReLU((x @ W.T + b) * multiplier); x is (M, K), W is (N, K).
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)     # rows of x and of y
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)     # rows of W, columns of y
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + rows[:, None] * stride_xm + ks[None, :],
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)  # (BLOCK_M, BLOCK_K)
        # 1: w = the (BLOCK_K, BLOCK_N) tile of W.T: w[i, j] = W[cols[j], ks[i]], found at
        #         w_ptr + cols[None, :] * stride_wn + ks[:, None]; mask both edges, other=0.0
        w = tl.load(w_ptr + cols[None, :] * stride_wn + ks[:, None],
                    mask=(cols[None, :] < N) & (ks[:, None] < K), other=0.0)
        # 2: acc = tl.dot(a, w, acc, input_precision="ieee")  (adds a @ w to acc in fp32)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    # The fused epilogue, on the tile while it is still in registers; one store.
    bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0)
    v = (acc + bias[None, :]) * multiplier
    v = tl.where(v > 0, v, v * negative_slope)
    tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :], v,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def _w_read_as_k_by_n(p: dict) -> torch.Tensor | None:
    # w[i, j] read at w_ptr + ks[i] * stride_wn + cols[j]: W's memory taken as a (K, N) matrix.
    n, k = p["w"].shape
    if (k - 1) * k + n > n * k:
        return None
    return p12_epilogue64(p, p["x"] @ p["w"].flatten().as_strided((k, n), (k, 1)))


class GemmTile(P12Exercise):
    name, answer, solution = "p12_gemm_tile", "gemm_tile_kernel", gemm_tile_kernel
    # GPU: 64 x 64 tiles, K in chunks of 32 (tl.dot needs every side >= 16). Interpreter:
    # 16 x 32 x 16, so 17 x 33 x 65 has ragged tiles on all three edges.
    gpu_blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    cpu_blocks = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=16)
    mistakes = (
        Mistake("the accumulator was never updated: y is the epilogue of acc = 0, the same for "
                "every x (nothing was added to acc yet)",
                "TODO 1-2: load the W tile, then acc = tl.dot(a, w, acc, input_precision=\"ieee\")",
                p12_zero_acc),
        Mistake("y holds only the last K chunk's product: acc was replaced, not added to",
                "TODO 2: pass acc to tl.dot (acc = tl.dot(a, w, acc, ...)) or write acc += tl.dot(a, w, ...)",
                p12_last_chunk),
        Mistake("the W tile was read as if W were (K, N): W[cols[j], ks[i]] lies at "
                "w_ptr + cols[j] * stride_wn + ks[i]",
                "TODO 1: multiply the column offsets, not the K offsets, by stride_wn", _w_read_as_k_by_n),
    )
    hints = dict(
        raised="check the kernel's signature (keep the skeleton's parameters) and TODO 1-2: the W tile "
               "must be (BLOCK_K, BLOCK_N) for tl.dot(a, w)",
        some_unwritten="NaN outputs come from NaN loads: give the W tile's load other=0.0 under its mask",
        outside="keep the store's mask (rows < M) & (cols < N)",
        specialised="mask the W tile on both edges (cols < N and ks < K) with other=0.0, so the last "
                    "K chunk adds nothing past K",
        wrong="check the W tile (w[i, j] = W[cols[j], ks[i]]), its mask (cols < N, ks < K, other=0.0) "
              "and that tl.dot adds into acc",
    )


EXERCISE = GemmTile()
