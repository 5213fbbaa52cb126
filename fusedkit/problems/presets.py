"""Named sizes of every problem, defined here and nowhere else.

Each problem has the same presets: ``kernelbench``, KernelBench's own sizes (the problem's
defaults, at which every GPU record was measured), and ``small``, small sizes that are a
multiple of no tile width (not of 16, 32 or 64), so that every edge of a kernel is ragged and
a whole notebook runs in seconds per cell on a CPU. The size pickers show one button per
preset (:class:`fusedkit.widgets.SizePicker`), ``python -m fusedkit report --sizes p12:small``
runs the notebooks at one, and :func:`fusedkit.lesson.small_sizes` (the sizes at which Triton
steps are checked in the CPU interpreter) is the ``small`` preset.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusedkit.problems.base import Problem, SizeError, Sizes


@dataclass(frozen=True)
class Preset:
    """One named set of sizes: ``name`` on the command line, ``label`` on the picker's button."""

    name: str
    label: str
    about: str      # one line: what the sizes are for (the button's tooltip)


KERNELBENCH = Preset("kernelbench", "KernelBench",
                     "KernelBench's sizes, those at which the GPU results were recorded")
SMALL = Preset("small", "small, odd",
               "small sizes, each a multiple of no tile width (16, 32, 64): ragged edges "
               "everywhere, and seconds per cell on a CPU")
PRESETS = (KERNELBENCH, SMALL)

# The small sizes of each problem (KernelBench's are the problem's own defaults). Primes and
# 2^k + 1 keep every dimension off every tile multiple; each stays below 128 so that Triton's
# CPU interpreter and the float64 references finish in well under a second per call.
_SMALL: dict[str, Sizes] = {
    "p12": {"batch_size": 17, "in_features": 33, "out_features": 65},
    "p45": {"batch_size": 17, "input_size": 33, "hidden_size": 65, "output_size": 19},
}


def names() -> list[str]:
    """The presets' command-line names, e.g. ``['kernelbench', 'small']``."""
    return [p.name for p in PRESETS]


def lookup(name: str) -> Preset:
    """The preset called ``name`` (its name or its label, any case), else :class:`SizeError`."""
    key = name.strip().lower()
    for p in PRESETS:
        if key in (p.name, p.label.lower()):
            return p
    raise SizeError(f"preset {name!r} is not known; allowed: {', '.join(names())}")


def sizes(problem: Problem, preset: Preset | str) -> Sizes:
    """The sizes of ``preset`` for ``problem``, validated by the problem's own rules."""
    preset = lookup(preset) if isinstance(preset, str) else preset
    if preset == KERNELBENCH:
        return problem.sizes()
    if problem.key not in _SMALL:
        raise SizeError(f"{problem.key} has no {preset.label!r} sizes; add them to "
                        "fusedkit/problems/presets.py")
    return problem.sizes(_SMALL[problem.key])


def of(problem: Problem) -> dict[str, Sizes]:
    """Every preset of ``problem``: label -> sizes, KernelBench's first."""
    return {p.label: sizes(problem, p) for p in PRESETS}


def matching(problem: Problem, given: Sizes) -> Preset | None:
    """The preset whose sizes ``given`` are, or None."""
    given = problem.sizes(given)
    return next((p for p in PRESETS if sizes(problem, p) == given), None)
