"""Exercise p45_sigmoid_gemm: p45's first GEMM with its bias and sigmoid fused (step 04's first kernel
without its autotuning): a K loop of tl.dot (ieee) into an fp32 accumulator, the bias and the sigmoid
on the tile in registers, one store of h; PyTorch finishes with logsumexp(linear2(h), dim=1)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedkit.exercises._triton import Mistake, P45Exercise
from fusedkit.problems.baselines import tf32_matmul


@triton.jit
def sigmoid_gemm_kernel(x_ptr, w_ptr, b_ptr, h_ptr, M, H, K, stride_xm, stride_wh, stride_hm,
                        BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr):
    # This program's tile of h = sigmoid(x @ W1.T + b1); x is (M, K), W1 is (H, K), h is (M, H).
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)     # rows of x and of h
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)     # rows of W1, columns of h
    acc = tl.zeros((BLOCK_M, BLOCK_H), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + rows[:, None] * stride_xm + ks[None, :],
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)  # (BLOCK_M, BLOCK_K)
        w = tl.load(w_ptr + cols[None, :] * stride_wh + ks[:, None],
                    mask=(cols[None, :] < H) & (ks[:, None] < K), other=0.0)  # (BLOCK_K, BLOCK_H)
        # 1: add a @ w to acc: tl.dot(a, w, acc, input_precision="ieee")
        acc = tl.dot(a, w, acc, input_precision="ieee")
    # 2: v = acc + b1[cols] (load the bias masked with cols < H; bias[None, :] per column)
    bias = tl.load(b_ptr + cols, mask=cols < H, other=0.0)
    v = acc + bias[None, :]
    # 3: h = the sigmoid of v, 1 / (1 + exp(-v))
    h = 1.0 / (1.0 + tl.exp(-v))
    # 4: store h at h_ptr + rows * stride_hm + cols (2-D), masked on both edges
    tl.store(h_ptr + rows[:, None] * stride_hm + cols[None, :], h,
             mask=(rows[:, None] < M) & (cols[None, :] < H))


def _last_chunk(p: dict) -> torch.Tensor | None:
    last = (p["x"].shape[1] - 1) // p["bk"] * p["bk"]
    return torch.sigmoid(p["x"][:, last:] @ p["w"][:, last:].t() + p["b"]) if last else None


class SigmoidGemm(P45Exercise):
    name, output = "p45_sigmoid_gemm", "h"
    answer, solution = "sigmoid_gemm_kernel", sigmoid_gemm_kernel
    # GPU: 64 x 64 tiles, K in chunks of 32. Interpreter: 16 x 32 x 16, so 17 x 33 x 65 has
    # ragged tiles on every edge.
    n_block, gpu_blocks = "BLOCK_H", dict(BLOCK_M=64, BLOCK_H=64, BLOCK_K=32)
    cpu_blocks = dict(BLOCK_M=16, BLOCK_H=32, BLOCK_K=16)
    mistakes = (
        Mistake("h is sigmoid(b1) in every row: nothing was added to acc",
                "TODO 1: acc = tl.dot(a, w, acc, input_precision=\"ieee\") inside the loop",
                lambda p: torch.sigmoid(p["b"]).expand(p["x"].shape[0], -1)),
        Mistake("h holds only the last K chunk's product: acc was replaced, not added to",
                "TODO 1: pass acc to tl.dot (acc = tl.dot(a, w, acc, ...)) or write acc += tl.dot(a, w, ...)",
                _last_chunk),
        Mistake("h is sigmoid(x @ W1.T): the bias is missing",
                "TODO 2: load b1[cols] and add bias[None, :] before the sigmoid",
                lambda p: torch.sigmoid(p["v"] - p["b"])),
        Mistake("h is x @ W1.T + b1: the sigmoid is missing", "TODO 3: h = 1.0 / (1.0 + tl.exp(-v))",
                lambda p: p["v"]),
        Mistake("h is 1 - sigmoid(v), the sigmoid of -v",
                "TODO 3: h = 1.0 / (1.0 + tl.exp(-v)): the numerator is 1, the exponent -v",
                lambda p: torch.sigmoid(-p["v"])),
    )
    hints = dict(
        nothing_stored="the store is still a TODO: tl.store(h_ptr + rows[:, None] * stride_hm + "
                       "cols[None, :], h, mask=...) (TODO 4)",
        some_unwritten="check the store's offsets and mask: every row < M and column < H of h must be "
                       "stored once",
        outside="the store needs the mask (rows[:, None] < M) & (cols[None, :] < H)",
        specialised="nothing may assume M or H is a multiple of the block: mask both edges of the store "
                    "and the bias load",
        wrong="check the dot (accumulated into acc), the bias (b1[cols], before the sigmoid) and the "
              "sigmoid 1 / (1 + exp(-v))",
    )

    def launcher(self, kernel, model):
        def finish(h: torch.Tensor) -> torch.Tensor:   # the rest, as eager does it
            with torch.no_grad(), tf32_matmul(False):
                return torch.logsumexp(model.linear2(h), dim=1)
        w1, b1 = model.linear1.weight.detach(), model.linear1.bias.detach()
        return self.tile_launcher(kernel, w1, b1, finish=finish)

    def parts(self, model, x):
        w, b = model.linear1.weight.detach().double(), model.linear1.bias.detach().double()
        x = x.double()
        return dict(x=x, w=w, b=b, v=x @ w.t() + b, bk=self.blocks(x.device)["BLOCK_K"])

    def expected(self, p):
        return torch.sigmoid(p["v"])


EXERCISE = SigmoidGemm()
