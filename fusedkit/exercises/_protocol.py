"""The one protocol every exercise follows.

An :class:`Exercise` has a name, a problem and a notebook, the worked ``solution`` (the skeleton,
the notebook's cell, is made from it, so the two cannot drift apart) and ``judge``, which turns
the learner's answer into a :class:`Verdict`: one line, ``✓ ...`` or ``✗ <what was found>. Hint:
<what to look at>``. Adding an exercise is one short module defining ``EXERCISE``.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from fusedkit.harness import Measurement
from fusedkit.problems import Problem, Sizes
from fusedkit.problems import get as get_problem
from fusedkit.problems.base import nearby_odd


@dataclass
class Verdict:
    """What :func:`fusedkit.exercises.check` found: the one line shown, the measurement behind it
    (None where nothing was measured) and the numbers the line quotes."""

    message: str
    measurement: Measurement | None = None
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True for a ``✓`` only: a wrong answer is a failure, whatever its numbers reached."""
        return self.message.startswith("✓")


def dims(sizes: Sizes) -> str:
    return "x".join(str(v) for v in sizes.values())


def checked_at(problem: Problem, cpu_sizes: Sizes, cpu: str) -> str:
    """'Checked (...) at 17x33x65 and the nearby odd shape 15x29x57 <cpu>; on a GPU at ...'."""
    small, big = problem.sizes(cpu_sizes), problem.defaults
    return (f"Checked ({' x '.join(d.name for d in problem.dims)}) at {dims(small)} and the nearby odd "
            f"shape {dims(nearby_odd(problem, small))} {cpu}; on a GPU at {dims(big)} and "
            f"{dims(nearby_odd(problem, big))}.")


def first_line(text: object) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[0][:200] if lines else "(no message)"


def source_of(solution: Any) -> str:
    """The source of a worked solution: a ``@triton.jit`` kernel (decorator included) or a function."""
    return inspect.getsource(getattr(solution, "fn", solution))


class Exercise:
    """A module sets the class attributes and defines ``about() -> str`` and ``judge(problem, answer,
    *, device, **options) -> Verdict``, which never raises for a fault of the answer. ``answer`` is
    the name the learner's cell defines, ``imports`` what the cell opens with."""

    name = problem_key = notebook = answer = ""
    solution: Any = None
    imports = "import triton\nimport triton.language as tl"
    options = frozenset({"sizes", "seeds", "time_it", "warmup_ms", "rep_ms"})   # of check, besides device

    @property
    def problem(self) -> Problem:
        return get_problem(self.problem_key)

    @property
    def skeleton(self) -> str:
        """The cell a learner completes, made from the worked solution: each numbered comment
        ``# n: ...`` becomes ``# TODO n: ...`` and the code lines under it (the answer) are left
        out; everything else is kept as it is, after :attr:`imports`."""
        out, indent, answered = [], None, False   # indent: the open TODO's, None outside one
        for line in source_of(self.solution).splitlines():
            code = line.lstrip()
            if m := re.match(r"^(\s*)# (\d+): ", line):
                out.append(line.replace(f"# {m[2]}: ", f"# TODO {m[2]}: ", 1))
                indent, answered = len(m[1]), False
            elif indent is not None and code.startswith("#") and not answered:   # the TODO's continuation
                out.append(line)
            elif indent is not None and code and not code.startswith("#") and len(line) - len(code) >= indent:
                answered = True                                                    # a line of the answer
            else:
                indent = None
                out.append(line)
        return (f"{self.imports}\n\n\n" if self.imports else "") + "\n".join(out) + "\n"

    def show_solution(self) -> None:
        print(f"# fusedkit/exercises/{self.name}.py: the worked solution of {self.name}\n")
        print(source_of(self.solution))
