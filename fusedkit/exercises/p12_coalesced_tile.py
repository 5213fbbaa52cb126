"""Exercise p12_coalesced_tile: read W along K, the direction it is laid out in.

The naive step gives each thread one output ``y[m, n]``, with the lanes of a warp on 32
consecutive ``n``: their W loads land in 32 different rows of W, ``K`` floats apart, one
memory sector per lane. The coalesced step turns that around: neighbouring lanes take
neighbouring ``k`` of one W row, so a warp's load is a few whole 128-byte lines, and a
reduction over k finishes each output. In Triton that is a ``(BLOCK_N, BLOCK_K)`` tile of W
whose fast (last) axis is k, the axis with unit stride in memory: ``W[cols, ks]`` at
``w_ptr + cols[:, None] * stride_wn + ks[None, :]``. Each program computes BLOCK_N outputs of
one row of y: it walks K in chunks, multiplies the W tile by the chunk of x and sums over k
(``tl.sum(..., axis=1)``), then applies the epilogue. The learner writes the tile's load
(pointers and mask) and the reduction.

W sits in a buffer whose margin past its end is NaN: a load that forgets its K mask reads
there at the last row of W (on a GPU it would read whatever lies there, or fault), and the
NaN shows in y's last column.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from fusedkit.exercises._common import (Exercise, Mistake, Run, guarded, margin_2d, on_device,
                                        p12_epilogue64, p12_expected, p12_last_chunk,
                                        p12_tile_parts, p12_zero_acc, padded_copy, run_kernel,
                                        skeleton_of)


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


solution = coalesced_tile_kernel
SKELETON = skeleton_of(solution)   # the notebook's cell: the solution, its answers left out


def blocks(device: torch.device) -> dict:
    # GPU: 32 W rows x 128 k per step, 4 floats per lane along k at 4 warps. Interpreter:
    # 64 x 16, so 17 x 33 x 65 has ragged chunks of K and of N.
    return dict(BLOCK_N=32, BLOCK_K=128) if device.type == "cuda" else dict(BLOCK_N=64, BLOCK_K=16)


def _w_margin(n: int, k: int, bl: dict) -> int:
    """Elements past W's end that unmasked tile loads can reach, with the strides either way."""
    return max(margin_2d(n, k, bl["BLOCK_N"], bl["BLOCK_K"]), margin_2d(k, n, bl["BLOCK_K"], bl["BLOCK_N"]))


def prepare(model: torch.nn.Module) -> dict:
    w = model.gemm.weight.detach()
    n, k = w.shape
    # One-off copy with a NaN margin: a load past W's end reads NaN, which then shows in y.
    return dict(w=padded_copy(w, _w_margin(n, k, blocks(w.device)), fill=math.nan),
                b=model.gemm.bias.detach(), c=float(model.multiplier),
                slope=float(model.leaky_relu.negative_slope))


def launch(kernel, prep: dict, x: torch.Tensor) -> Run:
    w, b = prep["w"], prep["b"]
    x = x.contiguous()
    (m, k), n = x.shape, w.shape[0]
    bl = blocks(x.device)
    y, outside = guarded((m, n), triton.cdiv(n, bl["BLOCK_N"]) * bl["BLOCK_N"], x.device)
    grid = (m, triton.cdiv(n, bl["BLOCK_N"]))
    with on_device(x.device):
        run_kernel(kernel, grid, x, w, b, y, m, n, k, x.stride(0), w.stride(0), y.stride(0),
                   prep["c"], prep["slope"], **bl)
    return Run(y, y, outside)


parts, expected = p12_tile_parts, p12_expected


def _flat_with_nan_margin(p: dict, extra: int) -> torch.Tensor:
    w = p["w"].flatten()
    return torch.cat([w, torch.full((extra,), math.nan, dtype=w.dtype, device=w.device)])


def _strides_swapped(p: dict) -> torch.Tensor | None:
    # w[j, i] read at w_ptr + cols[j] + ks[i] * stride_wn: the element W.flat[ks * K + cols].
    (n, k) = p["w"].shape
    flat = _flat_with_nan_margin(p, k * k + n)
    cols, ks = torch.arange(n), torch.arange(k)
    gathered = flat[(ks[None, :] * k + cols[:, None]).flatten()].view(n, k)   # as W[cols, ks]
    return p12_epilogue64(p, p["x"] @ gathered.t())


def _no_k_mask(p: dict) -> torch.Tensor | None:
    # Past K the tile reads on into the next row of W (times x's zeros: harmless) and, at the
    # last row of W, into the margin: NaN * 0 is NaN in y's last column.
    (n, k) = p["w"].shape
    if k % p["bk"] == 0:
        return None
    out = p12_expected(p).clone()
    out[:, n - 1] = math.nan
    return out


MISTAKES = (
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

HINTS = dict(
    raised="check the kernel's signature (keep the skeleton's parameters) and TODO 1-2: the W tile "
           "is (BLOCK_N, BLOCK_K), so tl.sum(w * xk[None, :], axis=1) gives one value per column of y",
    nothing_stored="keep the skeleton's tl.store at the end of the kernel",
    some_unwritten="NaN outputs come from loads past W's end: mask both edges of the W tile, "
                   "(cols[:, None] < N) & (ks[None, :] < K), with other=0.0",
    outside="keep the store's mask cols < N",
    specialised="mask the W tile on both edges (cols < N and ks < K) with other=0.0: nothing may "
                "assume K or N is a multiple of the block",
    mutation="the kernel may only store into y_ptr",
    precision="keep the products and the sum in fp32 (w and xk are fp32 loads)",
    wrong="check the W tile: w[j, i] = W[cols[j], ks[i]] at w_ptr + cols[:, None] * stride_wn + "
          "ks[None, :], its mask on both edges, and that acc adds each chunk's tl.sum(..., axis=1)",
)

EXERCISE = Exercise(
    name="p12_coalesced_tile", problem_key="p12",
    title="coalesced loads: a tile of W read along k, its unit-stride axis, and summed over k",
    kernel_name="coalesced_tile_kernel", skeleton=SKELETON, solution=solution,
    prepare=prepare, launch=launch, parts=parts, expected=expected, blocks=blocks,
    mistakes=MISTAKES, hints=HINTS, output_name="y",
    cpu_sizes=dict(batch_size=17, in_features=33, out_features=65),
    notebook="01",
)


def builder(kernel):
    """``build(model) -> fn`` launching ``kernel`` (the learner's ``coalesced_tile_kernel`` or
    :data:`solution`) over every row of y."""
    return EXERCISE.builder(kernel)
