"""How long a measurement will take here, before it starts: the one estimate the command line
announces, the explorer shows and :func:`fusedkit.harness.plan` refuses over ``budget_s``.

On a GPU: the timing budgets and a few builds. On a CPU, PyTorch steps cost their FLOPs at this
CPU's GEMM rates (a worker's on one thread); a Triton step runs in the interpreter, whose cost is
per program and loop step (the launches read from the step modules; :data:`COSTS`)::

    cpu_seconds = a * steps + a_masked * masked_steps + b * padded_dot_flops + c * tiles
                  + e * elementwise_elements;   estimate = SAFETY * cpu_seconds
"""

from __future__ import annotations

import functools
import math
import timeit
from dataclasses import dataclass, replace

import torch

from fusedkit.harness.terms import CALLS_PER_BUILD
from fusedkit.kernels import load_step
from fusedkit.problems import Problem, Sizes, Variant
from fusedkit.problems.base import nearby_odd

CPU_BUDGET_S = 60.0
"""Seconds a measurement on a CPU may be estimated to take unless its caller allows more."""
SAFETY = 1.5
"""Interpreter estimates are CPU seconds times this: wall time on 2 shared cores."""
TIMED_CALLS_CPU = 11
"""Calls a slow CPU timing makes: about four estimating calls and up to six timed ones."""
DIGEST_BYTES_PER_S = 3.5e8   # a timed output's row digest on a CPU (hashlib, a row or its 1 KB chunks at a time)


COSTS = {"steps": 4.392e-4, "masked": 8.238e-4, "flops": 5.062e-9, "tiles": 1.703e-2,
         "elements": 5.367e-7}
"""CPU seconds per loop step, per masked step (extra), per padded dot FLOP, per tile (a kernel
body's set-up and epilogue) and per element of an elementwise loop; fitted on 36 calls of six
Triton steps (2-core AMD EPYC, Triton 3.6.0): predicted over measured wall time 1.02 to 1.98."""


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a call, as the interpreter runs it (padded tiles)."""

    tiles: int
    steps: int
    flops: float = 0.0
    masked: int = 0
    elements: float = 0.0
    block: tuple[int, ...] = ()

    def cpu_s(self) -> float:
        return sum(getattr(self, name) * cost for name, cost in COSTS.items())


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _gemm(kernel: object, m: int, n: int, k: int, dots: int = 1) -> Launch:
    """A program per output tile, each ``cdiv(k, BLOCK_K)`` steps of ``dots`` padded dots."""
    c = kernel.configs[0].kwargs   # one config under the interpreter: nothing is benchmarked
    bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
    tiles = _cdiv(m, bm) * _cdiv(n, bn)
    steps = tiles * _cdiv(k, bk)
    rules = getattr(kernel.fn, "values", {})
    even = rules["EVEN_K"]({"K": k, "BLOCK_K": bk}) if "EVEN_K" in rules else True
    return Launch(tiles, steps, steps * dots * 2.0 * bm * bn * bk, 0 if even else steps,
                  block=(bm, bn, bk))


def _loop(rows: int, cols: int, block: tuple[int, int], passes: int = 1) -> Launch:
    """An elementwise loop: a program per ``block[0]`` rows, ``passes`` sweeps of the columns."""
    tiles = _cdiv(rows, block[0])
    steps = tiles * passes * _cdiv(cols, block[1])
    return Launch(tiles, steps, elements=steps * block[0] * block[1])


_step = functools.cache(load_step)


def launches(problem: Problem, v: Variant, s: Sizes, first_call: bool = False) -> list[Launch]:
    """The launches one call of Triton step ``v`` makes at ``s`` in the interpreter (a first call
    with new weights also splits them, for the fp16x3 steps)."""
    split, combine = _step("common", "fp16x3_split.py"), _step("common", "lse.py")
    name = v.source.split("/", 1)[1]
    mod = _step(problem.key, name)
    if problem.key == "p12":
        m, k, n = s["batch_size"], s["in_features"], s["out_features"]
        if name == "09_triton_fp16x3.py":
            kp = _cdiv(k, mod.K_ALIGN) * mod.K_ALIGN
            out = [_loop(m, k + kp, split.SPLIT_BLOCK), _gemm(mod._fp16x3_linear_leakyrelu_kernel, m, n, kp, 3)]
            return out + ([_loop(n, k + kp, split.SPLIT_BLOCK)] if first_call else [])
        if name == "10_triton_persistent_tma.py" and mod.uses_tma(
                torch.empty((1, k)), torch.empty((4 + n % 4, k)), {"fp32": "ieee"}.get(v.precision, v.precision)):
            return [_gemm(mod._persistent_kernel, m, n, k)]
        return [_gemm(_step("p12", "08_triton_fused.py")._linear_leakyrelu_kernel, m, n, k)]
    m, k, h, n = s["batch_size"], s["input_size"], s["hidden_size"], s["output_size"]
    if name == "05_triton_fp16x3_lse.py":
        kp, hp = (_cdiv(d, mod.K_ALIGN) * mod.K_ALIGN for d in (k, h))
        g2 = mod._fp16x3_linear_partial_lse_kernel
        out = [_loop(m, k + kp, split.SPLIT_BLOCK), _gemm(mod._fp16x3_linear_sigmoid_split_kernel, m, h, kp, 3),
               _gemm(g2, m, n, hp, 3)]
        first = [_loop(h, k + kp, split.SPLIT_BLOCK), _loop(n, h + hp, split.SPLIT_BLOCK)]
    elif name == "06_triton_fp16_lse.py":
        weight = {"fp16": 1.0, "bf16": 3.0}[v.precision]   # bf16 rounds in integer arithmetic
        g2 = mod._linear_partial_lse_lowp_kernel
        out = [replace(g, elements=weight * g.steps * sum(g.block[:2]) * g.block[2])   # rounding
               for g in (_gemm(mod._linear_sigmoid_lowp_kernel, m, h, k), _gemm(g2, m, n, h))]
        first = []
    else:
        g2 = mod._linear_partial_lse_kernel
        out, first = [_gemm(mod._linear_sigmoid_kernel, m, h, k), _gemm(g2, m, n, h)], []
    partials = _cdiv(n, g2.configs[0].kwargs["BLOCK_N"])
    out.append(_loop(m, partials, combine.COMBINE_BLOCK, passes=2))
    return out + (first if first_call else [])


def call_s(problem: Problem, v: Variant, s: Sizes, first_call: bool = False) -> float:
    """Predicted wall seconds of one interpreted call of Triton step ``v`` at ``s``."""
    return SAFETY * sum(ln.cpu_s() for ln in launches(problem, v, s, first_call))


@functools.cache
def _cpu_flops_per_s(dtype: torch.dtype, threads: int = 0) -> float:
    """This CPU's GEMM rate in ``dtype`` on ``threads`` threads (0: this process's), 1024 cubed."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        a = torch.randn(1024, 1024, dtype=dtype)
        return 2 * 1024**3 / max(min(timeit.repeat(lambda: a @ a, number=1, repeat=4)), 1e-9)
    finally:
        torch.set_num_threads(before)


def estimate_s(problem: Problem, v: Variant, sizes: Sizes, device: torch.device, seeds: int,
               time_it: bool, warmup_ms: float, rep_ms: float) -> float:
    """Predicted wall seconds of measuring ``v`` so (see the module's docstring)."""
    if device.type == "cuda":
        return 0.5 * (seeds + 2) + ((warmup_ms + rep_ms) / 1e3 if time_it else 0.0)
    flops = problem.flops(sizes)
    ref64 = flops / _cpu_flops_per_s(torch.float64)
    eager = flops / _cpu_flops_per_s(torch.float32)       # the judge's, in this process
    rate = _cpu_flops_per_s(torch.float32, 1)              # a worker's calls run on one thread
    odd = nearby_odd(problem, sizes)
    if v.triton and v.source:   # a registered step: its launches are known (a learner's are not)
        one = call_s(problem, v, sizes)
        pair = call_s(problem, v, sizes, True) + one
        odd_pair = call_s(problem, v, odd, True) + call_s(problem, v, odd)
    else:
        one = flops / rate
        pair, odd_pair = CALLS_PER_BUILD * one, CALLS_PER_BUILD * problem.flops(odd) / rate
    # A checked output is judged here: float64 and its bound (three float64 GEMMs' worth), eager.
    # Every timed output is digested whole, and so are the harness's own twelve at this size.
    check = seeds * pair + odd_pair + (seeds + 1) * CALLS_PER_BUILD * (3 * ref64 + eager)
    if not time_it:
        return check
    digest = 4 * math.prod(problem.output_shape(sizes)) / DIGEST_BYTES_PER_S
    return (check + max(TIMED_CALLS_CPU * (one + digest), (warmup_ms + rep_ms) / 1e3) + 12 * digest
            + 6 * ref64)
