# Computes: y = LeakyReLU((x @ W.T + b) * multiplier), one persistent TMA-fed Triton kernel.
# Changed: one program per SM walks the tiles; TMA loads and stores; next tile loads during the epilogue.
# Roofline: compute-bound; tf32 0.28 ms (H200 datasheet); the target is eager's cuBLAS TF32 GEMM.
"""Step 10 of problem 12: a persistent, TMA-fed Triton GEMM with the epilogue fused.

Why: in step 08 every output tile is a new program that starts with an empty pipeline and
ends with stores while its SM's tensor cores idle; at 1024x8192x8192 that happens 256-512
times on 132 SMs. Here the grid holds one program per SM and each program walks tiles
``pid, pid + NUM_SMS, ...`` (grouped as in step 08, so that programs running together
share W column-blocks in L2). Two ways to hide the tile boundaries, chosen per config:

* ``FLATTEN`` (``tl.range(..., flatten=True)``): Triton fuses the tile loop and the K loop
  into one loop and software-pipelines it over ``num_stages`` shared-memory buffers, so
  the next tile's first K-chunks are in flight while this tile's epilogue runs.
* ``WARP_SPECIALIZE`` (``tl.range(..., warp_specialize=True)``): Triton 3.6's Hopper pass
  gives the TMA loads to a producer warp group and the MMAs + epilogue to two consumer
  warp groups (each takes half of BLOCK_M), synchronised by mbarriers, for 12 warps in
  all. It needs ``num_warps=4`` and an unflattened loop: with 8 warps, or with
  ``flatten=True``, the kernel compiles unspecialized (checked by compiling for sm_90a;
  Triton's tutorial 09 also turns flatten off for warp specialization on Hopper).

Data movement: x (M, K) and W (N, K) are read by the TMA engine through tensor
descriptors (``tl.make_tensor_descriptor``; each program writes its three 128-byte
descriptors into global scratch memory that ``triton.set_allocator`` provides), which
zero-fill boxes reaching past M, N or K, so no masks. The epilogue (+ bias, * multiplier,
LeakyReLU) runs on the fp32 accumulator in registers, which is then staged in shared
memory and written by a TMA store (clipped at the edges). With ``SPLIT_N=2`` y is stored
as two (BLOCK_M, BLOCK_N/2) slices, so the staging buffer is half a tile (a 128x256 fp32
tile is 128 KB) and one more pipeline stage fits in the 227 KB. The halves come from
splitting the accumulator (``reshape`` + ``permute`` + ``split``), except under warp
specialization, whose Hopper pass rejects those ops ("unsupported op type"): there the
tile is computed as two half-width accumulators from the start. (The reverse does not
work either: two accumulators in the flattened loop make ptxas serialize the wgmmas,
warning C7515.) ``SPLIT_N=4`` splits each half again and stores four quarter-width
slices through a quarter-tile buffer (flattened loop only).

Clusters (``num_ctas=2`` in the config, sm_90+): a program is then a cluster of two CTAs
on two SMs, Triton 3.6 splits each tile's columns between them (each CTA loads the whole
x box: no TMA multicast), and the wrapper launches one program per two SMs. The
autotuner's configs all use one CTA; only :data:`PROBE_SPACE` tries clusters.

TMA's rules (16-byte aligned base addresses and row strides, unit stride along K) hold
for contiguous fp32 inputs with ``K % 4 == 0`` and ``N % 4 == 0``. Inputs that break them
(K or N not a multiple of 4, a misaligned view, a transposed x or W) are computed by
step 08's kernel instead, which reads any strides; :func:`uses_tma` says which path a
call takes. ``precision="ieee"`` also goes to step 08: its FMA dot reading TMA's swizzled
tiles makes ptxas spill 0.4-10 KB per thread for every tile tried (sm_90a, Triton 3.6),
while step 08's ieee kernel spills nothing; pass ``config=`` to run this kernel in ieee.

CPU: under Triton's interpreter (``TRITON_INTERPRET=1``, CPU tensors) the same kernel
runs: descriptors become masked loads and stores, ``flatten`` / ``warp_specialize`` are
ignored (one algorithm, no switch needed), and the grid is capped at
``INTERPRET_PROGRAMS`` programs so that each walks several tiles (a cluster runs as one
program). As in step 08 the interpreter computes every dot in fp32 whatever
``precision`` says.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from fusedkit.kernels import load_step

_base = load_step("common", "triton_base.py")
INTERPRET: bool = _base.INTERPRET  # decided when triton.jit decorates, i.e. at import
check_inputs = load_step("common", "checks.py").check_linear
_on_device = _base.on_device
# Operands TMA cannot read go to step 08 as a whole: its public wrapper, the same math.
_step08 = load_step("p12", "08_triton_fused.py")
PRECISIONS: tuple[str, ...] = ("ieee", "tf32x3", "tf32")  # step 08's, which it falls back to

# Under the interpreter the persistent grid has this many programs (the tests' shapes have
# 1 to 90 tiles): few enough that programs loop over several tiles, exercising the walk.
INTERPRET_PROGRAMS = 3

# TMA needs 16-byte aligned base addresses and row strides: 4 fp32 elements.
_TMA_ALIGN_BYTES = 16

# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, SPLIT_N, WARP_SPECIALIZE, GROUP_M, num_ctas)
ConfigKey = tuple[int, int, int, int, int, int, bool, int, int]


def make_config(bm: int, bn: int, bk: int, stages: int, warps: int, split_n: int,
                warp_specialize: bool, group_m: int = 8, num_ctas: int = 1) -> triton.Config:
    """A config of this kernel: (BLOCK_M, BLOCK_N, BLOCK_K) tile, pipeline stages, warps
    (per partition when warp-specialized), SPLIT_N column slices of y per store (1, 2, or
    4 when not warp-specialized), WARP_SPECIALIZE, GROUP_M row-blocks per group of the tile
    order (8 as in step 08), and num_ctas CTAs per program (a thread-block cluster, sm_90+:
    Triton splits each tile between them). FLATTEN is the opposite of WARP_SPECIALIZE (see
    the module docstring)."""
    allowed = (1, 2) if warp_specialize else (1, 2, 4)
    if split_n not in allowed or bn % split_n:
        raise ValueError(f"split_n={split_n!r}: must be in {allowed} (warp_specialize="
                         f"{warp_specialize}) and divide bn={bn}")
    if group_m < 1:
        raise ValueError(f"group_m={group_m!r}: must be >= 1")
    if num_ctas not in (1, 2):
        raise ValueError(f"num_ctas={num_ctas!r}: must be 1 or 2")
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m,
                          "SPLIT_N": split_n, "WARP_SPECIALIZE": warp_specialize,
                          "FLATTEN": not warp_specialize},
                         num_stages=stages, num_warps=warps, num_ctas=num_ctas)


# Keys are ConfigKey tuples, make_config's arguments. Shared memory is
# 4 * (BLOCK_M + BLOCK_N) * BLOCK_K bytes per stage plus the staging buffer,
# 4 * BLOCK_M * BLOCK_N / SPLIT_N bytes; the H100/H200 limit is 227 KB. The sizes in the
# comments are what Triton 3.6 allocates for sm_90a (compiled on a CPU, no GPU needed);
# none of these spills registers or makes ptxas serialize the wgmmas (C7515).
_GPU_SPACE: dict[str, list[ConfigKey]] = {
    "tf32": [
        (128, 256, 32, 3, 8, 2, False, 8, 1),  # step 08's best tile (0.427 ms there), 208 KB
        # The two best of PROBE_SPACE's 15 on an H200 (data/logs/probe_p12_tf32_h200_run2.txt):
        # 0.3847 and 0.3860 ms against 0.3896 ms for the line above, eager TF32 0.3720 ms.
        (128, 256, 32, 3, 8, 4, False, 8, 1),  # quarter-tile staging, 176 KB
        (128, 256, 32, 4, 8, 4, False, 8, 1),  # quarter-tile staging buys a 4th stage, 224 KB
        (128, 128, 32, 4, 4, 1, False, 8, 1),  # the best non-persistent TMA tile (0.414 ms), 192.5 KB
        (128, 128, 32, 6, 4, 2, False, 8, 1),  # deeper pipeline thanks to the half-tile staging, 224 KB
        (128, 128, 64, 3, 8, 2, False, 8, 1),  # half as many K steps, 224 KB
        # Warp-specialized configs are left out: on an H200 (2026-11-29, devtools/probe_p12_tf32.py,
        # data/logs/probe_p12_tf32_h200.txt) two of three returned NaN and the third was slower
        # (0.434 ms). The autotuner checks no results, so a wrong config must never be listed.
    ],
    # 3 MMAs per chunk: step 08's best tile (1.43 ms) and a lighter one; 224 / 160 KB.
    # (128x256x32 spills 240 bytes, warp-specialized 128x256 spills 600: left out.)
    "tf32x3": [(128, 128, 64, 3, 8, 2, False, 8, 1), (128, 128, 32, 4, 8, 2, False, 8, 1)],
    "ieee": [],  # computed by step 08 (see the module docstring)
}
# Every precision's GPU configs (public: the probe times each, the tests run each in the interpreter).
GPU_CONFIGS: dict[str, list[triton.Config]] = {p: [make_config(*k) for k in keys]
                                               for p, keys in _GPU_SPACE.items()}

# A wider set for devtools/probe_p12_tf32.py to time on a GPU (the autotuner never sees it):
# which tile, pipeline depth, store split, tile order and cluster size beat eager's cuBLAS
# TF32 GEMM at 1024x8192x8192? The first entry is the best config measured so far (0.3825
# ms vs eager 0.3693 ms on an H200, data/logs/probe_p12_tf32_h200.txt), repeated as the
# same run's reference. Each entry was compiled for sm_90a with Triton 3.6 and its bundled
# ptxas (tests/test_p12_persistent.py does it again): the shared memory in its comment is
# Triton's allocation, all fit in 227 KB, none spills, none draws ptxas warning C7515. No
# entry is warp-specialized (NaN on the H200). GROUP_M 16 equals 8 at M=1024 with 128-row
# tiles (8 row-blocks, one group either way), so it only appears with 64-row tiles.
# Compiled and left out: any 128x256 or 256x128 tile with 4 warps (a 128 KB fp32
# accumulator in one warp group: 1-2 KB of spills per thread); num_ctas=2 with SPLIT_N 2
# or 4, or with BLOCK_M 256 (Triton fails in ConvertTritonToTritonGPU: "Invalid bases
# passed to LinearLayout", "Failed to find a valid layout"). With num_ctas=2 Triton 3.6
# splits each tile's columns between the two CTAs, without TMA multicast: each CTA loads
# the whole x box. Those entries come last: a cluster kernel that faults would leave the
# CUDA context unusable for every config after it.
PROBE_SPACE: dict[str, list[ConfigKey]] = {
    "tf32": [
        (128, 256, 32, 3, 8, 2, False, 8, 1),   # 208 KB: the best so far, this run's reference
        (128, 256, 32, 4, 8, 4, False, 8, 1),   # 224 KB: quarter-tile staging buys a 4th stage
        (128, 256, 32, 3, 8, 4, False, 8, 1),   # 176 KB: 3 stages, 4 stores: the cost of quarters (179 vs 202 regs)
        (128, 256, 64, 2, 8, 4, False, 8, 1),   # 224 KB: BLOCK_K 64, half the barrier waits, 2 stages
        (128, 256, 16, 8, 8, 4, False, 8, 1),   # 224 KB: BLOCK_K 16 (64-byte swizzle), 8 shallow stages
        (128, 256, 16, 6, 8, 2, False, 8, 1),   # 208 KB: BLOCK_K 16 with half-tile staging
        (128, 256, 32, 3, 8, 2, False, 4, 1),   # 208 KB: GROUP_M 4, W streamed twice, x half as often
        (128, 256, 32, 4, 8, 4, False, 4, 1),   # 224 KB: GROUP_M 4 on the 4-stage pipeline
        (256, 128, 32, 4, 8, 4, False, 8, 1),   # 224 KB: tall tile, each warp group 128x128 (164 regs)
        (256, 128, 32, 3, 8, 2, False, 8, 1),   # 208 KB: tall tile, half-tile staging
        (256, 128, 64, 2, 8, 4, False, 8, 1),   # 224 KB: tall tile, BLOCK_K 64
        (128, 128, 32, 6, 8, 4, False, 8, 1),   # 208 KB: half-size tiles, 8 warps (2 warp groups of 64x128, 97 regs), 6 stages
        (64, 256, 32, 5, 4, 4, False, 16, 1),   # 216 KB: one warp group m64n256; GROUP_M 16 spans all 16 row-blocks
        (128, 256, 32, 4, 8, 1, False, 8, 2),   # 193 KB per CTA: a 2-CTA cluster, each CTA 128x128 (8 warps)
        (128, 512, 32, 2, 8, 1, False, 8, 2),   # 226 KB per CTA: a 2-CTA cluster, each CTA 128x256, 2 stages
    ],
}


def config_key(c: triton.Config) -> ConfigKey:
    """(BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, SPLIT_N, WARP_SPECIALIZE, GROUP_M,
    num_ctas) of a config: the arguments of :func:`make_config`, in order."""
    kw = c.kwargs
    return (kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], c.num_stages, c.num_warps,
            kw["SPLIT_N"], kw["WARP_SPECIALIZE"], kw["GROUP_M"], c.num_ctas)


def configs_for(precision: str) -> list[triton.Config]:
    """The configs the autotuner tries for ``precision`` on a GPU (empty for "ieee",
    which step 08 computes); under the interpreter, the one small interpreter config."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: allowed values are {PRECISIONS}")
    return list(_CONFIGS) if INTERPRET else list(GPU_CONFIGS[precision])


def _prune_by_precision(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Keep only the configs listed for this call's precision (one autotuner, three spaces)."""
    wanted = set(_GPU_SPACE[kwargs["INPUT_PRECISION"]])
    return [c for c in configs if config_key(c) in wanted]


if INTERPRET:
    # One small config: a single config is neither pruned nor benchmarked. 16x16 tiles keep
    # numpy's work small; SPLIT_N=2 runs the split epilogue (tests pass config= for the
    # other paths).
    _CONFIGS = [make_config(16, 16, 16, 1, 4, 2, False)]
    _PRUNE: dict = {}
else:
    _CONFIGS = list({config_key(c): c for p in PRECISIONS for c in GPU_CONFIGS[p]}.values())
    _PRUNE = {"early_config_prune": _prune_by_precision}


@triton.jit
def _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    """Grouped order (step 08's): GROUP_M row-blocks down one column-block, then right."""
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)  # the last group may be short
    pid_m = first_pid_m + (tile_id % num_pid_in_group) % group_size_m
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _halves(acc, BLOCK_M: tl.constexpr, HALF: tl.constexpr):
    """The left and right column halves of a (BLOCK_M, 2 * HALF) register tile."""
    # (M, 2, HALF)[m, h, j] = acc[m, h * HALF + j]; moving h last lets split take it apart.
    return tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, HALF)), (0, 2, 1)))


@triton.jit
def _epilogue_store(y_desc, acc, b_ptr, stride_b, off_m, off_n, N, multiplier, negative_slope,
                    BLOCK_N: tl.constexpr):
    """bias, multiply, LeakyReLU on one (BLOCK_M, BLOCK_N) accumulator, then a TMA store of it."""
    offs_n = off_n + tl.arange(0, BLOCK_N)
    bias = tl.load(b_ptr + offs_n * stride_b, mask=offs_n < N, other=0.0)  # BLOCK_N * 4 bytes
    v = (acc + bias[None, :]) * multiplier  # eager's order: + b, * multiplier, LeakyReLU
    v = tl.where(v > 0, v, v * negative_slope)
    # Registers -> shared-memory staging buffer -> global; rows >= M and columns >= N are
    # clipped by the TMA unit, so no masks.
    y_desc.store([off_m, off_n], v)


@triton.autotune(configs=_CONFIGS, key=["M", "N", "K", "INPUT_PRECISION"], prune_configs_by=_PRUNE)
@triton.jit
def _persistent_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_wn, stride_b,
    multiplier, negative_slope,
    INPUT_PRECISION: tl.constexpr, NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_N: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr,
):
    tl.static_assert(SPLIT_N == 1 or SPLIT_N == 2 or SPLIT_N == 4, "SPLIT_N must be 1, 2 or 4")
    tl.static_assert(SPLIT_N != 4 or not WARP_SPECIALIZE, "SPLIT_N=4 is not warp-specialized")
    HALF_N: tl.constexpr = BLOCK_N // 2        # the accumulator's column halves
    SLICE_N: tl.constexpr = BLOCK_N // SPLIT_N  # width of one stored column slice of y
    # Two ways to get the halves (see the module docstring): two half-width accumulators
    # when warp-specialized, else one accumulator split after the K loop.
    TWO_ACC: tl.constexpr = (SPLIT_N == 2) and WARP_SPECIALIZE
    W_BOX_N: tl.constexpr = HALF_N if TWO_ACC else BLOCK_N
    # --- descriptors: the TMA unit copies (BLOCK_M, BLOCK_K) boxes of x and (W_BOX_N,
    # BLOCK_K) boxes of W (K contiguous in both: the "K-major" layout tf32 wgmma requires)
    # into swizzled shared memory; boxes reaching past M, N or K are zero-filled: no masks.
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[stride_xm, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[stride_wn, 1],
                                       block_shape=[W_BOX_N, BLOCK_K])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, SLICE_N])

    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # The epilogue recomputes its tile from its own counter, not from tile_id: once the loops
    # are flattened and pipelined, the next tile's loads are issued before this epilogue, so
    # values shared by the two would have to live across pipeline stages (Triton's tutorial
    # 09 keeps them apart the same way).
    tile_id_c = start_pid - NUM_SMS

    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=FLATTEN,
                            warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        # "ieee": fp32 FMAs; "tf32": one tensor-core pass; "tf32x3": three passes.
        if TWO_ACC:
            # The tile as two column halves, each its own accumulator and W box. (In the
            # flattened loop two accumulators make ptxas serialize the wgmmas, warning C7515;
            # the warp-specialized consumers issue them one at a time anyway.)
            acc0 = tl.zeros((BLOCK_M, HALF_N), dtype=tl.float32)
            acc1 = tl.zeros((BLOCK_M, HALF_N), dtype=tl.float32)
            for ki in range(k_tiles):
                a = x_desc.load([off_m, ki * BLOCK_K])             # (BLOCK_M, BLOCK_K) of x
                w0 = w_desc.load([off_n, ki * BLOCK_K])            # (HALF_N, BLOCK_K): left half
                w1 = w_desc.load([off_n + HALF_N, ki * BLOCK_K])   # right half
                acc0 = tl.dot(a, w0.T, acc0, input_precision=INPUT_PRECISION)
                acc1 = tl.dot(a, w1.T, acc1, input_precision=INPUT_PRECISION)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for ki in range(k_tiles):
                a = x_desc.load([off_m, ki * BLOCK_K])   # (BLOCK_M, BLOCK_K) of x
                w = w_desc.load([off_n, ki * BLOCK_K])   # (BLOCK_N, BLOCK_K) of W; .T is a view
                acc = tl.dot(a, w.T, acc, input_precision=INPUT_PRECISION)
            if SPLIT_N > 1:
                # (Triton 3.6's Hopper warp specialization rejects the ops of _halves.)
                acc0, acc1 = _halves(acc, BLOCK_M, HALF_N)

        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        # --- fused epilogue, one TMA store per column slice.
        if SPLIT_N == 1:
            _epilogue_store(y_desc, acc, b_ptr, stride_b, off_m, off_n, N, multiplier,
                            negative_slope, BLOCK_N)
        elif SPLIT_N == 2:
            _epilogue_store(y_desc, acc0, b_ptr, stride_b, off_m, off_n, N, multiplier,
                            negative_slope, HALF_N)
            _epilogue_store(y_desc, acc1, b_ptr, stride_b, off_m, off_n + HALF_N, N, multiplier,
                            negative_slope, HALF_N)
        else:
            # Quarters: each half split again, stored left to right through one staging
            # buffer of BLOCK_M x BLOCK_N/4 (a quarter of the tile's 4 * BLOCK_M * BLOCK_N bytes).
            q0, q1 = _halves(acc0, BLOCK_M, SLICE_N)
            q2, q3 = _halves(acc1, BLOCK_M, SLICE_N)
            _epilogue_store(y_desc, q0, b_ptr, stride_b, off_m, off_n, N, multiplier,
                            negative_slope, SLICE_N)
            _epilogue_store(y_desc, q1, b_ptr, stride_b, off_m, off_n + SLICE_N, N, multiplier,
                            negative_slope, SLICE_N)
            _epilogue_store(y_desc, q2, b_ptr, stride_b, off_m, off_n + 2 * SLICE_N, N, multiplier,
                            negative_slope, SLICE_N)
            _epilogue_store(y_desc, q3, b_ptr, stride_b, off_m, off_n + 3 * SLICE_N, N, multiplier,
                            negative_slope, SLICE_N)


def _tma_ready(t: torch.Tensor) -> bool:
    """True when TMA can read a 2-D fp32 tensor as it is: unit stride along dim 1, rows
    that do not overlap (an expanded view's row stride 0 is out), 16-byte aligned start
    address and row stride."""
    return (t.stride(1) == 1 and t.stride(0) >= t.shape[1]
            and t.data_ptr() % _TMA_ALIGN_BYTES == 0
            and (t.stride(0) * t.element_size()) % _TMA_ALIGN_BYTES == 0)


def uses_tma(x: torch.Tensor, weight: torch.Tensor, precision: str = "tf32") -> bool:
    """Whether ``linear_leakyrelu_persistent`` runs this step's TMA kernel (True) or step
    05's kernel (False) for these operands. y is allocated (M, N) contiguous, so its row
    stride needs ``N % 4 == 0``; "ieee" always goes to step 08."""
    return (precision != "ieee" and _tma_ready(x) and _tma_ready(weight)
            and (weight.shape[0] * 4) % _TMA_ALIGN_BYTES == 0)


def _torch_alloc(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Global scratch for the descriptors the kernel builds (384-512 bytes per program),
    on the current CUDA device. torch's blocks are 512-byte aligned; Triton asks for 128."""
    return torch.empty(size, device="cuda", dtype=torch.int8)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def linear_leakyrelu_persistent(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                                multiplier: float, negative_slope: float,
                                precision: str = "tf32",
                                config: triton.Config | None = None) -> torch.Tensor:
    """y = LeakyReLU((x @ weight.T + bias) * multiplier, negative_slope), persistent + TMA.

    Args:
        x: (M, K) float32 activations.
        weight: (N, K) float32, ``nn.Linear.weight``.
        bias: (N,) float32 (any stride).
        multiplier: scalar applied after the bias (computed in fp32).
        negative_slope: LeakyReLU slope for negative values (computed in fp32).
        precision: ``tl.dot`` input precision: "tf32" (default; one tensor-core pass,
            ~1e-3 relative error), "tf32x3" (three passes, about fp32 accuracy) or "ieee"
            (fp32 FMAs; computed by step 08's kernel unless ``config`` is given).
        config: run exactly this config (from :func:`make_config`) instead of autotuning,
            e.g. to time every config of :func:`configs_for`. It needs TMA-ready operands.

    Returns:
        (M, N) float32, contiguous, on x's device.

    Any M, N, K >= 1 works. Operands that break TMA's rules (see :func:`uses_tma`: K or N
    not a multiple of 4, a misaligned or transposed view) are computed by step 08's kernel
    (same math, pointer loads). The kernel builds its descriptors in global scratch
    memory, so this function installs a torch-backed allocator with
    ``triton.set_allocator`` (as Triton's tutorials do), replacing any allocator set before
    in this thread. The first call for a new (M, N, K, precision) autotunes (seconds).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: allowed values are {PRECISIONS}")
    if config is not None and not isinstance(config, triton.Config):
        raise TypeError(f"config={config!r}: must be a triton.Config from make_config, or None")
    m, n, k = check_inputs(x, weight, bias, multiplier, negative_slope)
    tma_ok = uses_tma(x, weight, precision="tf32")  # the operand rules, whatever the precision
    if config is None and not (tma_ok and precision != "ieee"):
        return _step08.linear_leakyrelu(x, weight, bias, multiplier, negative_slope, precision)
    if not tma_ok:
        raise ValueError(f"config={config_key(config)} runs the TMA kernel, which needs "
                         f"x.stride()={x.stride()} and weight.stride()={weight.stride()} to be "
                         f"(multiple of 4, 1), 16-byte aligned data and N={n} a multiple of 4")

    y = torch.empty((m, n), device=x.device, dtype=torch.float32)
    if INTERPRET:
        num_programs = INTERPRET_PROGRAMS
    else:
        # A program is a cluster of num_ctas CTAs (each on its own SM): one program per
        # num_ctas SMs. The autotuned configs all have num_ctas=1.
        num_programs = _num_sms(x.device.index) // (1 if config is None else config.num_ctas)
        triton.set_allocator(_torch_alloc)

    def grid(meta: dict) -> tuple[int]:
        # Persistent: one program per SM (per cluster), never more programs than tiles.
        return (min(num_programs, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])),)

    args = (x, weight, bias, y, m, n, k, x.stride(0), weight.stride(0), bias.stride(0),
            float(multiplier), float(negative_slope))
    with _on_device(x.device):
        if config is None:
            _persistent_kernel[grid](*args, INPUT_PRECISION=precision, NUM_SMS=num_programs)
        else:
            # Past the autotuner, straight to the jitted kernel with this config's values.
            _persistent_kernel.fn[grid](*args, INPUT_PRECISION=precision, NUM_SMS=num_programs,
                                        **config.all_kwargs())
    return y
