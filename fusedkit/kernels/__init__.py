"""Kernel sources, one folder per problem and one file per step (``NN_slug.cu`` / ``.py``).

A step is its file and, beside it, ``NN_slug.step``: what the registry shows of each variant the
file provides (slug, title, summary, precision, the function it calls and how its operands are
made). :func:`step_files` reads them, as :mod:`fusedkit.problems` finds the problems: a new step
is a new pair of files. The step's number and source are its file name; whether it is a Hopper
step is its includes (:func:`fusedkit.build.needs_hopper`).

Step files start with their number, so Python cannot ``import`` them by name;
:func:`load_step` loads a Triton step module from its file, once per process.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Mapping

KERNELS = Path(__file__).resolve().parent

_STEP_NAME = re.compile(r"(\d{2})_\w+")
STEP_SUFFIXES = (".cu", ".py")
# The fields of a variant in a step's sidecar: the ones it must have, then the ones it may have.
REQUIRED_FIELDS = ("slug", "title", "summary", "function")
OPTIONAL_FIELDS = ("precision", "operands", "options")


@dataclass(frozen=True)
class StepFile:
    """One step of a problem: its source (``path``), its number (the file name's two digits) and
    the variants its sidecar ``NN_slug.step`` declares, one per variant the file provides (a file
    may provide several, e.g. one kernel at two precisions), each a mapping of field to text."""

    problem: str
    path: Path
    number: int
    variants: tuple[Mapping[str, str], ...]


def step_files(problem: str) -> list[StepFile]:
    """Every step of ``fusedkit/kernels/<problem>/`` in number order: each ``NN_slug.step`` with its
    ``NN_slug.cu`` or ``NN_slug.py``. A sidecar without its source, or with two, a source without a
    sidecar, and a variant with a missing, unknown or repeated field raise ValueError naming the
    file (:func:`parse_sidecar` reads one)."""
    folder = KERNELS / problem
    if not folder.is_dir():
        raise ValueError(f"problem={problem!r} has no kernels folder {folder}")
    sidecars = {p.stem: p for p in folder.glob("*.step") if _STEP_NAME.fullmatch(p.stem)}
    sources = {p.stem: p for p in folder.iterdir()
               if p.suffix in STEP_SUFFIXES and _STEP_NAME.fullmatch(p.stem)}
    orphans = sorted(set(sources) - set(sidecars))
    if orphans:
        raise ValueError(f"{problem}: step file(s) {', '.join(sources[s].name for s in orphans)} have "
                         "no sidecar NN_slug.step beside them (what the registry shows of a step)")
    out = []
    for stem in sorted(sidecars):
        found = [folder / f"{stem}{suffix}" for suffix in STEP_SUFFIXES if (folder / f"{stem}{suffix}").is_file()]
        if len(found) != 1:
            raise ValueError(f"{problem}/{stem}.step needs exactly one step file {stem}.cu or "
                             f"{stem}.py beside it, found {len(found)}")
        where = f"{problem}/{stem}.step"
        out.append(StepFile(problem, found[0], int(stem[:2]),
                            parse_sidecar(sidecars[stem].read_text(encoding="utf-8"), where)))
    return out


def parse_sidecar(text: str, where: str = "sidecar") -> tuple[dict[str, str], ...]:
    """The variants of a step's sidecar: blocks of ``field: value`` lines, one block per variant,
    blank lines between them. A line that starts with a space continues the value above it (joined
    with one space); a line that starts with ``#`` is a comment. Fields: :data:`REQUIRED_FIELDS`,
    then any of :data:`OPTIONAL_FIELDS`. ``where`` names the text in errors."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    last = ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            current = None
            continue
        if line[0].isspace():
            if current is None:
                raise ValueError(f"{where}:{number}: a continuation line with no field above it")
            current[last] += " " + line.strip()
            continue
        name, sep, value = line.partition(":")
        if not sep or name not in (*REQUIRED_FIELDS, *OPTIONAL_FIELDS):
            raise ValueError(f"{where}:{number}: {line.strip()!r} is not a field line; allowed: "
                             f"'name: value' with name one of {', '.join((*REQUIRED_FIELDS, *OPTIONAL_FIELDS))}")
        if current is None:
            current = {}
            blocks.append(current)
        if name in current:
            raise ValueError(f"{where}:{number}: {name} is given twice in one variant")
        current[name], last = value.strip(), name
    if not blocks:
        raise ValueError(f"{where}: declares no variant; allowed: one block of fields per variant")
    for i, block in enumerate(blocks, 1):
        missing = [f for f in REQUIRED_FIELDS if not block.get(f)]
        if missing:
            raise ValueError(f"{where}: variant {i} ({block.get('slug', 'no slug')}) lacks "
                             f"{', '.join(missing)}; each variant needs {', '.join(REQUIRED_FIELDS)}")
    return tuple(blocks)


def step_path(problem: str, filename: str) -> Path:
    """The path of one step's source, or a clear error listing the problem's steps."""
    path = KERNELS / problem / filename
    if not path.is_file():
        have = sorted(p.name for p in (KERNELS / problem).glob("[0-9][0-9]_*")
                      if p.suffix in STEP_SUFFIXES)
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
