"""Exercise p45_online_lse: p45's row logsumexp in one pass over the logits z (PyTorch computes them), a
running (max, sum of exp(z - max)) per row merged chunk by chunk: step 04's merge, along one row."""

from __future__ import annotations

import copy

import torch
import triton
import triton.language as tl

from fusedkit.exercises._triton import Mistake, P45Exercise, Run, guarded, launch
from fusedkit.problems.baselines import tf32_matmul


@triton.jit
def online_lse_kernel(z_ptr, out_ptr, M, N, stride_zm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # This program's BLOCK_M rows of the logits z (M, N), reduced BLOCK_N columns at a time.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    safe_rows = rows % M        # rows past M re-read a real row; their results are not stored
    m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)   # running max of each row
    s = tl.zeros((BLOCK_M,), dtype=tl.float32)                  # running sum of exp(z - m)
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        z = tl.load(z_ptr + safe_rows[:, None] * stride_zm + cols[None, :],
                    mask=cols[None, :] < N, other=float("-inf"))   # exp(-inf) = 0 adds nothing
        # 1: m_new = the larger of m and this chunk's row maximum, tl.max(z, axis=1)
        m_new = tl.maximum(m, tl.max(z, axis=1))
        # 2: s = s rescaled from m to m_new, plus this chunk's sum of exp(z - m_new[:, None])
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new[:, None]), axis=1)
        # 3: m = m_new
        m = m_new
    # 4: store m + log(s) at out_ptr + rows, for the rows < M only
    tl.store(out_ptr + rows, m + tl.log(s), mask=rows < M)


def _merge(p: dict, *, rescale: bool = True, keep_sum: bool = True, update_m: bool = True) -> torch.Tensor | None:
    """The online merge over chunks of BLOCK_N columns, with one step optionally left out
    (None where that cannot be told apart: a single chunk)."""
    z, bn = p["z"], p["bn"]
    if not (rescale and keep_sum) and z.shape[1] <= bn:
        return None
    m = torch.full((z.shape[0],), float("-inf"), dtype=z.dtype, device=z.device)
    s = torch.zeros_like(m)
    for n0 in range(0, z.shape[1], bn):
        chunk = z[:, n0:n0 + bn]
        m_new = torch.maximum(m, chunk.max(dim=1).values)
        old = s * torch.exp(m - m_new) if rescale else s
        s = (old if keep_sum else 0) + torch.exp(chunk - m_new[:, None]).sum(dim=1)
        m = m_new if update_m else m
    return m + torch.log(s)


def _top(p: dict) -> torch.Tensor:
    return p["z"].max(dim=1).values


class OnlineLse(P45Exercise):
    name, output = "p45_online_lse", "out"
    answer, solution = "online_lse_kernel", online_lse_kernel
    # GPU: 32 rows x 128 columns per step (N = 1024: 8 merges per row). Interpreter: 8 columns,
    # so N = 19 takes three chunks (8, 8, 3) and every merge is exercised.
    gpu_blocks, cpu_blocks = dict(BLOCK_M=32, BLOCK_N=128), dict(BLOCK_M=16, BLOCK_N=8)
    mistakes = (
        Mistake("every result is -inf: m never left -inf",
                "TODO 3: m = m_new at the end of each step (and m + log(s) in the store)",
                lambda p: _merge(p, update_m=False)),
        Mistake("the running sum was not rescaled when the maximum grew",
                "TODO 2: s = s * tl.exp(m - m_new) + ..., so the old terms are relative to m_new too",
                lambda p: _merge(p, rescale=False)),
        Mistake("only the last chunk of each row was summed: s was replaced, not merged",
                "TODO 2: keep the old sum: s = s * tl.exp(m - m_new) + tl.sum(...)",
                lambda p: _merge(p, keep_sum=False)),
        Mistake("out is log(s) alone: the row maximum m was not added back", "TODO 4: store m + tl.log(s)",
                lambda p: torch.logsumexp(p["z"], dim=1) - _top(p)),
        Mistake("out is m + s: the log is missing", "TODO 4: store m + tl.log(s)",
                lambda p: _top(p) + torch.exp(torch.logsumexp(p["z"], dim=1) - _top(p))),
    )
    hints = dict(
        raised="check the kernel's signature (keep the skeleton's parameters) and the TODO lines: "
               "tl.max and tl.sum take axis=1 and give one value per row",
        nothing_stored="the store is still a TODO: tl.store(out_ptr + rows, m + tl.log(s), mask=rows < M) "
                       "(TODO 4)",
        some_unwritten="NaN or Inf results: check that exp only sees z - m_new (never +inf) and "
                       "that every row < M is stored",
        outside="the store needs mask=rows < M: the last program's rows past M must not be written",
        specialised="nothing may assume N is a multiple of BLOCK_N: the load's mask and other=-inf "
                    "handle the last chunk",
        precision="keep m and s in fp32 and compute exp(z - m_new), never exp(z) alone",
        wrong="check the merge: m_new = max(m, chunk max); s = s * exp(m - m_new) + sum(exp(z - m_new)); "
              "m = m_new; then m + log(s)",
    )

    def launcher(self, kernel, model):
        def call(x: torch.Tensor) -> Run:
            with torch.no_grad(), tf32_matmul(False):
                z = model.linear2(torch.sigmoid(model.linear1(x))).contiguous()   # eager's logits
            (m, n), bl = z.shape, self.blocks(x.device)
            grid = (triton.cdiv(m, bl["BLOCK_M"]),)
            out, outside = guarded((m,), grid[0] * bl["BLOCK_M"], x.device)
            launch(kernel, grid, z, out, m, n, z.stride(0), **bl)
            return Run(out, out, outside)
        return call

    def parts(self, model, x):
        m64 = copy.deepcopy(model).double()
        with torch.no_grad():
            z = m64.linear2(torch.sigmoid(m64.linear1(x.double())))
        return dict(z=z, bn=self.blocks(x.device)["BLOCK_N"])

    def expected(self, p):
        return torch.logsumexp(p["z"], dim=1)


EXERCISE = OnlineLse()
