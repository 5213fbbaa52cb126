"""A kernel that only reads: every program sums float32 tiles of a buffer, ``passes`` times over,
into one float per program. It measures read bandwidth (``fusedkit.ceilings``): from DRAM for
a buffer far larger than L2, from L2 for one that fits and was read just before.

Loads are ``.cg`` (cached in L2, not in the SM's L1), so a pass over a buffer that fits in L2 is
served by L2, never by L1. Each pass starts one tile further on, so no program reads the same
tiles twice in a row. The sums are stored and checked by the caller (``passes`` times the
buffer's sum), so no load can be optimised away. Loaded like a step
(``load_step("common", "read_sum.py")``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedkit.kernels import load_step

_base = load_step("common", "triton_base.py")

BLOCK = 4096
"""float32 elements per tile (16 KiB): 16 per thread at 8 warps, four 16-byte loads each."""
WARPS = 8


@triton.jit
def _read_sum_kernel(src, out, n_tiles, passes, BLOCK: tl.constexpr):
    pid, programs = tl.program_id(0), tl.num_programs(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for p in range(passes):
        for t in range(pid, n_tiles, programs):
            tile = (t + p) % n_tiles            # shifted by one tile each pass
            offs = tile * BLOCK + tl.arange(0, BLOCK)   # whole tiles: no mask, 16-byte loads
            acc += tl.load(src + offs, cache_modifier=".cg")
    tl.store(out + pid, tl.sum(acc, axis=0))


def read_sum(src: torch.Tensor, out: torch.Tensor, passes: int) -> torch.Tensor:
    """Sum the contiguous float32 ``src`` (a whole number of :data:`BLOCK` tiles) ``passes``
    times; ``out`` (float32, one element per program) receives each program's partial sum, so
    ``out.sum()`` equals ``passes * src.sum()`` up to rounding. Returns ``out``."""
    if src.dtype != torch.float32 or not src.is_contiguous() or src.numel() % BLOCK:
        raise ValueError(f"src must be contiguous float32 with a multiple of {BLOCK} elements; got "
                         f"{src.dtype}, {src.numel()} elements, contiguous={src.is_contiguous()}")
    if out.dtype != torch.float32 or out.device != src.device or out.numel() < 1:
        raise ValueError("out must be a float32 tensor on src's device, one element per program")
    if passes < 1:
        raise ValueError(f"passes={passes}: allowed: an integer >= 1")
    with _base.on_device(src.device):
        _read_sum_kernel[(out.numel(),)](src, out, src.numel() // BLOCK, passes, BLOCK=BLOCK,
                                         num_warps=WARPS)
    return out
