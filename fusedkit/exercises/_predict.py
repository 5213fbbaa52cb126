"""What the prediction exercises share: the learner writes a number first, then the check
settles it with a measurement and says how far off it was and which model the miss points to.

A prediction exercise has

- *facts*: the numbers a learner may reason from (sizes and bytes counted from the problem,
  rates measured in a run, datasheet peaks), each with where it comes from;
- an *outcome*: the quantity predicted, measured through :func:`fusedkit.measure.measure`
  on a GPU, or read from ``data/records.csv`` on a CPU (then labelled recorded, with its device,
  date and commit);
- *models*: ways of predicting it, each a function of the facts (none is a typed number),
  some right and some typical mistakes with the hint that names them. The learner's number is
  matched to the nearest model; a miss says what that model forgot.

The check returns a :class:`PredictionResult` (``ok``, ``message`` and the numbers), never a
traceback: a prediction that is not a positive finite number gets one line.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from fusedkit import records
from fusedkit.exercises._common import own_problem, print_solution
from fusedkit.measure import Measurement
from fusedkit.problems import Problem
from fusedkit.problems import get as get_problem

MATCH = 1.1
"""A prediction within this factor of a model's value is taken to be that model."""


@dataclass(frozen=True)
class Fact:
    """One number a learner may use: its value, unit, and where it comes from."""

    label: str
    value: float
    unit: str
    source: str
    text: str = ""      # the value as shown (default: 4 significant digits)

    def line(self) -> str:
        shown = self.text or f"{self.value:.4g}"
        return f"- {self.label}: {shown} {self.unit} ({self.source})"


@dataclass(frozen=True)
class Model:
    """A way to predict the quantity: what it counts, its value (from the facts), whether it is
    a right model, and for a wrong one the hint that names what it forgot."""

    label: str
    value: float
    right: bool
    hint: str = ""


@dataclass
class Outcome:
    """The measured quantity, where it comes from, and the facts the models use."""

    value: float
    source: str                       # "measured now on ..." or "recorded: NVIDIA H200, ..."
    facts: dict[str, Fact]
    measurement: Measurement | None = None
    error: str = ""                   # why there is no value (no GPU record, the step failed)
    detail: dict[str, float] = field(default_factory=dict)   # more numbers for the verdict


@dataclass
class PredictionResult:
    """What :meth:`PredictionExercise.check` found: ``ok`` (the prediction is within the
    exercise's band of the measured value), the one ``message`` printed, the numbers, and the
    model the prediction matched ("" when none)."""

    ok: bool
    message: str
    predicted: float | None = None
    measured: float = math.nan
    ratio: float = math.nan            # measured / predicted
    unit: str = ""
    source: str = ""
    model: str = ""
    measurement: Measurement | None = None


def as_prediction(value: Any, name: str) -> tuple[float | None, str]:
    """(the number, "") for a positive finite real, else (None, one line saying why)."""
    allowed = "a positive, finite number"
    if value is None:
        return None, f"{name} is still None: replace None with your prediction, {allowed}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        else:
            return None, f"{name}={value!r} is a {type(value).__name__}; write {allowed} (no quotes)"
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        return None, f"{name}={value!r} is not a prediction; write {allowed}"
    return value, ""


def nearest(predicted: float, models: list[Model]) -> Model | None:
    """The model whose value is nearest ``predicted`` (as a ratio), if within :data:`MATCH`."""
    usable = [m for m in models if math.isfinite(m.value) and m.value > 0]
    if not usable:
        return None
    best = min(usable, key=lambda m: abs(math.log(predicted / m.value)))
    return best if abs(math.log(predicted / best.value)) <= math.log(MATCH) else None


@dataclass
class PredictionExercise:
    """An exercise whose answer is a number written before the check runs.

    ``settle(device)`` gives the :class:`Outcome` (measured on a GPU, recorded on a CPU);
    ``models(outcome)`` the ways of predicting it; ``solution(facts)`` the worked prediction
    (the first right model), shown by :meth:`show_solution`; ``describe(predicted, outcome,
    model, within)`` the verdict's words after the numbers.
    """

    name: str
    problem_key: str
    title: str
    notebook: str
    kernel_name: str                  # the variable the skeleton cell defines
    skeleton: str
    solution: Callable[[dict[str, Fact]], float]
    settle: Callable[[torch.device], Outcome]
    models: Callable[[Outcome], list[Model]]
    quantity: str                     # "the time of step 17 at 1 row"
    unit: str                         # "ms" or "x"
    band: float                       # ok when measured / predicted lies within this factor
    show: Callable[[float], str]      # the measured value as the house writes it
    compare: Callable[[float], str]   # measured / predicted in words: "1.23x longer than predicted"
    fallback_hint: str                # when the prediction matches no model
    about_text: str = ""
    remark: Callable[[Outcome], str] | None = None   # what the measurement shows, after a ✓
    _settled: dict[str, Outcome] = field(default_factory=dict, repr=False)   # see outcome()

    @property
    def problem(self) -> Problem:
        return get_problem(self.problem_key)

    def with_unit(self, value: float) -> str:
        """A learner's number as they wrote it, to 3 digits, with the unit: ``0.0628 ms``, ``4.1x``."""
        return f"{value:.3g}x" if self.unit == "x" else f"{value:.3g} {self.unit}"

    def outcome(self, device: str | torch.device | None = None) -> Outcome:
        """The settled outcome on ``device`` (default: the GPU if present), once per process
        and records file: the facts :meth:`given` shows are those :meth:`check` compares with."""
        device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        path = records.default_path()
        key = f"{device}|{path}|{path.stat().st_mtime_ns if path.exists() else 0}"
        if key not in self._settled:
            self._settled[key] = self.settle(device)
        return self._settled[key]

    def given(self, device: str | torch.device | None = None) -> None:
        """Print the facts a prediction may use (nothing of the answer)."""
        out = self.outcome(device)
        print(f"For {self.quantity}, you may use:")
        for fact in out.facts.values():
            print(fact.line())
        if out.error:
            print(f"(No measurement to compare with here: {out.error}.)")

    def about(self) -> str:
        """One line: what is predicted and how it is settled."""
        return self.about_text

    def show_solution(self, device: str | torch.device | None = None) -> None:
        """Print the worked prediction (its source) and what it gives from the facts."""
        out = self.outcome(device)
        print_solution(self.name, self.solution, "prediction")
        if out.facts:
            print(f"# from the facts above: {self.with_unit(self.solution(out.facts))}")

    def check(self, problem: Problem | str, prediction: Any, *, device: str | torch.device | None = None,
              show: bool = True) -> PredictionResult:
        """Compare ``prediction`` with the measured (GPU) or recorded (CPU) value; print one
        line ``✓ ...`` or ``✗ ...``; return the :class:`PredictionResult`."""
        own_problem(self, problem)
        result = self._judge(prediction, device)
        if show:
            print(result.message)
        return result

    def _judge(self, prediction: Any, device: str | torch.device | None) -> PredictionResult:
        predicted, why = as_prediction(prediction, self.kernel_name)
        if predicted is None:
            return PredictionResult(False, f"✗ no prediction yet: {why}. Hint: predict first, "
                                           "from the numbers exercises.given printed, then check",
                                    unit=self.unit)
        out = self.outcome(device)
        if out.error:
            return PredictionResult(False, f"✗ nothing to compare with: {out.error}. Hint: run the "
                                           "check on a GPU, or read data/README.md to record one",
                                    predicted=predicted, unit=self.unit, source=out.source,
                                    measurement=out.measurement)
        ratio = out.value / predicted
        within = max(ratio, 1 / ratio) <= self.band
        model = nearest(predicted, self.models(out))
        said_as = self.with_unit(predicted)
        head = (f"predicted {said_as}; measured {self.show(out.value)} "
                f"({out.source}): {self.compare(ratio)}")
        if within:
            said = ""
            if model is not None:
                said = f" Your number is {model.label}." if model.right else (
                    f" But your number is {model.label}: {model.hint}.")
            more = f" {self.remark(out)}" if self.remark is not None else ""
            line = f"✓ {head}, within the {self.band:g}x allowed.{said}{more}"
        elif model is not None and not model.right:
            line = f"✗ {head}: {said_as} is {model.label}. Hint: {model.hint}"
        elif model is not None:
            line = (f"✗ {head}: {said_as} is {model.label}, a right model, but "
                    f"this step is further from it than {self.band:g}x. Hint: {self.fallback_hint}")
        else:
            line = f"✗ {head}. Hint: {self.fallback_hint}"
        return PredictionResult(within, line, predicted=predicted, measured=out.value, ratio=ratio,
                                unit=self.unit, source=out.source, model=model.label if model else "",
                                measurement=out.measurement)


def times_phrase(ratio: float) -> str:
    """measured / predicted time in words."""
    if ratio >= 1:
        return f"{ratio:.2f}x longer than predicted"
    return f"{1 / ratio:.2f}x shorter than predicted"


def ratio_phrase(ratio: float) -> str:
    """measured / predicted speed-up in words."""
    if ratio >= 1:
        return f"{ratio:.2f}x more than predicted"
    return f"{1 / ratio:.2f}x less than predicted"


def skeleton_text(lines: list[str], variable: str, todo: str) -> str:
    """A prediction's notebook cell: comment ``lines``, then ``variable = None   # TODO: todo``."""
    return "\n".join(f"# {ln}" if ln else "#" for ln in lines) + f"\n{variable} = None   # TODO: {todo}\n"
