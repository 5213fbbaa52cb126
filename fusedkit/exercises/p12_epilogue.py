"""Exercise p12_epilogue: p12's epilogue in one Triton kernel, one pass over acc = x @ W.T (PyTorch's
GEMM, TF32 off): y = LeakyReLU((acc + b) * multiplier), each program a 2-D block of y with its ragged
edges masked, loads and stores contiguous along rows (step 4's float4, unwritten)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedkit.exercises._triton import (Mistake, P12Exercise, Run, guarded, launch, margin_2d,
                                        p12_epilogue64, p12_weights)
from fusedkit.problems.baselines import tf32_matmul


@triton.jit
def epilogue_kernel(acc_ptr, b_ptr, y_ptr, M, N, stride_am, stride_ym,
                    multiplier, negative_slope,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # This program's block of y; acc = x @ W.T is already computed, (M, N) row-major.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)      # the ragged edges of y
    acc = tl.load(acc_ptr + rows[:, None] * stride_am + cols[None, :], mask=mask, other=0.0)
    # 1: load the bias of these columns, b[cols] (mask it with cols < N)
    bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0)
    # 2: v = (acc + bias) * multiplier, in that order (bias[None, :] is one value per column)
    v = (acc + bias[None, :]) * multiplier
    # 3: LeakyReLU: v where v > 0, else v * negative_slope (tl.where)
    v = tl.where(v > 0, v, v * negative_slope)
    # 4: store v at y_ptr + rows * stride_ym + cols (2-D, like the load), under the mask
    tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :], v, mask=mask)


def _epilogue(p: dict, **changed: object) -> torch.Tensor:
    """The epilogue on acc with b, c (the multiplier) or s (the slope) changed."""
    return p12_epilogue64({**p, **changed}, p["acc"])


def _bias_by_row(p: dict) -> torch.Tensor | None:
    m = p["acc"].shape[0]
    return _epilogue(p, b=p["b"][:m, None]) if m <= p["b"].shape[0] else None


class Epilogue(P12Exercise):
    name, answer, solution = "p12_epilogue", "epilogue_kernel", epilogue_kernel
    # GPU: 32 x 128 per program at 4 warps, 32 contiguous values per thread row.
    # Interpreter: small blocks, so 17 x 65 has ragged blocks in both directions.
    gpu_blocks, cpu_blocks = dict(BLOCK_M=32, BLOCK_N=128), dict(BLOCK_M=16, BLOCK_N=32)
    mistakes = (
        Mistake("y is LeakyReLU(acc * multiplier): the bias is missing",
                "TODO 1-2: load b[cols] and add it to acc before the multiply",
                lambda p: _epilogue(p, b=0.0)),
        Mistake("the bias was added along the rows (b[row] instead of b[col])",
                "the bias has one value per column: load it at b_ptr + cols and use bias[None, :]",
                _bias_by_row),
        Mistake("y is LeakyReLU(acc + b): the multiplier is missing",
                "TODO 2: multiply (acc + bias) by multiplier", lambda p: _epilogue(p, c=1.0)),
        Mistake("y is LeakyReLU(acc * multiplier + b): the multiply came before the bias",
                "TODO 2: add the bias first, then multiply: (acc + bias) * multiplier",
                lambda p: p12_epilogue64({**p, "c": 1.0}, p["acc"] * p["c"])),
        Mistake("y is (acc + b) * multiplier with no LeakyReLU",
                "TODO 3: v = tl.where(v > 0, v, v * negative_slope)", lambda p: _epilogue(p, s=1.0)),
        Mistake("negative values became 0: that is ReLU, not LeakyReLU",
                "TODO 3: negative values keep v * negative_slope, not 0",
                lambda p: _epilogue(p, s=0.0)),
        Mistake("the slope was applied to the positive values instead of the negative ones",
                "TODO 3: tl.where(v > 0, v, v * negative_slope) keeps v where it is positive",
                lambda p: -_epilogue(p, c=-p["c"])),   # -LeakyReLU(-v): v where v <= 0, else v * slope
    )
    hints = dict(
        nothing_stored="the store is still a TODO: tl.store(y_ptr + rows[:, None] * stride_ym + "
                       "cols[None, :], v, mask=mask) (TODO 4)",
        some_unwritten="check the store's offsets and its mask: every row < M and column < N of y "
                       "must be stored once",
        outside="the store needs mask=mask, so the block's rows past M and columns past N are not written",
        specialised="nothing may assume M or N is a multiple of the block: mask both edges",
        precision="compute in fp32 throughout: (acc + bias) * multiplier, then the LeakyReLU",
        wrong="check the bias (b[cols], one per column), the multiplier (after the bias) and the "
              "slope (only where v <= 0)",
    )

    def launcher(self, kernel, model):
        w, b, c, s = p12_weights(model)

        def call(x: torch.Tensor) -> Run:
            m, n, bl = x.shape[0], w.shape[0], self.blocks(x.device)
            margin = margin_2d(m, n, bl["BLOCK_M"], bl["BLOCK_N"])
            acc, _ = guarded((m, n), margin, x.device, fill=0.0)   # a margin for unmasked loads too
            with torch.no_grad(), tf32_matmul(False):
                torch.matmul(x, w.t(), out=acc)                     # eager's GEMM, TF32 off
            y, outside = guarded((m, n), margin, x.device)
            launch(kernel, (triton.cdiv(m, bl["BLOCK_M"]), triton.cdiv(n, bl["BLOCK_N"])), acc, b, y,
                   m, n, acc.stride(0), y.stride(0), c, s, **bl)
            return Run(y, y, outside)
        return call


EXERCISE = Epilogue()
