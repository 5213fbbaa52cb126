"""How long one call of a Triton variant takes in Triton's CPU interpreter, before running it.

Why not count FLOPs: the interpreter runs every program instance one after the other, and
each program runs its K loop in Python, one numpy operation per ``tl`` call on a whole
padded tile. Its cost is per program and per loop iteration, whatever the useful work:
problem 12 at ``batch_size=1`` with 8192 features is only 1.3e8 useful FLOPs, but the
kernels compute 32-row tiles for that one row, 256 programs of 256 K-steps each, about a
minute on two cores.

So the estimate comes from the launches a variant's wrapper makes at the given sizes
(:func:`launches`): grid size, the block sizes the kernels use under the interpreter (read
from the step modules: each autotuned kernel has ONE config there, so nothing is
benchmarked; see :func:`_blocks`), K-loop iterations per program, padded tile FLOPs
(``2 * BLOCK_M * BLOCK_N * BLOCK_K`` per ``tl.dot``; fp16x3 kernels do three dots per
step). The cost model, fitted by :func:`calibrate` to :data:`CALIBRATION`::

    cpu_seconds = a * iterations + a_masked * masked_iterations + b * padded_flops
                  + c * tiles + e * elementwise_elements + d * launches
    estimate    = SAFETY * cpu_seconds            (:data:`COSTS` holds a .. e, d)

``masked_iterations`` are K-steps whose loads carry masks (K not a multiple of BLOCK_K in
p12 step 08 style kernels): each mask is a few more interpreted ops, about four times the
cost of an unmasked step. ``tiles`` are kernel bodies (= programs, except for problem
12's persistent kernel, whose 3 programs walk all tiles): index set-up and epilogue.
``elementwise_elements`` are the padded elements of the loops that are not GEMMs: the
fp16x3 splits of x (every call) and of the weights (``first_call``: the split is cached
per weight tensor), whose 32x128 steps cost ~8 GEMM steps each, and the logsumexp
combine. ``d`` fitted to 0: a launch costs nothing beside its programs.

The fit uses the process's CPU time, which another busy process barely changes; the
:data:`SAFETY` factor 1.5 turns it into a wall time that stays an over-estimate while
such a process shares the two cores (wall/CPU was 1.00-1.07 in the calibration below and
up to 1.6 in a run beside another engineer's test suite).

Calibration (2-core AMD EPYC, Triton 3.6.0, numpy 2.3, torch 2.13 CPU; one call timed
after a warm-up call, as ``python -m fusedkit.interpreter_cost`` does; ``first`` rows time
the first call with new weights, which includes the fp16x3 weight split). Sizes are
p12 ``batch_size x in_features x out_features``, p45 ``batch x input x hidden x output``;
"pred" is :func:`estimate_seconds`, i.e. with the 1.5x safety factor:

================================  ================  =====  ======  ======  ======
variant                           sizes             first  wall s  cpu s   pred s
================================  ================  =====  ======  ======  ======
p12 triton_ieee                   17x33x65                   0.06    0.06    0.09
p12 triton_ieee                   64x256x256                 0.38    0.38    0.56
p12 triton_ieee                   128x512x512                2.42    2.26    2.82
p12 triton_ieee                   1x1024x1024                1.95    1.93    2.00
p12 triton_ieee                   2x2048x2048                5.78    5.45    6.37
p12 triton_ieee                   1x4096x256                 0.94    0.92    1.39
p12 triton_ieee                   33x1000x200                0.98    0.96    1.43
p12 triton_ieee                   5x1500x700                 1.87    1.84    3.04
p12 triton_ieee                   1x4096x4096               18.84   18.76   22.22
p12 triton_tf32x3                 1x2048x1024                2.48    2.38    3.19
p12 triton_tf32                   64x256x256                 0.46    0.45    0.56
p12 triton_fp16x3                 17x33x65                   0.06    0.06    0.12
p12 triton_fp16x3                 64x256x256                 0.59    0.57    0.77
p12 triton_fp16x3                 128x512x512                2.50    2.45    4.07
p12 triton_fp16x3                 1x2048x1024                4.04    3.92    5.38
p12 triton_fp16x3                 33x1000x200                1.04    0.99    1.50
p12 triton_fp16x3                 1x2048x2048       yes     18.53   17.93   20.34
p12 triton_fp16x3                 2x512x4096        yes      8.64    8.34   15.05
p12 triton_tf32_persistent        17x33x65                   0.08    0.08    0.09
p12 triton_tf32_persistent        16x32x64                   0.07    0.07    0.11
p12 triton_tf32_persistent        64x256x256                 1.59    1.57    2.37
p12 triton_tf32_persistent        1x1024x1024                3.18    3.15    4.59
p12 triton_tf32_persistent        2x2048x1024                4.59    4.51    7.54
p12 triton_tf32_persistent        1x4096x2048               14.99   14.96   26.90
p12 triton_tf32_persistent        33x1000x200                1.88    1.87    2.77
p45 triton_fused_lse_ieee         17x33x65x19                0.12    0.12    0.15
p45 triton_fused_lse_ieee         64x256x256x128             0.77    0.77    0.87
p45 triton_fused_lse_ieee         1x1024x1024x1024           2.69    2.64    4.04
p45 triton_fused_lse_ieee         1x2048x2048x1024           7.20    7.11    9.59
p45 triton_fused_lse_ieee         50x300x500x100             1.59    1.57    2.12
p45 triton_fused_lse_tf32         128x512x512x256            2.87    2.87    4.26
p45 triton_fused_lse_fp16x3       17x33x65x19                0.14    0.14    0.19
p45 triton_fused_lse_fp16x3       64x256x256x128             0.60    0.60    1.14
p45 triton_fused_lse_fp16x3       2x1024x2048x1024           6.44    6.21   11.39
p45 triton_fused_lse_fp16x3       128x512x512x256            3.62    3.57    6.02
p45 triton_fused_lse_fp16x3       2x1024x1024x512   yes      6.49    6.36    8.91
================================  ================  =====  ======  ======  ======

Predicted / measured wall time over these 36 calls: 1.02 to 1.98, median 1.46.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Iterable, NamedTuple, Sequence

from fusedkit.mode import ensure_triton_mode
from fusedkit.problems import Problem, Sizes, Variant, get, parse_sizes
from fusedkit.problems.base import nearby_odd

# Seconds one whole measurement of a variant (its checks, and its timing when asked for) may
# take in the interpreter before a caller refuses it: the same whole-run estimate that the
# explorer and the ladder announce before they start (run_seconds), so that a size refused
# here is never announced with another figure there.
RUN_SECONDS_BUDGET = 60.0
TIMING_REPEATS = 5
"""Repeat calls :func:`fusedkit.bench.time_calls` makes after a first one in the interpreter,
where one call costs more than the whole timing budget."""
# Estimates are CPU seconds times this: wall time on 2 cores shared with another busy process.
SAFETY = 1.5

# Tiles that the step files fix inside a wrapper's body, not reachable as module
# attributes; tests/test_interpreter_cost.py parses the files and fails if these change.
# common/fp16x3_split.py, split_fp16x3: `block_r, block_c = (32, 128) if INTERPRET else ...`
SPLIT_BLOCK = (32, 128)
# common/lse.py, combine_lse: `block_r, block_t = (128, 16) if INTERPRET else ...`
COMBINE_BLOCK = (128, 16)
# Elementwise cost of rounding one operand element in p45's step 06, in units of the
# model's elementwise element: fp16 is numpy's own cast; bf16 takes integer arithmetic and
# the interpreter's bit-by-bit widening. Read off one call at 128x512x512x256 (2-core EPYC):
# 1.6 s (fp16) and 4.6 s (bf16) of CPU time above step 04's on the same tiles.
LOWP_ROUNDING_WEIGHT = {"fp16": 1.0, "bf16": 3.0}
# Runs of each config when an autotuner with several configs tunes (triton.testing.do_bench:
# one call, five to estimate, then at least one warm-up and one timed run). Unused today:
# every autotuned kernel of the workbook has one config under the interpreter.
AUTOTUNE_RUNS_PER_CONFIG = 8


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a call, counted as the interpreter executes it (padded tiles)."""

    kernel: str
    programs: int            # grid size: program instances, run one after the other
    tiles: int               # kernel bodies (output tiles): = programs except a persistent walk
    iterations: int          # inner-loop iterations summed over all programs
    flops: float             # padded dot FLOPs: 2 * BLOCK_M * BLOCK_N * BLOCK_K per tl.dot
    masked: int = 0          # of the iterations, those whose loads carry masks
    elements: float = 0.0    # padded elements of elementwise loops (the splits, the combine)
    runs: int = 1            # times one call runs it (autotuning would run it many times)
    block: tuple[int, ...] = ()  # the tile, for messages


class Costs(NamedTuple):
    """The model's constants: seconds of CPU time per unit of each feature."""

    a: float         # per loop iteration
    a_masked: float  # extra per masked loop iteration
    b: float         # per padded dot FLOP
    c: float         # per tile (kernel body: index set-up and epilogue)
    e: float         # per padded element of an elementwise loop (about 10 numpy ops each)
    d: float         # per launch


FEATURES = ("iterations", "masked", "flops", "tiles", "elements", "launches")


def features(launches_: Iterable[Launch]) -> tuple[float, ...]:
    """The model's features of a call, in :data:`FEATURES` order (each launch times its runs)."""
    total = dict.fromkeys(FEATURES, 0.0)
    for ln in launches_:
        for name in FEATURES[:-1]:
            total[name] += getattr(ln, name) * ln.runs
        total["launches"] += ln.runs
    return tuple(total[name] for name in FEATURES)


# ----------------------------------------------------------------------------------------
# Launch geometry, read from the step modules
# ----------------------------------------------------------------------------------------
def _step(problem: str, filename: str) -> ModuleType:
    """A Triton step module, loaded in interpreter mode (the only mode this models)."""
    ensure_triton_mode()
    from fusedkit.kernels import load_step  # noqa: PLC0415 - imports Triton

    module = load_step(problem, filename)
    if not module.INTERPRET:
        raise RuntimeError("interpreter_cost models Triton's CPU interpreter, but this process "
                           "compiles Triton kernels for a GPU (TRITON_INTERPRET is not 1)")
    return module


def _blocks(kernel: object) -> tuple[tuple[int, int, int], int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K) of the config an autotuned kernel runs under the
    interpreter, and how many times the first call for new sizes runs the kernel."""
    configs = kernel.configs
    tiles = [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]) for c in configs]
    if len(configs) == 1:  # Triton's Autotuner neither prunes nor benchmarks a single config
        return tiles[0], 1
    # Several configs: the first call benchmarks each (pruning ignored, an upper bound);
    # charge the smallest tile, the costliest in the interpreter (most programs and steps).
    return min(tiles, key=lambda t: t[0] * t[1] * t[2]), 1 + AUTOTUNE_RUNS_PER_CONFIG * len(configs)


def _gemm(name: str, kernel: object, m: int, n: int, k: int, dots: int, first_call: bool) -> Launch:
    """A one-program-per-tile GEMM: grid cdiv(m, BM) * cdiv(n, BN), cdiv(k, BK) K-steps each."""
    (bm, bn, bk), runs = _blocks(kernel)
    programs = _cdiv(m, bm) * _cdiv(n, bn)
    iters = programs * _cdiv(k, bk)
    # The step files' own EVEN_K heuristic says whether the K loop's loads carry masks;
    # the fp16x3 kernels have none (K is padded to a multiple of BLOCK_K).
    rules = getattr(kernel.fn, "values", {})
    even = rules["EVEN_K"]({"K": k, "BLOCK_K": bk}) if "EVEN_K" in rules else True
    return Launch(name, programs=programs, tiles=programs, iterations=iters,
                  flops=iters * dots * 2.0 * bm * bn * bk, masked=0 if even else iters,
                  runs=runs if first_call else 1, block=(bm, bn, bk))


def _split(name: str, rows: int, cols: int, k_align: int) -> Launch:
    """split_fp16x3 of a (rows, cols) matrix: per block of rows, a max pass over the columns
    and a split pass over the columns padded to k_align."""
    br, bc = SPLIT_BLOCK
    programs = _cdiv(rows, br)
    cols_pad = _cdiv(cols, k_align) * k_align
    iters = programs * (_cdiv(cols, bc) + _cdiv(cols_pad, bc))
    return Launch(name, programs=programs, tiles=programs, iterations=iters, flops=0.0,
                  elements=iters * br * bc, block=(br, bc))


def _combine(m: int, n: int, gemm2: object) -> Launch:
    """combine_lse over the (m, cdiv(n, GEMM2's BLOCK_N)) partials: two passes per row block."""
    (_, bn, _), _ = _blocks(gemm2)
    br, bt = COMBINE_BLOCK
    programs = _cdiv(m, br)
    iters = programs * 2 * _cdiv(_cdiv(n, bn), bt)
    return Launch("combine_lse", programs=programs, tiles=programs, iterations=iters, flops=0.0,
                  elements=iters * br * bt, block=(br, bt))


def _rounding(gemm: Launch, weight: float) -> Launch:
    """``gemm`` plus the rounding of its operand tiles in every K-step (step 06 of p45):
    (BLOCK_M + BLOCK_N) * BLOCK_K elements per step, times ``weight``."""
    bm, bn, bk = gemm.block
    return replace(gemm, elements=gemm.elements + weight * gemm.iterations * (bm + bn) * bk)


def _dot_precision(variant: Variant) -> str:
    """The ``precision=`` a Triton step is built with: Variant says "fp32" for "ieee"."""
    return {"fp32": "ieee"}.get(variant.precision, variant.precision)


def _p12(variant: Variant, s: Sizes, first_call: bool) -> list[Launch]:
    m, k, n = s["batch_size"], s["in_features"], s["out_features"]
    if variant.source == "p12/09_triton_fp16x3.py":
        s09 = _step("p12", "09_triton_fp16x3.py")
        ka = s09.K_ALIGN
        out = [_split("split_x", m, k, ka),
               _gemm("fp16x3_linear_leakyrelu", s09._fp16x3_linear_leakyrelu_kernel, m, n,
                     _cdiv(k, ka) * ka, 3, first_call)]
        # W's split is cached per weight tensor: only a call with new weights pays it.
        return [_split("split_w", n, k, ka)] + out if first_call else out
    if variant.source == "p12/10_triton_persistent_tma.py":
        import torch  # noqa: PLC0415

        s10 = _step("p12", "10_triton_persistent_tma.py")
        # uses_tma reads strides, alignment and N mod 4 only: stand-ins with the same K and
        # N mod 4 decide it without allocating (M, K) and (N, K).
        if s10.uses_tma(torch.empty((1, k)), torch.empty((4 + n % 4, k)), _dot_precision(variant)):
            (bm, bn, bk), runs = _blocks(s10._persistent_kernel)
            tiles = _cdiv(m, bm) * _cdiv(n, bn)
            iters = tiles * _cdiv(k, bk)
            return [Launch("persistent", programs=min(s10.INTERPRET_PROGRAMS, tiles), tiles=tiles,
                           iterations=iters, flops=iters * 2.0 * bm * bn * bk,
                           runs=runs if first_call else 1, block=(bm, bn, bk))]
        # Operands TMA cannot read (K or N not a multiple of 4) go to step 08's kernel.
    if variant.source in ("p12/08_triton_fused.py", "p12/10_triton_persistent_tma.py"):
        s08 = _step("p12", "08_triton_fused.py")
        return [_gemm("linear_leakyrelu", s08._linear_leakyrelu_kernel, m, n, k, 1, first_call)]
    raise ValueError(f"variant={variant.slug!r} ({variant.source}) has no launch model in "
                     "fusedkit.interpreter_cost; add its kernels there")


def _p45(variant: Variant, s: Sizes, first_call: bool) -> list[Launch]:
    m, k, h, n = s["batch_size"], s["input_size"], s["hidden_size"], s["output_size"]
    if variant.source == "p45/04_triton_fused_lse.py":
        s04 = _step("p45", "04_triton_fused_lse.py")
        g2 = s04._linear_partial_lse_kernel
        return [_gemm("linear_sigmoid", s04._linear_sigmoid_kernel, m, h, k, 1, first_call),
                _gemm("linear_partial_lse", g2, m, n, h, 1, first_call),
                _combine(m, n, g2)]
    if variant.source == "p45/05_triton_fp16x3_lse.py":
        s05 = _step("p45", "05_triton_fp16x3_lse.py")
        ka = s05.K_ALIGN
        g2 = s05._fp16x3_linear_partial_lse_kernel
        out = [_split("split_x", m, k, ka),
               _gemm("fp16x3_linear_sigmoid", s05._fp16x3_linear_sigmoid_split_kernel, m, h,
                     _cdiv(k, ka) * ka, 3, first_call),
               _gemm("fp16x3_linear_partial_lse", g2, m, n, _cdiv(h, ka) * ka, 3, first_call),
               _combine(m, n, g2)]
        return [_split("split_w1", h, k, ka), _split("split_w2", n, h, ka)] + out if first_call else out
    if variant.source == "p45/06_triton_fp16_lse.py":
        s06 = _step("p45", "06_triton_fp16_lse.py")
        g2 = s06._linear_partial_lse_lowp_kernel
        # Each K-step also rounds its A tile and widens its B tile (both as elementwise
        # work); the weights' casts are torch's own (no interpreted loop): not counted.
        weight = LOWP_ROUNDING_WEIGHT[variant.precision]
        return [_rounding(_gemm("linear_sigmoid_lowp", s06._linear_sigmoid_lowp_kernel, m, h, k, 1,
                                first_call), weight),
                _rounding(_gemm("linear_partial_lse_lowp", g2, m, n, h, 1, first_call), weight),
                _combine(m, n, g2)]
    raise ValueError(f"variant={variant.slug!r} ({variant.source}) has no launch model in "
                     "fusedkit.interpreter_cost; add its kernels there")


_LAUNCH_MODELS = {"p12": _p12, "p45": _p45}


def _resolve(problem: Problem, variant: Variant | str) -> Variant:
    variant = problem.variant(variant) if isinstance(variant, str) else variant
    if not variant.triton:
        raise ValueError(f"variant={variant.slug!r} of {problem.key} is not a Triton kernel: the "
                         "interpreter cost model covers Triton variants only")
    return variant


def launches(problem: Problem, variant: Variant | str, sizes: Sizes, *,
             first_call: bool = False) -> list[Launch]:
    """The kernel launches one call of a Triton ``variant`` makes at ``sizes`` in the
    interpreter. ``first_call`` adds what only a call with new weights (or, with several
    autotune configs, new sizes) pays: the fp16x3 weight splits and autotuning runs."""
    variant = _resolve(problem, variant)
    if problem.key not in _LAUNCH_MODELS:
        raise ValueError(f"problem {problem.key} has no launch model in fusedkit.interpreter_cost")
    return _LAUNCH_MODELS[problem.key](variant, problem.sizes(sizes), first_call)


# ----------------------------------------------------------------------------------------
# The model and its calibration
# ----------------------------------------------------------------------------------------
# calibrate(CALIBRATION), rounded (tests check that the fit reproduces these). In words:
# 0.44 ms per K-step, +0.82 ms if its loads are masked, 5.1 ns per padded dot FLOP
# (0.33 ms per 32x32x32 dot), 17 ms per tile, 0.54 us per element of an elementwise loop.
COSTS = Costs(a=4.392e-4, a_masked=8.238e-4, b=5.062e-9, c=1.703e-2, e=5.367e-7, d=0.0)


def cpu_seconds(problem: Problem, variant: Variant | str, sizes: Sizes, *,
                first_call: bool = False, costs: Costs = COSTS) -> float:
    """The model's CPU seconds for one call (no safety factor)."""
    x = features(launches(problem, variant, sizes, first_call=first_call))
    return float(sum(ci * xi for ci, xi in zip(costs, x)))


def estimate_seconds(problem: Problem, variant: Variant | str, sizes: Sizes, *,
                     first_call: bool = False) -> float:
    """Predicted wall seconds of ONE call of a Triton ``variant`` at ``sizes`` in Triton's
    CPU interpreter on a 2-core machine (an over-estimate by about :data:`SAFETY`).

    By default the call is a repeat call (weights already split, kernels traced);
    ``first_call=True`` adds the fp16x3 weight splits that a call with new weights pays.
    Raises ValueError for a variant that is not a Triton kernel.
    """
    return SAFETY * cpu_seconds(problem, variant, sizes, first_call=first_call)


def run_seconds(problem: Problem, variant: Variant | str, sizes: Sizes, *,
                seeds: int, time_it: bool) -> float:
    """Predicted seconds a whole measurement of a Triton ``variant`` takes in the CPU
    interpreter, as :func:`fusedkit.measure.measure` runs it: each of ``seeds`` builds makes two
    calls (the first one splits new weights), the same once at the nearby odd shape, and (with
    ``time_it``) a timing of a first call plus :data:`TIMING_REPEATS` repeats."""

    variant = _resolve(problem, variant)
    sizes = problem.sizes(sizes)

    def pair(s: Sizes) -> float:
        return (estimate_seconds(problem, variant, s, first_call=True)
                + estimate_seconds(problem, variant, s))
    total = seeds * pair(sizes) + pair(nearby_odd(problem, sizes))
    if time_it:
        total += pair(sizes) + TIMING_REPEATS * estimate_seconds(problem, variant, sizes)
    return total


def _dominant(problem: Problem, variant: Variant, sizes: Sizes, seconds) -> str:
    """', <dim> dominates (<dim> <= V fits)': the dimension whose halving saves the most;
    ``seconds(sizes)`` is the whole-run estimate being refused."""
    base = seconds(sizes)
    saved = {}
    for dim in sizes:
        if sizes[dim] > 1:
            saved[dim] = base - seconds(dict(sizes, **{dim: sizes[dim] // 2}))
    if not saved or max(saved.values()) <= 0:
        return ""
    dim = max(saved, key=saved.get)
    lo, hi = 1, sizes[dim]  # largest value of dim that fits the budget, by bisection
    if seconds(dict(sizes, **{dim: 1})) > RUN_SECONDS_BUDGET:
        return f", {dim} dominates"
    while lo < hi:
        mid = (lo + hi + 1) // 2
        fits = seconds(dict(sizes, **{dim: mid})) <= RUN_SECONDS_BUDGET
        lo, hi = (mid, hi) if fits else (lo, mid - 1)
    return f", {dim} dominates ({dim} <= {lo} fits)"


def refusal(problem: Problem, variant: Variant | str, sizes: Sizes, *,
            seeds: int, time_it: bool) -> str:
    """Why a whole measurement of a Triton ``variant`` at ``sizes`` (``seeds`` builds checked,
    timed too with ``time_it``) is too slow for the interpreter: "" when its estimate,
    :func:`run_seconds`, is within :data:`RUN_SECONDS_BUDGET`."""
    variant = _resolve(problem, variant)
    sizes = problem.sizes(sizes)

    def seconds(s: Sizes) -> float:
        return run_seconds(problem, variant, s, seeds=seeds, time_it=time_it)
    est = seconds(sizes)
    if est <= RUN_SECONDS_BUDGET:
        return ""
    runs = launches(problem, variant, sizes, first_call=True)
    steps = sum(ln.iterations for ln in runs)
    what = "checked and timed" if time_it else "checked"
    return (f"would take about {est:.0f} s in Triton's CPU interpreter, {what} ({steps:,} loop "
            f"steps a call over {sum(ln.tiles for ln in runs):,} padded tiles); allowed: "
            f"{RUN_SECONDS_BUDGET:.0f} s; pick smaller sizes{_dominant(problem, variant, sizes, seconds)}")


class CalibrationPoint(NamedTuple):
    """One measured call: the variant, its sizes (``fmt_sizes`` form), whether it was a first
    call with new weights, and its wall and process CPU seconds."""

    problem: str
    variant: str
    sizes: str
    first_call: bool
    wall_s: float
    cpu_s: float


def calibrate(points: Sequence[CalibrationPoint]) -> Costs:
    """Non-negative constants minimising the RELATIVE error of the model on ``cpu_s``
    (each point weighs the same whether it took 0.05 s or 10 s)."""
    import numpy as np  # noqa: PLC0415
    from scipy.optimize import nnls  # noqa: PLC0415

    rows, y = [], []
    for pt in points:
        p = get(pt.problem)
        rows.append(features(launches(p, pt.variant, parse_sizes(pt.sizes), first_call=pt.first_call)))
        y.append(pt.cpu_s)
    x, y = np.asarray(rows, dtype=float), np.asarray(y, dtype=float)
    a = x / y[:, None]
    scale = np.where(a.max(axis=0) > 0, a.max(axis=0), 1.0)  # columns span 1 to 1e9
    coef, _ = nnls(a / scale, np.ones(len(y)))
    return Costs(*(float(c) for c in coef / scale))


# Measured 2026-11-30 by `python -m fusedkit.interpreter_cost` (three rows by hand with
# time_one_call(): both 4096-feature rows and the 2x512x4096 first call), while another
# engineer's tests ran (load average 1-3); `python -m fusedkit.interpreter_cost` re-measures.
_P = CalibrationPoint
CALIBRATION: tuple[CalibrationPoint, ...] = (
    _P("p12", "triton_ieee", "batch_size=17,in_features=33,out_features=65", False, 0.057, 0.057),
    _P("p12", "triton_ieee", "batch_size=64,in_features=256,out_features=256", False, 0.379, 0.376),
    _P("p12", "triton_ieee", "batch_size=128,in_features=512,out_features=512", False, 2.42, 2.263),
    _P("p12", "triton_ieee", "batch_size=1,in_features=1024,out_features=1024", False, 1.953, 1.932),
    _P("p12", "triton_ieee", "batch_size=2,in_features=2048,out_features=2048", False, 5.779, 5.449),
    _P("p12", "triton_ieee", "batch_size=1,in_features=4096,out_features=256", False, 0.936, 0.917),
    _P("p12", "triton_ieee", "batch_size=33,in_features=1000,out_features=200", False, 0.976, 0.957),
    _P("p12", "triton_ieee", "batch_size=5,in_features=1500,out_features=700", False, 1.867, 1.84),
    _P("p12", "triton_ieee", "batch_size=1,in_features=4096,out_features=4096", False, 18.84, 18.76),
    _P("p12", "triton_tf32x3", "batch_size=1,in_features=2048,out_features=1024", False, 2.475, 2.382),
    _P("p12", "triton_tf32", "batch_size=64,in_features=256,out_features=256", False, 0.461, 0.45),
    _P("p12", "triton_fp16x3", "batch_size=17,in_features=33,out_features=65", False, 0.062, 0.062),
    _P("p12", "triton_fp16x3", "batch_size=64,in_features=256,out_features=256", False, 0.593, 0.569),
    _P("p12", "triton_fp16x3", "batch_size=128,in_features=512,out_features=512", False, 2.5, 2.449),
    _P("p12", "triton_fp16x3", "batch_size=1,in_features=2048,out_features=1024", False, 4.045, 3.921),
    _P("p12", "triton_fp16x3", "batch_size=33,in_features=1000,out_features=200", False, 1.036, 0.993),
    _P("p12", "triton_fp16x3", "batch_size=1,in_features=2048,out_features=2048", True, 18.526, 17.926),
    _P("p12", "triton_fp16x3", "batch_size=2,in_features=512,out_features=4096", True, 8.641, 8.343),
    _P("p12", "triton_tf32_persistent", "batch_size=17,in_features=33,out_features=65", False, 0.083, 0.083),
    _P("p12", "triton_tf32_persistent", "batch_size=16,in_features=32,out_features=64", False, 0.065, 0.065),
    _P("p12", "triton_tf32_persistent", "batch_size=64,in_features=256,out_features=256", False, 1.593, 1.568),
    _P("p12", "triton_tf32_persistent", "batch_size=1,in_features=1024,out_features=1024", False, 3.183, 3.15),
    _P("p12", "triton_tf32_persistent", "batch_size=2,in_features=2048,out_features=1024", False, 4.586, 4.509),
    _P("p12", "triton_tf32_persistent", "batch_size=1,in_features=4096,out_features=2048", False, 14.99, 14.96),
    _P("p12", "triton_tf32_persistent", "batch_size=33,in_features=1000,out_features=200", False, 1.883, 1.873),
    _P("p45", "triton_fused_lse_ieee", "batch_size=17,input_size=33,hidden_size=65,output_size=19", False, 0.125, 0.125),
    _P("p45", "triton_fused_lse_ieee", "batch_size=64,input_size=256,hidden_size=256,output_size=128", False, 0.771, 0.77),
    _P("p45", "triton_fused_lse_ieee", "batch_size=1,input_size=1024,hidden_size=1024,output_size=1024", False, 2.693, 2.643),
    _P("p45", "triton_fused_lse_ieee", "batch_size=1,input_size=2048,hidden_size=2048,output_size=1024", False, 7.204, 7.113),
    _P("p45", "triton_fused_lse_ieee", "batch_size=50,input_size=300,hidden_size=500,output_size=100", False, 1.595, 1.573),
    _P("p45", "triton_fused_lse_tf32", "batch_size=128,input_size=512,hidden_size=512,output_size=256", False, 2.871, 2.87),
    _P("p45", "triton_fused_lse_fp16x3", "batch_size=17,input_size=33,hidden_size=65,output_size=19", False, 0.141, 0.141),
    _P("p45", "triton_fused_lse_fp16x3", "batch_size=64,input_size=256,hidden_size=256,output_size=128", False, 0.605, 0.604),
    _P("p45", "triton_fused_lse_fp16x3", "batch_size=2,input_size=1024,hidden_size=2048,output_size=1024", False, 6.441, 6.205),
    _P("p45", "triton_fused_lse_fp16x3", "batch_size=128,input_size=512,hidden_size=512,output_size=256", False, 3.62, 3.57),
    _P("p45", "triton_fused_lse_fp16x3", "batch_size=2,input_size=1024,hidden_size=1024,output_size=512", True, 6.492, 6.359),
)


def time_one_call(problem: Problem, variant: Variant | str, sizes: Sizes, *,
            first_call: bool = False) -> tuple[float, float]:
    """(wall, process CPU) seconds of one call: after a warm-up call with the same model,
    or, with ``first_call``, the first call of a new model (its kernels already traced)."""
    variant = _resolve(problem, variant)
    s = problem.sizes(sizes)
    fn = variant.build(problem.make_model(s, seed=0))
    inputs = problem.get_inputs(s, seed=0)
    if not first_call:
        fn(*inputs)
    t0, c0 = time.perf_counter(), time.process_time()
    fn(*inputs)
    return time.perf_counter() - t0, time.process_time() - c0


def _main() -> None:
    """Re-measure the sizes of CALIBRATION (about 5 minutes on 2 cores), print them as
    CALIBRATION rows, the fitted Costs, and measured vs predicted seconds."""
    points = []
    for old in CALIBRATION:
        p = get(old.problem)
        if old.first_call:  # trace the kernels at small sizes first: time only the new weights
            time_one_call(p, old.variant, {d.name: 17 + 16 * i for i, d in enumerate(p.dims)})
        wall, cpu = time_one_call(p, old.variant, parse_sizes(old.sizes), first_call=old.first_call)
        points.append(old._replace(wall_s=round(wall, 3), cpu_s=round(cpu, 3)))
        print(f'    _P("{old.problem}", "{old.variant}", "{old.sizes}", {old.first_call}, '
              f"{points[-1].wall_s}, {points[-1].cpu_s}),", flush=True)
    costs = calibrate(points)
    print(costs)
    for pt in points:
        pred = SAFETY * cpu_seconds(get(pt.problem), pt.variant, parse_sizes(pt.sizes),
                                    first_call=pt.first_call, costs=costs)
        print(f"{pt.variant:26s} {pt.sizes:64s} {pt.first_call!s:5s} {pt.wall_s:7.3f} "
              f"{pt.cpu_s:7.3f} {pred:7.3f}")


if __name__ == "__main__":
    ensure_triton_mode()
    _main()
