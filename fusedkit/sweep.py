"""Size sweeps: the same ladder at several sizes, recorded as one series (one ``run_id``).

A sweep spec names one dimension of a problem and its values::

    batch_size=1,16,128,1024      a list
    batch_size=64..16384x2        a geometric range: 64, 128, ..., 16384 (factor >= 2)
    in_features=512..4096+512     an arithmetic range: 512, 1024, ..., 4096 (step >= 1)

A range stops at the last value not above its end. Several specs give the cross product
of their values; the dimensions not swept keep the base sizes.

Every point of a sweep shares one :class:`~fusedkit.records.RunContext`, so its rows form
one series in ``data/`` and ratios stay within one run. Rows are appended as each variant
finishes: a sweep that dies half-way keeps every finished row, and the unfinished points
are simply missing from that series. There is no resume: running the sweep again starts
a new series with a new ``run_id`` (the plots read the latest one).
"""

from __future__ import annotations

import contextlib
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from fusedkit import device as beside, records
from fusedkit.clocks import path_for as clocks_path
from fusedkit.hardware import detect_gpu
from fusedkit.harness import CANNOT_RUN, CPU_BUDGET_S, REP_MS, SEEDS, WARMUP_MS
from fusedkit.problems import Problem, SizeError, Sizes, fmt_sizes
from fusedkit.runner import plans, run_ladder

MAX_POINTS = 256
"""Most size points one sweep may have (the cross product of every spec)."""

_SPEC_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*")
_RANGE_RE = re.compile(r"(\d+)\.\.(\d+)(?:([x+])(\d+))?")


def parse_spec(problem: Problem, spec: str) -> tuple[str, list[int]]:
    """One ``name=values`` spec as (dimension name, values in the order given).

    Values are validated against the dimension's range (:meth:`Dim.validate`); errors are
    :class:`SizeError` naming the dimension, the bad value and what is allowed.
    """
    if not isinstance(spec, str):
        raise TypeError(f"sweep={spec!r} is not a string like batch_size=1,16,128")
    m = _SPEC_RE.fullmatch(spec)
    if not m:
        raise SizeError(f"sweep={spec!r} must look like name=v1,v2,... or name=lo..hix2, "
                        "e.g. batch_size=1,16,128 or batch_size=64..16384x2")
    name, text = m.groups()
    dims = {d.name: d for d in problem.dims}
    if name not in dims:
        raise SizeError(f"sweep {name!r} is not a size of {problem.key}; valid: {', '.join(dims)}")
    dim = dims[name]
    allowed = f"integers from 1 to {dim.maximum}"
    if not text:
        raise SizeError(f"sweep {name}= has no values; give a list (1,16,128) or a range "
                        f"(64..16384x2) of {allowed}")
    if ".." in text:
        values = _expand_range(name, text, dim.maximum)
    else:
        values = []
        for part in (p.strip() for p in text.split(",")):
            if not part:
                raise SizeError(f"sweep {name}={text!r} has an empty value; allowed: a comma-"
                                f"separated list of {allowed}")
            try:
                number = int(part)
            except ValueError:
                raise SizeError(f"sweep {name}={part!r} is not an integer; allowed: {allowed}") from None
            values.append(number)
    try:
        values = [dim.validate(v) for v in values]
    except SizeError as e:
        raise SizeError(f"sweep {e}") from None
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise SizeError(f"sweep {name}={text!r} lists {', '.join(map(str, twice))} more than once; "
                        "each point is measured once per series")
    return name, values


def _expand_range(name: str, text: str, maximum: int) -> list[int]:
    """``lo..hixF`` (geometric) or ``lo..hi+S`` (arithmetic), up to and including ``hi``."""
    m = _RANGE_RE.fullmatch(text.replace(" ", ""))
    if not m:
        raise SizeError(f"sweep {name}={text!r} is not a range; allowed: lo..hixF (factor F >= 2, "
                        f"e.g. 64..16384x2) or lo..hi+S (step S >= 1), with 1 <= lo <= hi <= {maximum}")
    lo, hi, kind, step = int(m[1]), int(m[2]), m[3], m[4]
    if kind is None:
        raise SizeError(f"sweep {name}={text!r} has no step; allowed: lo..hixF (factor F >= 2, "
                        f"e.g. {lo}..{hi}x2) or lo..hi+S (step S >= 1)")
    if not 1 <= lo <= hi <= maximum:
        raise SizeError(f"sweep {name}={text!r}: need 1 <= lo <= hi <= {maximum}; got lo={lo}, hi={hi}")
    step_n = int(step)
    if kind == "x" and step_n < 2:
        raise SizeError(f"sweep {name}={text!r}: factor x{step_n} never grows; allowed: an integer "
                        "factor >= 2")
    if kind == "+" and step_n < 1:
        raise SizeError(f"sweep {name}={text!r}: step +{step_n} never grows; allowed: an integer step >= 1")
    values, v = [], lo
    while v <= hi:
        values.append(v)
        if len(values) > MAX_POINTS:
            raise SizeError(f"sweep {name}={text!r} has more than {MAX_POINTS} points; "
                            f"allowed: at most {MAX_POINTS}: use a larger step")
        v = v * step_n if kind == "x" else v + step_n
    return values


def parse_sweep(problem: Problem, specs: Sequence[str]) -> dict[str, list[int]]:
    """Several specs as {dimension: values}, in the order given; each dimension once."""
    if isinstance(specs, str):
        specs = [specs]
    if not specs:
        raise SizeError("sweep is empty; give at least one spec like batch_size=1,16,128")
    axes: dict[str, list[int]] = {}
    for spec in specs:
        name, values = parse_spec(problem, spec)
        if name in axes:
            raise SizeError(f"sweep {name!r} is given twice; give each dimension one spec "
                            "(the specs' cross product is swept)")
        axes[name] = values
    n = 1
    for values in axes.values():
        n *= len(values)
    if n > MAX_POINTS:
        raise SizeError(f"sweep {' x '.join(f'{k}({len(v)})' for k, v in axes.items())} has {n} "
                        f"points; allowed: at most {MAX_POINTS}")
    return axes


def sweep_points(problem: Problem, axes: Mapping[str, Sequence[int]],
                 base: Mapping[str, object] | None = None) -> list[Sizes]:
    """Validated sizes of every point: ``base`` (default: the problem's defaults) with each
    combination of the swept values, the last dimension varying fastest.

    A dimension both in ``base`` (given explicitly) and swept is refused: which would win?
    """
    base = dict(base or {})
    both = [k for k in axes if k in base]
    if both:
        raise SizeError(f"{', '.join(both)} is given both as a fixed size and as a sweep; "
                        "give it once (drop it from --sizes)")
    names = list(axes)
    return [problem.sizes({**base, **dict(zip(names, combo))})
            for combo in itertools.product(*(axes[k] for k in names))]


@dataclass
class SweepResult:
    """What one sweep measured: its series id, the rows it recorded, the points it skipped."""

    run_id: str
    rows: pd.DataFrame                  # run_ladder's rows plus one column per swept dimension
    skipped: list[str] = field(default_factory=list)   # "sizes: reason" per point not run
    points: int = 0                     # points run (fully or not)


def run_sweep(problem: Problem, axes: Mapping[str, Sequence[int]],
              base: Mapping[str, object] | None = None, *, variants: Sequence[str] | None = None,
              device: str | torch.device | None = None, seeds: int = SEEDS,
              warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS, records_path: Path | None = None,
              ceilings: bool = True, progress: bool = True,
              ctx: records.RunContext | None = None, budget_s: float = CPU_BUDGET_S) -> SweepResult:
    """The ladder at every point of a sweep, recorded as one series (one ``run_id``).

    ``axes`` is :func:`parse_sweep`'s {dimension: values}; ``base`` fixes the other sizes. Every
    point is planned before anything runs (:func:`fusedkit.runner.plans`): a point too large to
    hold here is left out, and a variant that cannot run at a point (a GPU step on a
    CPU, an estimate over ``budget_s``) is left out with its reason, said once. On a GPU the
    ceilings are measured once for the whole series, at every point's GEMM shapes, and the clocks
    read beside it. A fault is reported and the sweep goes on; an interruption ends it, and the
    rows finished before it stay recorded."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if variants:
        problem.ladder(variants)   # the names, before any work
    todo, skipped, told = [], [], set()
    for sizes in sweep_points(problem, axes, base):
        try:
            chosen = plans(problem, sizes, variants, device=device, seeds=seeds,
                           warmup_ms=warmup_ms, rep_ms=rep_ms, budget_s=budget_s)
        except SizeError as e:   # too large to hold here: this point is left out, said once
            skipped.append(f"{fmt_sizes(sizes)}: {e}")
            tqdm.write(f"skipped point {fmt_sizes(sizes)}: {e}")
            continue
        notes = [p.refusal.removeprefix(CANNOT_RUN + ": ") for p in chosen if p.refusal]
        for note in notes:
            if note not in told:
                told.add(note)
                tqdm.write(f"skipped {note} (at {fmt_sizes(sizes)})")
        names = [p.variant.slug for p in chosen if not p.refusal]
        if names:
            todo.append((sizes, names, sum(p.estimate_s for p in chosen if not p.refusal)))
        else:
            skipped.append(f"{fmt_sizes(sizes)}: {'; '.join(notes)}")
    if not todo:
        raise SizeError(f"sweep {', '.join(axes)}: no point can run on {device.type}; first: {skipped[0]}")
    tqdm.write(f"{problem.key} sweep: {len(todo)} point(s), about {sum(t for *_, t in todo):.0f} s "
               "here (estimated)")
    ctx = ctx or records.RunContext.collect()
    path = records.path_for(device, records_path)
    gpu = detect_gpu().spec
    frames = []
    with (beside.sampling(ctx.run_id, clocks_path(path), say=tqdm.write)
          if device.type == "cuda" else contextlib.nullcontext()):
        if device.type == "cuda" and ceilings:
            gpu, rows = beside.measure_ceilings(ctx, gpu, problem, [sizes for sizes, *_ in todo])
            records.append_rows(path, rows)
        bar = tqdm(todo, desc=f"{problem.key} sweep", unit="point", disable=not progress)
        for sizes, names, _ in bar:
            bar.set_postfix_str(", ".join(f"{k}={sizes[k]}" for k in axes))
            df = run_ladder(problem, sizes, variants=names, device=device, seeds=seeds,
                            warmup_ms=warmup_ms, rep_ms=rep_ms, records_path=path, ceilings=False,
                            components=[], progress=False, ctx=ctx, gpu=gpu, budget_s=budget_s)
            frames.append(df.assign(**{k: sizes[k] for k in axes}))
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return SweepResult(ctx.run_id, rows, skipped, len(todo))
