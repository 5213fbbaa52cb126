"""A measurement, every argument checked once, at the edge where it is given: :func:`plan`.
A bad argument is one ValueError or TypeError naming it; a candidate that cannot run here is no
error, its plan carries the ``refusal``. Everything below takes a :class:`Plan` as it is."""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from fusedkit import problems
from fusedkit.hardware import GpuSpec
from fusedkit.harness import budget
from fusedkit.harness.terms import (CANNOT_RUN, MAX_BUDGET_MS, MAX_SEEDS, REP_MS, SEEDS, TIMEOUTS_S,
                                    WARMUP_MS, Build)
from fusedkit.precision import PRECISIONS
from fusedkit.problems import Problem, Sizes, Variant


@dataclass(frozen=True)
class Plan:
    """One measurement, ready: see :func:`plan`."""

    problem: Problem
    variant: Variant
    sizes: Sizes
    device: torch.device
    seeds: int | tuple[int, ...] = SEEDS
    warmup_ms: float = WARMUP_MS
    rep_ms: float = REP_MS
    time_it: bool = True
    gpu: GpuSpec | None = None
    call_timeout_s: float = 60.0
    build_timeout_s: float = 900.0
    refusal: str = ""            # why it cannot run here; "" when it can
    estimate_s: float = 0.0      # predicted wall seconds of measuring it here


def candidate(problem: Problem, what: Variant | str | Build, *, name: str = "",
              precision: str = "fp32", triton: bool = False) -> Variant:
    """A registered variant (by slug or itself), or a learner's builder wrapped as one:
    ``build(model) -> fn`` with ``fn(*inputs)`` the output; ``precision`` the arithmetic it
    claims (it sets its floor and its error budget), ``triton`` whether it is a Triton kernel."""
    if isinstance(what, Variant):
        return what
    if isinstance(what, str):
        return problem.variant(what)
    if not callable(what):
        raise TypeError(f"candidate={what!r}: expected a variant name, a Variant or a builder "
                        "build(model) -> fn")
    slug = name or getattr(what, "__name__", "") or "candidate"
    if slug in problem.variants:
        raise ValueError(f"name={slug!r} is a registered variant of {problem.key}; give your kernel "
                         "another name")
    return Variant(99, slug, slug, "a kernel of your own", what, precision=precision, triton=triton)


def plan(problem: Problem | str, what: Variant | str | Build, sizes: Mapping | None = None, *,
         device: str | torch.device | None = None, seeds: int | Sequence[int] = SEEDS,
         warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS, gpu: GpuSpec | None = None,
         time_it: bool = True, name: str = "", precision: str = "fp32", triton: bool = False,
         call_timeout_s: float | None = None, build_timeout_s: float | None = None,
         budget_s: float = budget.CPU_BUDGET_S) -> Plan:
    """The :class:`Plan` of :func:`fusedkit.harness.measure`'s arguments, each checked.

    ``seeds``: builds checked (a count from 1 to :data:`MAX_SEEDS`, or distinct seeds >= 0);
    ``warmup_ms``/``rep_ms``: the timing budgets; ``call_timeout_s``/``build_timeout_s``: how long
    one call or a build may take before it counts as hung (defaults: ``$FUSEDKIT_CALL_TIMEOUT_S``
    or 60, ``$FUSEDKIT_BUILD_TIMEOUT_S`` or 900); ``gpu``: the spec % of floor is computed on;
    ``budget_s``: the most seconds a measurement on a CPU may be estimated to take (the refusal
    names the estimate; ``math.inf`` to allow any)."""
    if isinstance(problem, str):
        problem = problems.get(problem)
    elif not isinstance(problem, Problem):
        raise TypeError(f"problem={problem!r} is not a problem; allowed: a Problem or one of "
                        f"{', '.join(problems.names())}")
    seeds = _seeds(seeds)
    warmup_ms, rep_ms = _number("warmup_ms", warmup_ms, 0.0, MAX_BUDGET_MS), _number("rep_ms", rep_ms)
    call_timeout_s, build_timeout_s = (_timeout(k, v) for k, v in (("call_timeout_s", call_timeout_s),
                                                                    ("build_timeout_s", build_timeout_s)))
    budget_s = _number("budget_s", budget_s, high=math.inf)
    if sizes is not None and not isinstance(sizes, Mapping):
        raise TypeError(f"sizes={sizes!r} is not a mapping of sizes, e.g. {{'batch_size': 8}}; "
                        "allowed: a dict or None (the problem's defaults)")
    if gpu is not None and not isinstance(gpu, GpuSpec):
        raise TypeError(f"gpu={gpu!r} is not a GpuSpec; allowed: None (the detected GPU) or a "
                        "spec of fusedkit.hardware")
    for key, value in (("time_it", time_it), ("triton", triton)):
        if not isinstance(value, bool):
            raise TypeError(f"{key}={value!r} is not True or False")
    if not isinstance(name, str):
        raise TypeError(f"name={name!r} is not a string")
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is not a precision; allowed: {', '.join(PRECISIONS)}")
    v = candidate(problem, what, name=name, precision=precision, triton=triton)
    sizes = problem.sizes(sizes if sizes is not None else problem.defaults)
    device = harness_device(device if device is not None else
                            ("cuda" if torch.cuda.is_available() else "cpu"))
    problem.check_runnable(sizes, device)
    count = seeds if isinstance(seeds, int) else len(seeds)

    def estimate(s: Sizes) -> float:
        return budget.estimate_s(problem, v, s, device, count, time_it, warmup_ms, rep_ms)
    refusal = v.refusal(device)
    seconds = 0.0 if refusal else estimate(sizes)
    if not refusal and device.type == "cpu" and seconds > budget_s:
        halved = {d: estimate({**sizes, d: n // 2}) for d, n in sizes.items() if n > 1}
        where = "in Triton's CPU interpreter" if v.triton else "on this CPU"
        hint = f"; {min(halved, key=halved.get)} dominates" if halved else ""
        what = "checked and timed" if time_it else "checked"
        refusal = (f"would take about {seconds:.0f} s {where}, {what}; allowed: {budget_s:.0f} s; "
                   f"pick smaller sizes{hint}")
    return Plan(problem, v, sizes, device, seeds, warmup_ms, rep_ms, time_it, gpu, call_timeout_s,
                build_timeout_s,
                f"{CANNOT_RUN}: variant={v.slug!r} on {device} {refusal}" if refusal else "", seconds)


def _seeds(seeds: object) -> int | tuple[int, ...]:
    allowed = (f"a count from 1 to {MAX_SEEDS}, or a list of 1 to {MAX_SEEDS} distinct seeds, "
               "each an integer >= 0")
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        if not 1 <= seeds <= MAX_SEEDS:
            raise ValueError(f"seeds={seeds} is out of range; allowed: {allowed}")
        return int(seeds)
    if isinstance(seeds, (str, bytes, bool)) or not isinstance(seeds, Sequence) or not all(
            isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in seeds):
        raise TypeError(f"seeds={str(seeds)[:60]!r} is not a count or a list of seeds; allowed: {allowed}")
    if not 1 <= len(seeds) <= MAX_SEEDS or min(seeds) < 0 or max(seeds) >= 2**62 \
            or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={list(seeds)[:8]!r}{'...' if len(seeds) > 8 else ''}; allowed: {allowed}")
    return tuple(int(x) for x in seeds)


def _timeout(name: str, value: object) -> float:
    """``value``, or where None its environment variable's (:data:`TIMEOUTS_S`), checked."""
    if value is not None:
        return _number(name, value, high=1e6)
    env, default = TIMEOUTS_S[name]
    text = os.environ.get(env, "").strip()
    try:
        return _number(f"${env}", float(text) if text else default, high=1e6)
    except ValueError:
        raise ValueError(f"{env}={text!r} is not a number of seconds; allowed: a number > 0, "
                         "at most 1e+06") from None


def _number(name: str, value: object, low: float | None = None, high: float = MAX_BUDGET_MS) -> float:
    """``value`` as a float above 0 (at least ``low`` when given) and at most ``high``, else one
    TypeError or ValueError naming it."""
    allowed = f"a number {'>= %g' % low if low is not None else '> 0'}" + \
        (f", at most {high:g}" if high < math.inf else " (math.inf: any)")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}={value!r} is not a number; allowed: {allowed}")
    if value != value or value > high or (value < low if low is not None else value <= 0) or \
            (value == math.inf and high < math.inf):
        raise ValueError(f"{name}={value!r} is out of range; allowed: {allowed}")
    return float(value)


def harness_device(device: object) -> torch.device:
    """``device`` as a device the harness runs on ("cpu", or "cuda[:N]" with that GPU visible),
    or one ValueError naming it and what is allowed here."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    allowed = "'cpu'" + (f" or 'cuda' (cuda:0 to cuda:{gpus - 1})" if gpus else "")
    try:
        dev = torch.device(device)  # type: ignore[arg-type]
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is not a device; allowed: {allowed}") from None
    if (dev.type == "cpu" and dev.index in (None, 0)) or (dev.type == "cuda" and (dev.index or 0) < gpus):
        return torch.device("cpu") if dev.type == "cpu" else dev
    why = ("no CUDA GPU is visible here" if dev.type == "cuda" and not gpus else
           "that GPU is not visible here" if dev.type == "cuda" else
           "the harness runs on the CPU as a whole ('cpu') and on CUDA GPUs")
    raise ValueError(f"device={device!r}: {why}; allowed: {allowed}")
