"""Kernel sources, one folder per problem and one file per step (``NN_slug.cu`` / ``.py``).

Step files start with their number, so Python cannot ``import`` them by name;
:func:`load_step` loads a Triton step module from its file, once per process.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

KERNELS = Path(__file__).resolve().parent


def step_path(problem: str, filename: str) -> Path:
    """The path of one step's source, or a clear error listing the problem's steps."""
    path = KERNELS / problem / filename
    if not path.is_file():
        have = sorted(p.name for p in (KERNELS / problem).glob("[0-9][0-9]_*"))
        raise FileNotFoundError(f"kernel={problem}/{filename} does not exist; steps of {problem}: "
                                f"{', '.join(have) or 'none'}")
    return path


@lru_cache(maxsize=None)
def load_step(problem: str, filename: str) -> ModuleType:
    """Import a Python step file (a Triton kernel and its wrapper) as a module."""
    path = step_path(problem, filename)
    name = f"fusedkit.kernels.{problem}.step_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # so dataclasses and pickling inside the step resolve
    spec.loader.exec_module(module)
    return module
