"""Your turn: the course's exercises, at least one per notebook, each checked through the one
measuring path (:mod:`fusedkit.harness`), each ``✗`` with a hint that names the fault found::

    from fusedkit import exercises
    exercises.about("p12_epilogue")                                      # what the check runs
    result = exercises.check(problem, "p12_epilogue", epilogue_kernel)   # prints one line
    exercises.show_solution("p12_epilogue")                              # the worked solution

A prediction exercise first prints what a prediction may use (``exercises.given(name)``). The check
returns a ``Verdict`` (:mod:`fusedkit.exercises._protocol`) whose ``ok`` is False on every ``✗``.
"""

from __future__ import annotations

from typing import Any

import torch

from fusedkit.exercises import (p12_coalesced_tile, p12_epilogue, p12_fp16_split, p12_gemm_tile,
                                p12_predict_speedup, p12_predict_stream, p12_wgmma_desc,
                                p45_online_lse, p45_sigmoid_gemm)
from fusedkit.exercises._predict import PredictionExercise
from fusedkit.exercises._protocol import Exercise, Verdict
from fusedkit.harness.plans import harness_device
from fusedkit.problems import Problem, Sizes
from fusedkit.problems import get as get_problem

EXERCISES: dict[str, Exercise] = {m.EXERCISE.name: m.EXERCISE for m in (
    p12_epilogue, p12_gemm_tile, p12_coalesced_tile, p12_wgmma_desc, p45_online_lse, p45_sigmoid_gemm,
    p12_predict_stream, p12_fp16_split, p12_predict_speedup)}
NAMES = tuple(EXERCISES)
COURSE = ("01", "02", "03", "04", "05", "06")   # the notebooks of the course, by number


def get(name: str) -> Exercise:
    """The exercise called ``name``; an unknown name lists the valid ones."""
    if name not in EXERCISES:
        raise ValueError(f"exercise={name!r} is not known; valid: {', '.join(NAMES)}")
    return EXERCISES[name]


def about(name: str) -> None:
    """Print one line: what the check of ``name`` runs, at which sizes (from the code)."""
    print(get(name).about())


def show_solution(name: str) -> None:
    """Print the worked solution's source (for a prediction, also what it gives)."""
    get(name).show_solution()


def _device(device: str | torch.device | None) -> torch.device:
    return harness_device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def given(name: str, device: str | torch.device | None = None) -> None:
    """Print what a prediction exercise's prediction may use (the facts, with their sources)."""
    if not isinstance(ex := get(name), PredictionExercise):
        raise ValueError(f"exercise {name!r} is not a prediction; the predictions: "
                         f"{', '.join(n for n, e in EXERCISES.items() if isinstance(e, PredictionExercise))}")
    ex.given(_device(device))


def check(problem: Problem | str, name: str, answer: Any, *, sizes: Sizes | None = None,
          device: str | torch.device | None = None, seeds: int | None = None, time_it: bool = True,
          warmup_ms: float | None = None, rep_ms: float | None = None, show: bool = True) -> Verdict:
    """Check ``answer`` (a kernel, a function or a prediction) as exercise ``name`` of ``problem``
    on ``device`` (default: the GPU if torch sees one); print its one line unless ``show=False``
    (``about(name)`` says what the check runs). A fault of the answer is that line, never a
    traceback; a wrong argument of this function is a ValueError."""
    ex = get(name)
    problem = get_problem(problem) if isinstance(problem, str) else problem
    if problem.key != ex.problem_key:
        raise ValueError(f"exercise {name!r} belongs to problem {ex.problem_key}, not {problem.key}")
    options = {k: v for k, v in dict(sizes=sizes, seeds=seeds, warmup_ms=warmup_ms, rep_ms=rep_ms,
                                     time_it=None if time_it else False).items() if v is not None}
    if unused := set(options) - ex.options:
        raise ValueError(f"exercise {name!r} takes no {', '.join(sorted(unused))}")
    verdict = ex.judge(problem, answer, device=_device(device), **options)
    if show:
        print(verdict.message)
    return verdict
