"""The registry of problems. A new problem is one module defining ``PROBLEM`` plus one
entry in ``_MODULES``."""

from __future__ import annotations

import importlib

from fusedkit.problems.base import (Component, Dim, Problem, SizeError, Sizes, Stage, Variant,
                                    fmt_sizes, parse_sizes)

_MODULES = {
    "p12": "fusedkit.problems.p12_gemm_multiply_leakyrelu",
    "p45": "fusedkit.problems.p45_linear_sigmoid_linear_logsumexp",
}


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


__all__ = ["Component", "Dim", "Problem", "SizeError", "Sizes", "Stage", "Variant", "fmt_sizes",
           "get", "names", "parse_sizes"]
