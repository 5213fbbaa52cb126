"""The registry of problems: every module ``pNN_<slug>.py`` in this package that defines
``PROBLEM``. A new problem is one new module; nothing else to edit."""

from __future__ import annotations

import importlib
import pkgutil
import re

from fusedkit.problems.base import (Component, Dim, Problem, SizeError, Sizes, Stage, Variant,
                                    fmt_sizes, parse_sizes)

def discover(paths: list[str], package: str = __name__) -> dict[str, str]:
    """Problem key -> module name for every ``pNN_<slug>`` module in ``paths``, by number."""
    found = [m.name for m in pkgutil.iter_modules(paths) if re.fullmatch(r"p\d+_\w+", m.name)]
    return {name.split("_", 1)[0]: f"{package}.{name}"
            for name in sorted(found, key=lambda n: int(n[1:].split("_", 1)[0]))}


_MODULES = discover(list(__path__))


def names() -> list[str]:
    """Keys of every registered problem, e.g. ``['p12', 'p45']``."""
    return list(_MODULES)


def get(name: str) -> Problem:
    """The problem called ``name`` (its key, its slug, or its KernelBench number)."""
    key = str(name).lower()
    for k, module in _MODULES.items():
        if key in (k, k[1:], module.rsplit(".", 1)[1][4:]):
            return importlib.import_module(module).PROBLEM
    raise ValueError(f"problem={name!r} is not known; valid: {', '.join(_MODULES)} "
                     f"(or their slugs / KernelBench numbers)")


def extensions() -> list[tuple[str, bool]]:
    """(problem folder, hopper) of every CUDA extension a registered step calls, sorted."""
    return sorted({(v.call.problem, v.hopper) for key in names() for v in get(key).ladder()
                   if v.call is not None and v.call.kind != "triton"})


__all__ = ["Component", "Dim", "Problem", "SizeError", "Sizes", "Stage", "Variant", "extensions",
           "fmt_sizes", "get", "names", "parse_sizes"]
