"""The prediction exercises: a number written first, then settled by a measurement (on a GPU, through
:mod:`fusedkit.harness`) or a record (``data/records.csv``, labelled with its device, date and commit). The
*facts* a prediction may use carry their sources, from the outcome's own run; the *models* are ways of
predicting from the facts, right ones and typical mistakes with the hint naming them. A number taken for a wrong
model is a ``✗`` even where it lands near the outcome."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from fusedkit import present, records
from fusedkit.exercises._protocol import Exercise, Verdict
from fusedkit.harness import Measurement
from fusedkit.problems import Problem

MATCH = 1.1
"""A prediction within this factor of a model's value is taken to be that model."""
_SHOWN = {"MB": present.mb, "kB": present.mb, "GB/s": present.gbps, "TFLOP/s": present.tflops,
          "ms": present.ms, "GFLOP": present.gb}


class Fact(NamedTuple):
    """One number a learner may use: its value, unit, and where it comes from."""
    label: str
    value: float
    unit: str
    source: str

    def line(self) -> str:
        return f"- {self.label}: {_SHOWN[self.unit](self.value)} {self.unit} ({self.source})"


class Model(NamedTuple):
    """A way to predict from the facts; a wrong one with the hint naming what it forgot."""
    label: str
    value: float
    right: bool
    hint: str = ""


@dataclass
class Outcome:
    """The quantity, its source, the facts of its run, why there is none ("" if there is), more numbers."""

    value: float
    source: str
    facts: dict[str, Fact]
    measurement: Measurement | None = None
    error: str = ""
    detail: dict[str, float] = field(default_factory=dict)


def nearest(predicted: float, models: list[Model]) -> Model | None:
    """The model ``predicted`` is taken for: the nearest within :data:`MATCH`, a right one first."""
    near = [m for m in models if m.value > 0 and abs(math.log(predicted / m.value)) <= math.log(MATCH)]
    return min(near, key=lambda m: (not m.right, abs(math.log(predicted / m.value))), default=None)


_settled: dict[str, Outcome] = {}


class PredictionExercise(Exercise):
    """A module adds ``settle(device) -> Outcome``, ``models(outcome)``, ``remark(outcome)`` (after a ✓), the
    worked ``solution(facts)``, its cell's ``prompt``, ``unit`` ("ms" or "x") and ``band`` (✓ within it)."""

    imports, options = "", frozenset()
    prompt: tuple[str, ...] = ()
    todo = quantity = unit = fallback_hint = about_text = ""
    band = 1.0

    @property
    def skeleton(self) -> str:
        cell = [f"# {ln}" if ln else "#" for ln in self.prompt]
        return "\n".join(cell) + f"\n{self.answer} = None   # TODO: {self.todo}\n"

    def about(self) -> str:
        return self.about_text

    def with_unit(self, value: float) -> str:
        return f"{value:.3g}x" if self.unit == "x" else f"{value:.3g} {self.unit}"

    def outcome(self, device: torch.device) -> Outcome:
        """Settled once per device and records file: the facts :meth:`given` shows are those judged with."""
        path = records.default_path()
        key = f"{self.name}|{device}|{path}|{path.stat().st_mtime_ns if path.exists() else 0}"
        if key not in _settled:
            _settled[key] = self.settle(device)
        return _settled[key]

    def given(self, device: torch.device) -> None:
        """Print the facts a prediction may use (nothing of the answer)."""
        out = self.outcome(device)
        print(f"For {self.quantity}, you may use:\n" + "\n".join(f.line() for f in out.facts.values()))
        if out.error:
            print(f"(No measurement to compare with here: {out.error}.)")

    def show_solution(self) -> None:
        """Print the worked prediction (its source) and what it gives from the facts."""
        super().show_solution()
        facts = self.outcome(torch.device("cuda" if torch.cuda.is_available() else "cpu")).facts
        print(f"# from the facts above: {self.with_unit(self.solution(facts))}")

    def judge(self, problem: Problem, prediction: Any, *, device: torch.device) -> Verdict:
        if isinstance(prediction, torch.Tensor) and prediction.numel() == 1:
            prediction = prediction.item()
        why = (f"{self.answer} is still None: replace None with your prediction," if prediction is None else
               f"{self.answer}={prediction!r} is a {type(prediction).__name__}; write, without quotes,"
               if not isinstance(prediction, numbers.Real) or isinstance(prediction, bool) else
               f"{self.answer}={float(prediction)!r} is not a prediction; write" if not (
                   math.isfinite(prediction) and prediction > 0) else "")
        if why:
            return Verdict(f"✗ no prediction yet: {why} a positive, finite number. Hint: predict first, from "
                           "the numbers exercises.given printed, then check")
        predicted, out = float(prediction), self.outcome(device)
        if out.error:
            return Verdict(f"✗ nothing to compare with: {out.error}. Hint: run the check on a GPU, or read "
                           "data/README.md to record one", out.measurement, dict(predicted=predicted))
        ratio, model, said = out.value / predicted, nearest(predicted, self.models(out)), self.with_unit(predicted)
        more, fewer = ("more", "less") if self.unit == "x" else ("longer", "shorter")
        shown = present.speedup(out.value) if self.unit == "x" else f"{present.ms(out.value)} {self.unit}"
        head = (f"predicted {said}; measured {shown} ({out.source}): "
                f"{f'{ratio:.2f}x {more}' if ratio >= 1 else f'{1 / ratio:.2f}x {fewer}'} than predicted")
        if model is not None and not model.right:
            line = f"✗ {head}: {said} is {model.label}. Hint: {model.hint}"
        elif max(ratio, 1 / ratio) <= self.band:
            line = " ".join(filter(None, (f"✓ {head}, within the {self.band:g}x allowed.",
                                          model and f"Your number is {model.label}.", self.remark(out))))
        elif model is not None:
            line = (f"✗ {head}: {said} is {model.label}, a right model, but this step is further from it "
                    f"than {self.band:g}x. Hint: {self.fallback_hint}")
        else:
            line = f"✗ {head}. Hint: {self.fallback_hint}"
        values = dict(predicted=predicted, measured=out.value, ratio=ratio, model=model.label if model else "")
        return Verdict(line, out.measurement, values)
