"""Library functions a kernel must not replace, watched while it is built and called.

A candidate runs in the harness's own process, so it could replace ``torch.nn.functional.linear``
(which the float64 reference calls too), a method of ``torch.Tensor`` (``add``, ``__matmul__``),
the forward of ``torch.nn.Linear``, or a function or constant of fusedkit's measuring modules
(``fusedkit.check.rel_error``, ``fusedkit.check.ATOL``), and make a wrong answer look right. A
:class:`Snapshot`, taken before the build, records the very objects that each watched name holds
(:func:`watched`): torch, torch.nn.functional and torch.linalg, the classes of torch.Tensor and
of the model's modules (torch.nn.Module and its subclasses, the problem's model), ``copy`` and
``random`` (the harness deep-copies the model and draws its timing choices with them), fusedkit's
measuring modules and the classes defined in them, and the problem itself.
:meth:`Snapshot.fault`, after the build and after each call, says in one line what was replaced
(``patched torch.nn.functional.linear during the build: a kernel must not replace library
functions``) and puts every replaced object back, so nothing after the check runs patched.

Names a candidate adds (a new attribute of torch, say) are not faults, nor are lazily imported
submodules; a new attribute of a class that shadows one of its bases' (``torch.Tensor.add``
defined over ``torch._C.TensorBase.add``) is. Neither is torch's own wrapping of its functions
(:func:`torch_wrapper`): the first ``torch.compile`` in a process wraps ``torch.manual_seed``,
``torch.nn.Module.__init__`` and ``__setstate__``, and the ``compile`` baseline must not fail
for it.
"""

from __future__ import annotations

import copy
import itertools
import operator
import os
import random
import sys
import types
from typing import Iterable

import torch
from torch import nn

PATCHED = "patched"
"""The first word of the fault's line (``patched <names> <when>: ...``)."""
MISSING = object()

MEASURING_MODULES = ("fusedkit.check", "fusedkit.bench", "fusedkit.measure", "fusedkit.precision",
                     "fusedkit.guard", "fusedkit.problems.base", "fusedkit.problems.baselines")
"""fusedkit's measuring modules: every name in them, and the methods of their classes."""


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def torch_wrapper(new: object, old: object) -> bool:
    """True when ``new`` is torch wrapping ``old``: a Python function in torch's own package that
    holds ``old`` (``__wrapped__``, as functools.wraps sets it, or a closure cell)."""
    code = getattr(new, "__code__", None)
    if code is None or not os.path.abspath(code.co_filename).startswith(_TORCH_DIR):
        return False
    held = [getattr(new, "__wrapped__", None)]
    for cell in getattr(new, "__closure__", None) or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:   # a cell not yet filled
            pass
    return any(h is old for h in held)


def _class_name(cls: type) -> str:
    """How a learner writes a class: torch.Tensor, torch.nn.Linear, fusedkit.check.CheckResult."""
    if cls in (torch.Tensor, torch._C.TensorBase):
        return "torch.Tensor"
    if cls.__module__.startswith("torch.nn.modules") and getattr(nn, cls.__name__, None) is cls:
        return f"torch.nn.{cls.__name__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _classes_of(module: types.ModuleType) -> list[type]:
    return [v for v in vars(module).values()
            if isinstance(v, type) and v.__module__ == module.__name__]


def watched(problem: object = None, model: nn.Module | None = None
            ) -> tuple[list[types.ModuleType], list[type], list[tuple[str, object]]]:
    """What a :class:`Snapshot` watches: (modules, classes, (name, object) pairs whose instance
    attributes are watched) for ``problem`` (a :class:`fusedkit.problems.Problem`) and ``model``."""
    ours = [sys.modules[name] for name in MEASURING_MODULES if name in sys.modules]
    factory = getattr(problem, "model_factory", None)
    if factory is not None and factory.__module__ in sys.modules:
        ours.append(sys.modules[factory.__module__])     # the problem's module: its Model class
    modules = [torch, torch.nn.functional, torch.linalg, copy, random, *ours]
    classes: list[type] = [torch.Tensor, random.Random]
    for m in ours:
        classes += _classes_of(m)
    for sub in (model.modules() if model is not None else ()):
        classes += [c for c in type(sub).__mro__ if c is not object]
    classes += list(nn.Module.__mro__[:-1])
    objects = [(f"the problem {problem.key}", problem)] if problem is not None else []
    unique: list[type] = []
    for c in classes:
        if c not in unique:
            unique.append(c)
    return modules, unique, objects


class Snapshot:
    """The objects every watched name holds now; :meth:`fault` compares and restores."""

    def __init__(self, problem: object = None, model: nn.Module | None = None) -> None:
        modules, classes, objects = watched(problem, model)
        # (where, its live namespace, the owner to setattr on, a copy of the namespace)
        self._spaces: list[tuple[str, object, object, dict]] = []
        for m in modules:
            self._spaces.append((m.__name__, vars(m), m, dict(vars(m))))
        for c in classes:
            self._spaces.append((_class_name(c), vars(c), c, dict(vars(c))))
        for name, obj in objects:
            self._spaces.append((name, vars(obj), obj, dict(vars(obj))))
        # Names a class gets from its bases: a new entry under one of them shadows a base's.
        self._inherited = {id(c): {n for b in c.__mro__[1:] for n in vars(b)} for c in classes}
        self._flat: dict[int, tuple[tuple, tuple]] = {}   # per saved namespace: names, objects

    def _unchanged(self, live: dict, saved: dict, owner: object) -> bool:
        """Every saved name still holds its very object (and a class has no new name): checked
        by identity in C loops, which a guard run after each of thousands of timed calls needs
        (about four thousand names; an object's own ``__eq__`` is never asked)."""
        keys, values = self._flat.get(id(saved)) or self._flatten(saved)
        same = all(map(operator.is_, map(live.get, keys, itertools.repeat(MISSING)), values))
        return same and (not isinstance(owner, type) or len(live) == len(saved))

    def _flatten(self, saved: dict) -> tuple[tuple, tuple]:
        self._flat[id(saved)] = flat = (tuple(saved), tuple(saved.values()))
        return flat

    def changed(self) -> list[tuple[str, object, str, object]]:
        """(where, owner, attribute, the object it held) for every watched name now holding
        another object, deleted, or newly shadowing a base class's."""
        out = []
        for where, live, owner, saved in self._spaces:
            if self._unchanged(live, saved, owner):
                continue
            self._flat.pop(id(saved), None)   # torch's own wrapping below updates ``saved``
            for name, value in saved.items():
                now = live.get(name, MISSING)
                if now is value:
                    continue
                if torch_wrapper(now, value):   # torch's own doing: the new object is the one
                    saved[name] = now
                    continue
                out.append((where, owner, name, value))
            if isinstance(owner, type) and len(live) != len(saved):
                inherited = self._inherited.get(id(owner), ())
                out += [(where, owner, name, MISSING) for name in list(live)
                        if name not in saved and name in inherited]
        return out

    def restore(self, changed: Iterable[tuple[str, object, str, object]] | None = None) -> None:
        """Put back every replaced object (delete what shadows a base class's name)."""
        for _where, owner, name, value in (self.changed() if changed is None else changed):
            if value is MISSING:
                delattr(owner, name)
            elif isinstance(owner, (types.ModuleType, type)):
                setattr(owner, name, value)
            else:
                vars(owner)[name] = value

    def fault(self, when: str) -> str:
        """"" when nothing watched was replaced; else the one line naming what was (at most
        three names, then how many more), ``when`` it was seen ("during the build"), after
        putting everything back."""
        changed = self.changed()
        if not changed:
            return ""
        self.restore(changed)
        names = sorted({f"{where}.{name}" if not where.startswith("the problem") else
                        f"{name} of {where}" for where, _o, name, _v in changed})
        shown = names[:3] + ([f"{len(names) - 3} more"] if len(names) > 3 else [])
        shown = " and ".join(shown) if len(shown) < 3 else ", ".join(shown[:-1]) + " and " + shown[-1]
        return f"{PATCHED} {shown} {when}: a kernel must not replace library functions"


__all__ = ["MEASURING_MODULES", "PATCHED", "Snapshot", "watched"]
