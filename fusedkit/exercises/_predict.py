"""The prediction exercises: the learner writes a number first, then the check settles it with
a measurement and says how far off it was and which way of predicting the number matches.

A prediction exercise has *facts* (the numbers a prediction may use, each with its source:
counted from the problem, measured in a run, a datasheet), an *outcome* (the quantity,
measured through :func:`fusedkit.harness.measure` on a GPU or read from ``data/records.csv``
on a CPU, labelled recorded with its device, date and commit) and *models*: ways of
predicting it, each a function of the facts (none a typed number), some right and some
typical mistakes with the hint that names them. A number that is a wrong model is a ``✗``
even where it lands near the outcome: the reasoning, not the luck, is what is checked.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from fusedkit import present, records
from fusedkit.exercises._protocol import Exercise, Verdict, source_of
from fusedkit.harness import Measurement
from fusedkit.problems import Problem

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
        return f"- {self.label}: {self.text or f'{self.value:.4g}'} {self.unit} ({self.source})"


class Model(NamedTuple):
    """A way to predict the quantity: what it counts, its value (from the facts), whether it is
    right, and for a wrong one the hint that names what it forgot."""

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


def as_prediction(value: Any, name: str) -> tuple[float | None, str]:
    """(the number, "") for a positive finite real, else (None, one line saying why)."""
    allowed = "a positive, finite number"
    if value is None:
        return None, f"{name} is still None: replace None with your prediction, {allowed}"
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None, f"{name}={value!r} is a {type(value).__name__}; write {allowed} (no quotes)"
    if not math.isfinite(value) or value <= 0:
        return None, f"{name}={float(value)!r} is not a prediction; write {allowed}"
    return float(value), ""


def nearest(predicted: float, models: list[Model]) -> Model | None:
    """The model ``predicted`` is taken for: the nearest (as a ratio) within :data:`MATCH`,
    a right one before a wrong one."""
    near = [m for m in models if math.isfinite(m.value) and m.value > 0
            and abs(math.log(predicted / m.value)) <= math.log(MATCH)]
    return min(near, key=lambda m: (not m.right, abs(math.log(predicted / m.value))), default=None)


_settled: dict[str, Outcome] = {}


class PredictionExercise(Exercise):
    """A number written before the check runs. A module adds ``settle(device) -> Outcome``,
    ``models(outcome)``, ``remark(outcome)`` (after a ✓), the worked ``solution(facts)`` (the
    first right model), the ``prompt`` of its cell, ``unit`` ("ms" or "x") and ``band`` (✓
    when measured / predicted lies within it)."""

    imports = ""
    options = frozenset()
    prompt: tuple[str, ...] = ()
    todo = quantity = unit = fallback_hint = about_text = ""
    band = 1.0

    @property
    def skeleton(self) -> str:
        cell = [f"# {ln}" if ln else "#" for ln in self.prompt]
        return "\n".join(cell) + f"\n{self.answer} = None   # TODO: {self.todo}\n"

    def settle(self, device: torch.device) -> Outcome:
        raise NotImplementedError

    def models(self, out: Outcome) -> list[Model]:
        raise NotImplementedError

    def remark(self, out: Outcome) -> str:
        return ""

    def with_unit(self, value: float) -> str:
        """A number as the learner wrote it, to 3 digits, with the unit: ``0.0628 ms``, ``4.1x``."""
        return f"{value:.3g}x" if self.unit == "x" else f"{value:.3g} {self.unit}"

    def outcome(self, device: torch.device) -> Outcome:
        """The settled outcome on ``device``, once per process and records file: the facts
        :meth:`given` shows are those :meth:`judge` compares with."""
        path = records.default_path()
        key = f"{self.name}|{device}|{path}|{path.stat().st_mtime_ns if path.exists() else 0}"
        if key not in _settled:
            _settled[key] = self.settle(device)
        return _settled[key]

    def given(self, device: torch.device) -> None:
        """Print the facts a prediction may use (nothing of the answer)."""
        out = self.outcome(device)
        print(f"For {self.quantity}, you may use:")
        print("\n".join(fact.line() for fact in out.facts.values()))
        if out.error:
            print(f"(No measurement to compare with here: {out.error}.)")

    def about(self) -> str:
        return self.about_text

    def show_solution(self) -> None:
        """Print the worked prediction (its source) and what it gives from the facts."""
        out = self.outcome(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
        print(f"# fusedkit/exercises/{self.name}.py: the worked prediction of {self.name}\n")
        print(source_of(self.solution))
        if out.facts:
            print(f"# from the facts above: {self.with_unit(self.solution(out.facts))}")

    def judge(self, problem: Problem, prediction: Any, *, device: torch.device) -> Verdict:
        predicted, why = as_prediction(prediction, self.answer)
        if predicted is None:
            return Verdict(f"✗ no prediction yet: {why}. Hint: predict first, from the numbers "
                           "exercises.given printed, then check")
        out = self.outcome(device)
        values = dict(predicted=predicted, source=out.source)
        if out.error:
            return Verdict(f"✗ nothing to compare with: {out.error}. Hint: run the check on a GPU, "
                           "or read data/README.md to record one", out.measurement, values)
        ratio = out.value / predicted
        within = max(ratio, 1 / ratio) <= self.band
        model = nearest(predicted, self.models(out))
        said = self.with_unit(predicted)
        more, fewer = ("more", "less") if self.unit == "x" else ("longer", "shorter")
        off = f"{ratio:.2f}x {more}" if ratio >= 1 else f"{1 / ratio:.2f}x {fewer}"
        shown = present.speedup(out.value) if self.unit == "x" else f"{present.ms(out.value)} {self.unit}"
        head = f"predicted {said}; measured {shown} ({out.source}): {off} than predicted"
        if model is not None and not model.right:
            line = f"✗ {head}: {said} is {model.label}. Hint: {model.hint}"
        elif within:
            line = " ".join(filter(None, (f"✓ {head}, within the {self.band:g}x allowed.",
                                          model and f"Your number is {model.label}.", self.remark(out))))
        elif model is not None:
            line = (f"✗ {head}: {said} is {model.label}, a right model, but this step is further from "
                    f"it than {self.band:g}x. Hint: {self.fallback_hint}")
        else:
            line = f"✗ {head}. Hint: {self.fallback_hint}"
        values.update(measured=out.value, ratio=ratio, model=model.label if model else "")
        return Verdict(line, out.measurement, values)
