"""Your turn: exercises for every notebook of the course, each checked by the same path as
the ladder (:func:`fusedkit.measure.measure`), each with a hint that names the fault it found.

=======================  ========  ======================================================
In a notebook::

    from fusedkit import exercises
    exercises.about("p12_epilogue")       # prints what the check runs, at which sizes
    # a cell holding exercises.skeleton("p12_epilogue"), edited: defines epilogue_kernel
    exercises.check(problem, "p12_epilogue", epilogue_kernel)   # prints one line
    exercises.show_solution("p12_epilogue")                     # the worked solution

A prediction exercise first prints what a prediction may use (``exercises.given(name)``); its
cell defines a number, which ``exercises.check(problem, name, number)`` compares with the
measured (GPU) or recorded (CPU) value.

:func:`check` prints ``✓ ...`` or ``✗ <what was found>: <what it shows>. Hint: <what to look
at>``, never a traceback. A kernel or a split returns an
:class:`~fusedkit.exercises._common.ExerciseMeasurement` (a Measurement; ``message`` holds the
line, and ``ok`` is False whenever the line is a ``✗``: a wrong answer is a failure, whatever
tier its numbers reached); a prediction returns a
:class:`~fusedkit.exercises._predict.PredictionResult` (``ok``, ``message``, the numbers).
Without a GPU a Triton kernel runs in Triton's interpreter at small odd sizes (a few
seconds); on a GPU at the problem's sizes, timed.
"""

from __future__ import annotations

from typing import Any

import torch

from fusedkit.exercises import (p12_coalesced_tile, p12_epilogue, p12_fp16_split, p12_gemm_tile,
                                p12_predict_speedup, p12_predict_stream, p12_wgmma_desc,
                                p45_online_lse, p45_sigmoid_gemm)
from fusedkit.exercises._common import Exercise, ExerciseMeasurement, KernelError, exec_source
from fusedkit.exercises._predict import PredictionExercise, PredictionResult
from fusedkit.exercises.p12_fp16_split import SplitExercise
from fusedkit.problems import Problem, Sizes

from fusedkit.exercises.p12_wgmma_desc import DescriptorExercise

AnyExercise = Exercise | SplitExercise | PredictionExercise | DescriptorExercise

EXERCISES: dict[str, AnyExercise] = {m.EXERCISE.name: m.EXERCISE for m in
                                     (p12_epilogue, p12_gemm_tile, p12_coalesced_tile, p12_wgmma_desc,
                                      p45_online_lse, p45_sigmoid_gemm, p12_predict_stream,
                                      p12_fp16_split, p12_predict_speedup)}
NAMES = tuple(EXERCISES)
COURSE = ("01", "02", "03", "04", "05", "06")
"""The notebooks of the course, by number."""


def get(name: str) -> AnyExercise:
    """The exercise called ``name``; an unknown name lists the valid ones."""
    try:
        return EXERCISES[name]
    except KeyError:
        raise ValueError(f"exercise={name!r} is not known; valid: {', '.join(NAMES)}") from None


def for_problem(problem: Problem | str) -> list[str]:
    """Names of the exercises of ``problem`` (a Problem or its key)."""
    key = problem if isinstance(problem, str) else problem.key
    return [n for n, ex in EXERCISES.items() if ex.problem_key == key]


def for_notebook(notebook: str) -> list[str]:
    """Names of the exercises of course notebook ``notebook`` ("01" ... "06")."""
    if notebook not in COURSE:
        raise ValueError(f"notebook={notebook!r} is not a notebook of the course; valid: {', '.join(COURSE)}")
    return [n for n, ex in EXERCISES.items() if ex.notebook == notebook]


def skeleton(name: str) -> str:
    """The text of the exercise's notebook cell: imports and what to complete, with its TODO lines."""
    return get(name).skeleton


def load_skeleton(name: str) -> Any:
    """What the blank cell defines (the kernel, the function or the prediction), executed from
    :func:`skeleton` as the notebook cell runs it."""
    ex = get(name)
    return exec_source(ex.skeleton, name).get(ex.kernel_name)


def solution(name: str) -> Any:
    """The worked solution: a ``@triton.jit`` kernel with the skeleton's signature, the split
    function, or (for a prediction) the function of the facts that gives the worked prediction."""
    return get(name).solution


def show_solution(name: str) -> None:
    """Print the worked solution's source (for a prediction, also what it gives)."""
    get(name).show_solution()


def about(name: str) -> None:
    """Print one line: what the check of ``name`` runs, at which sizes (from the code, never
    typed: the notebook shows this line rather than retyping it)."""
    print(get(name).about())


def given(name: str, device: str | torch.device | None = None) -> None:
    """Print what a prediction exercise's prediction may use (the facts, with their sources)."""
    ex = get(name)
    if not isinstance(ex, PredictionExercise):
        raise ValueError(f"exercise {name!r} is not a prediction; the predictions: "
                         f"{', '.join(n for n, e in EXERCISES.items() if isinstance(e, PredictionExercise))}")
    ex.given(device)


def builder(name: str, kernel: Any):
    """``build(model) -> fn`` launching ``kernel`` as exercise ``name`` does (what
    :func:`check` hands to :func:`fusedkit.measure.measure`)."""
    ex = get(name)
    if isinstance(ex, PredictionExercise):
        raise ValueError(f"exercise {name!r} is a prediction: there is no kernel to build")
    return ex.builder(kernel)


def check(problem: Problem | str, name: str, answer: Any, *, sizes: Sizes | None = None,
          device: str | torch.device | None = None, seeds: int | None = None,
          time_it: bool = True, warmup_ms: float | None = None, rep_ms: float | None = None,
          show: bool = True) -> ExerciseMeasurement | PredictionResult:
    """Check ``answer`` (a kernel, a function or a prediction) as exercise ``name`` of
    ``problem``; print one line.

    A kernel: the checks are the ladder's (:func:`fusedkit.measure.measure`, precision fp32),
    then one more call at the nearby odd shape looks for stores past the output's end and, when
    the numbers are wrong, for a known mistake. Defaults: on a GPU the problem's sizes, 3
    builds and a short timing; on the CPU (Triton's interpreter) small odd sizes, 1 build, a
    few timed calls. The split (``p12_fp16_split``): its fp16x3 linear measured (not timed),
    then the split probed row by row. A prediction: compared with the measured (GPU) or
    recorded (CPU) value; ``sizes``, ``seeds`` and the timing budgets do not apply.

    Errors in the answer (compile, run, a bad prediction) become that one line, never a
    traceback; wrong arguments to this function raise ValueError. Returns the
    ExerciseMeasurement or PredictionResult: ``.message`` is the line printed (``show=False``
    prints nothing), ``.ok`` is False on every ``✗``.
    """
    options = dict(sizes=sizes, device=device, seeds=seeds, warmup_ms=warmup_ms, rep_ms=rep_ms)
    options = {k: v for k, v in options.items() if v is not None}
    if not time_it:
        options["time_it"] = False
    ex = get(name)
    unused = set(options) - _OPTIONS.get(type(ex), set(options))
    if unused:
        raise ValueError(f"exercise {name!r} takes no {', '.join(sorted(unused))}")
    return ex.check(problem, answer, show=show, **options)


_OPTIONS = {PredictionExercise: {"device"}, SplitExercise: {"sizes", "device", "seeds"}}
# DescriptorExercise takes every option (its kernel runs through fusedkit.measure on a GPU).
"""The options of check that apply to each kind of exercise (a kernel exercise takes all)."""


__all__ = ["COURSE", "EXERCISES", "AnyExercise", "Exercise", "ExerciseMeasurement", "KernelError",
           "DescriptorExercise", "NAMES", "PredictionExercise", "PredictionResult", "SplitExercise", "about", "builder",
           "check", "for_notebook", "for_problem", "get", "given", "load_skeleton", "show_solution",
           "skeleton", "solution", "p12_coalesced_tile", "p12_epilogue", "p12_fp16_split",
           "p12_gemm_tile", "p12_predict_speedup", "p12_predict_stream", "p12_wgmma_desc", "p45_online_lse",
           "p45_sigmoid_gemm"]
