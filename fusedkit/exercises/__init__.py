"""Your turn: four small Triton kernels to complete, two per problem, checked and timed by
the same path as the ladder (:func:`fusedkit.measure.measure`).

=================  =====================================================================
exercise           what the learner writes (2-6 lines in a skeleton)
=================  =====================================================================
``p12_epilogue``   bias, x2 and LeakyReLU over the GEMM's output, 2-D blocks with masks
``p12_gemm_tile``  the K loop of one tile of x @ W.T (the epilogue is fused after it)
``p45_online_lse`` the online logsumexp merge: a running (max, sum) per row, chunk by chunk
``p45_sigmoid_gemm`` GEMM1's tile with its bias and sigmoid fused before the store
``p12_wgmma_desc`` step 8's wgmma shared-memory descriptor, in Python, built into the CUDA kernel
=================  =====================================================================

In a notebook::

    from fusedkit import exercises
    # a cell holding exercises.skeleton("p12_epilogue"), edited: defines epilogue_kernel
    exercises.check(problem, "p12_epilogue", epilogue_kernel)   # prints one line
    exercises.show_solution("p12_epilogue")                     # the worked solution

:func:`check` prints ``✓ right (fp32-faithful), ... ms per call ...`` or ``✗ <what was found>:
<what it shows>. Hint: <what to look at>``, never a traceback, and returns the
:class:`~fusedkit.measure.Measurement` (its ``message`` attribute holds the line). Without a
GPU the kernel runs in Triton's interpreter at small odd sizes (a few seconds); on a GPU at
the problem's sizes, timed.
"""

from __future__ import annotations

from typing import Any

import torch

from fusedkit.exercises import p12_epilogue, p12_gemm_tile, p12_wgmma_desc, p45_online_lse, p45_sigmoid_gemm
from fusedkit.exercises._common import Exercise, KernelError, exec_source, run_check, solution_source
from fusedkit.measure import Measurement
from fusedkit.problems import Problem, Sizes

EXERCISES: dict[str, Exercise] = {m.EXERCISE.name: m.EXERCISE for m in
                                  (p12_epilogue, p12_gemm_tile, p45_online_lse, p45_sigmoid_gemm,
                                   p12_wgmma_desc)}
NAMES = tuple(EXERCISES)


def get(name: str) -> Exercise:
    """The exercise called ``name``; an unknown name lists the valid ones."""
    try:
        return EXERCISES[name]
    except KeyError:
        raise ValueError(f"exercise={name!r} is not known; valid: {', '.join(NAMES)}") from None


def for_problem(problem: Problem | str) -> list[str]:
    """Names of the exercises of ``problem`` (a Problem or its key)."""
    key = problem if isinstance(problem, str) else problem.key
    return [n for n, ex in EXERCISES.items() if ex.problem_key == key]


def skeleton(name: str) -> str:
    """The text of the exercise's notebook cell: imports and the kernel with its TODO lines."""
    return get(name).skeleton


def load_skeleton(name: str) -> Any:
    """The blank kernel, executed from :func:`skeleton` as the notebook cell runs it."""
    ex = get(name)
    return exec_source(ex.skeleton, name)[ex.kernel_name]


def solution(name: str) -> Any:
    """The worked solution: a ``@triton.jit`` kernel with the skeleton's signature."""
    return get(name).solution


def show_solution(name: str) -> None:
    """Print the worked solution's source."""
    ex = get(name)
    print(f"# fusedkit/exercises/{name}.py: the worked solution of {name}\n")
    print(solution_source(ex))


def builder(name: str, kernel: Any):
    """``build(model) -> fn`` launching ``kernel`` as exercise ``name`` does (what
    :func:`check` hands to :func:`fusedkit.measure.measure`)."""
    return get(name).builder(kernel)


def check(problem: Problem | str, name: str, kernel: Any, *, sizes: Sizes | None = None,
          device: str | torch.device | None = None, seeds: int | None = None,
          time_it: bool = True, warmup_ms: float | None = None, rep_ms: float | None = None,
          show: bool = True) -> Measurement:
    """Check, then time, ``kernel`` as exercise ``name`` of ``problem``; print one line.

    The checks are the ladder's (:func:`fusedkit.measure.measure`, precision fp32), then one
    more call at the nearby odd shape looks for stores past the output's end and, when the
    numbers are wrong, for a known mistake. Defaults: on a GPU the problem's sizes, 3 builds
    and a short timing; on the CPU (Triton's interpreter) small odd sizes, 1 build, a few
    timed calls. Errors in the kernel (compile or run) become that one line, never a
    traceback; wrong arguments to this function raise ValueError.

    Returns the Measurement; ``.message`` is the line printed (``show=False`` prints nothing).
    """
    return run_check(get(name), problem, kernel, sizes=sizes, device=device, seeds=seeds,
                     time_it=time_it, warmup_ms=warmup_ms, rep_ms=rep_ms, show=show)


__all__ = ["EXERCISES", "Exercise", "KernelError", "NAMES", "builder", "check", "for_problem", "get",
           "load_skeleton", "show_solution", "skeleton", "solution", "p12_epilogue", "p12_gemm_tile",
           "p45_online_lse", "p45_sigmoid_gemm"]
