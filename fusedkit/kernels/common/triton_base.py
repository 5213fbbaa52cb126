"""What every tiled Triton GEMM of the workbook shares: the interpreter flag, the device guard,
the autotune config maker, the grouped tile order, the fp32-accumulating dot-product loop and
the sigmoid of the epilogues.

Loaded like a step (``load_step("common", "triton_base.py")``), once per process (or per
exported ModelNew). Kernels read module-level JIT functions only, so a step that calls one of
these aliases it at its own module level (``grouped_tile = _base.grouped_tile``).
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable

import torch
import triton
import triton.language as tl


def _interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (read once, like triton.jit does)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:  # Triton >= 3.4 parses TRITON_INTERPRET itself ("1", "true", "on" ...)
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


# triton.jit decides at decoration time whether it builds a GPU kernel or an interpreted
# one, so the tile configurations are chosen at import time as well.
INTERPRET = _interpreting()

# One small config under the interpreter: a single config is neither pruned nor benchmarked,
# and small tiles keep numpy's work cheap on test shapes.
INTERPRET_TILE = (32, 32, 32, 1, 4)


def on_device(device: torch.device) -> contextlib.AbstractContextManager:
    """Triton launches on torch's current CUDA device: make it the tensors' device."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def make_config(bm: int, bn: int, bk: int, stages: int, warps: int) -> triton.Config:
    """A (BLOCK_M, BLOCK_N, BLOCK_K) tile with its pipeline stages and warps, GROUP_M=8:
    eight row-blocks of tiles share each column-block of W while it sits in L2."""
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                         num_stages=stages, num_warps=warps)


def config_key(c: triton.Config) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) of a config: :func:`make_config`'s arguments."""
    kw = c.kwargs
    return (kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], c.num_stages, c.num_warps)


def autotune_space(space: dict[str, list[tuple[int, int, int, int, int]]]
                   ) -> tuple[list[triton.Config], Callable[..., list[triton.Config]]]:
    """The configs of one autotuner serving several dot precisions, and its pruner.

    ``space`` maps each precision to its (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) keys.
    On a GPU the configs are the union of the keys and the pruner keeps the call's
    INPUT_PRECISION subset; under the interpreter one small config.
    """
    def prune(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
        wanted = set(space[kwargs["INPUT_PRECISION"]])
        return [c for c in configs if config_key(c) in wanted]

    if INTERPRET:
        return [make_config(*INTERPRET_TILE)], prune
    keys = dict.fromkeys(k for keys in space.values() for k in keys)  # union, in order
    return [make_config(*k) for k in keys], prune


def small_batch_configs(configs: list[triton.Config], m: int, n: int, sms: int
                        ) -> list[triton.Config]:
    """The configs worth timing for an (m, n) output that leaves SMs idle (fewer tiles than
    ``sms`` under every config): those with the smallest BLOCK_M, and of them the ones with the
    most tiles. With at least one tile per SM under some config, all of them.

    At a few rows the GEMM streams the weights from HBM, and every tile still runs BLOCK_M rows
    of MMAs, nearly all on rows past M: at 4 rows a 128-row tile does twice the wasted tensor
    work of a 64-row one. Problem 12's sweeps had recorded step 9 at 0.116 ms in some runs and
    0.2-0.45 ms in others at 4-64 rows, the autotuner free to pick either; with only 128 x 64
    tiles left (commit 96996dc) 4 rows took 0.227 ms. With this choice (c4e3105) 16 and 64 rows
    ran a steady 0.116-0.119 ms; 4 rows still took 0.16-0.22 ms, for a reason not found yet
    (devtools.small_batch_probe separates host time from GPU time there)."""
    def tiles(c: triton.Config) -> int:
        return triton.cdiv(m, c.kwargs["BLOCK_M"]) * triton.cdiv(n, c.kwargs["BLOCK_N"])

    if not configs or max(map(tiles, configs)) >= sms:
        return list(configs)
    smallest = min(c.kwargs["BLOCK_M"] for c in configs)
    left = [c for c in configs if c.kwargs["BLOCK_M"] == smallest]
    most = max(map(tiles, left))
    return [c for c in left if tiles(c) == most]


def tile_grid(m: int, n: int) -> Callable[[dict], tuple[int]]:
    """The launch grid of a one-program-per-tile GEMM: every (BLOCK_M, BLOCK_N) output tile
    in one dimension; the kernel remaps ids into GROUP_M-tall groups (:func:`grouped_tile`)."""
    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
    return grid


@triton.jit
def grouped_tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of this program in grouped order: consecutive programs walk GROUP_M
    row-blocks down one column of tiles before moving right, so the weight tiles they share
    are still in L2."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)  # the last group may be short
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def dot_tile(a_ptr, w_ptr, M, N, K, stride_am, stride_ak, stride_wn, stride_wk, pid_m, pid_n,
             INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    """fp32 accumulator of A[tile rows] @ W[tile cols].T for A (M, K) and W (N, K), any strides.

    Rows/columns past M/N wrap around (% M, % N): the loads stay in bounds without masks,
    and the caller's store masks the wrapped results away."""
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    # int64 row offsets: M * stride_am or N * stride_wn can pass 2**31 elements on big inputs.
    # The A tile is (BLOCK_M, BLOCK_K); W is read as its transpose (BLOCK_K, BLOCK_N) through
    # the strides, no copy; with contiguous operands K is the unit-stride axis of both tiles.
    a_ptrs = a_ptr + (offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak)
    w_ptrs = w_ptr + (offs_k[:, None] * stride_wk + offs_n[None, :].to(tl.int64) * stride_wn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(w_ptrs)
        else:
            # Zero-fill past K so the tail chunk adds nothing to the dot product.
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        # "ieee": fp32 FMAs; "tf32": one tensor-core pass on 10-bit mantissas;
        # "tf32x3": big*big + big*small + small*big, three passes recovering ~fp32 accuracy.
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk
    return acc


@triton.jit
def sigmoid(v):
    """1 / (1 + exp(-v)) for v >= 0 and exp(v) / (1 + exp(v)) below: exp never overflows
    and tiny outputs keep their relative accuracy."""
    e = tl.exp(-tl.abs(v))
    return tl.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
