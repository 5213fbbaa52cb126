"""The one measuring path: check, then time, then one record.

Everything that checks or times a kernel goes through :func:`measure`: the ladder runner
and sweeps, the notebook steps, the explorer's Run button, and a learner's own kernel (pass
a builder instead of a registered variant). So every caller gets the same checks
(:mod:`fusedkit.check`) and the same timing (:mod:`fusedkit.bench`). The kernel runs in a
worker process (:mod:`fusedkit.isolation`); every verdict is reached in the caller's process,
which never runs it. The guards on the timing itself:

- the timed model and inputs are fresh draws, never the checked ones; this process orders every
  timed call (:class:`TimedCallsDriver`): before it, warm-up included, the input buffer is refilled
  with fresh random values from a seed sent just then (never a set seen before, so a result cached
  by pointer or by content is wrong, or never found, and no later input can be known); after it
  has returned, a few rows of its output, drawn here only then, are sent back and compared with
  float64 on the same rows of the input replayed here: every call is verified, so a kernel wrong on
  one call in five, or one in fifty, is caught whenever it is wrong while timed, and one that
  computes only some rows cannot know which;
- a library function the candidate replaces, during its build or any call, checked or timed
  (torch's, torch.Tensor's, fusedkit's own: :mod:`fusedkit.guard`), is named in one line, put
  back, and refuses the measurement;
- on a GPU, checks and timing run on a stream of the harness's own, the events on it are
  cross-checked with device-wide wall time over the same calls, and a call whose events see
  much less than the device was busy is refused (its work hides on another stream);
- a time below the roofline floor of the declared precision on this GPU's datasheet is
  refused ("faster than this GPU allows"): it is not recorded as a result.
"""

from __future__ import annotations

import math
import random
import secrets
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import torch

from fusedkit import bench, isolation, problems, wire
from fusedkit.check import (EPS32, SEEDS, Build, CheckResult, check_call_timeout, check_seeds,
                            check_variant, device_refusal, harness_device, plain_output_fault,
                            short)
from fusedkit.guard import Snapshot
from fusedkit.hardware import GpuSpec, detect_gpu
from fusedkit.interrupts import checkpoint
from fusedkit.isolation import BUILD_TIMEOUT_S, CALL_TIMEOUT_S, harness_stream, one_line, unpack  # noqa: F401 - re-exported
from fusedkit.precision import PRECISIONS, grouped_error_bounds
from fusedkit.problems import Problem, Sizes, Variant, fmt_sizes
from fusedkit.problems.base import harness_bytes  # noqa: F401 - measure's memory, re-exported
from fusedkit.roofline import achieved, fused_floor

# Bound once, here, as fusedkit.bench binds its clock: the rows each timed call is verified on are
# chosen and copied with these, whatever a candidate later puts in their place.
_index_select = torch.index_select

VERIFIED_ROWS = 8
"""Rows of every timed call's output (all of them when there are fewer) compared with float64.
Each problem here maps row m of x to row m of its output alone, so a few rows are a whole check
of the call at a few rows' cost; which rows is drawn at random in the caller once the call has
returned (:class:`TimedCallsDriver`), and their inputs are replayed there from the call's seed."""
TIMED_ERROR_FACTOR = 4.0
"""A timed output is wrong when its rel. error is beyond both what its declared precision can
explain on its rows and this many times the worst checked one (a kb-pass kernel's error may lie
beyond its precision's bound, but not grow when timed)."""
MIN_TIMED_CALLS, MIN_TIMED_CALLS_CPU = 10, 3
"""The fewest timed calls a measurement makes on a GPU and on a CPU (where a call may take
seconds), however slow the kernel makes its estimating calls look: the caller decides the
count, not the kernel."""
JUDGED_CALLS_AT_ONCE = 256
"""Timed calls whose verified rows are judged in one float64 forward (a chunk's rows are a
few MB whatever the sizes)."""
HIDDEN_WORK_FACTOR, HIDDEN_WORK_MS = 2.0, 0.05
"""Device-wide wall time above this factor of what the events (or the host) saw, and by more
than this many ms per call, means work the events did not see."""
WARMUP_MS, REP_MS = 100.0, 500.0
"""Default timing budgets (and check.SEEDS builds checked): the same for every caller unless told."""

# Refusals found while timing; each reason starts with one of these.
HIDDEN_WORK = "work outside the caller's stream"
TIMED_DIFFER = "timed calls differ from checked ones"
IMPOSSIBLE = "faster than this GPU allows"
CANNOT_RUN = "cannot run here"
"""The verdict of a plan that cannot run on its device (:attr:`Plan.refusal`): not a fault."""


@dataclass
class Measurement:
    """One candidate measured at one size: its check, its timing, and why it was refused."""

    problem: Problem
    variant: Variant
    sizes: Sizes
    device: torch.device
    check: CheckResult
    timing: bench.Timing | None = None
    build_s: float = math.nan            # seconds its first build took, its first call included
                                         # (a compile, an extension load, weight splits)
    seconds: float = math.nan            # wall seconds of the whole measurement, check included
    peak_mem_mb: float | None = None     # device memory one call needs (GPU only)
    floor_ms: float = math.nan           # fused roofline floor on ``gpu`` at its precision
    gpu: GpuSpec | None = None
    refused: str = ""                    # a fault found while timing: not a result
    interpreter: bool = False            # a Triton kernel run in the CPU interpreter
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Checked, clean and (if timing was asked for) timed without a refusal."""
        return self.check.ok and not self.refused

    @property
    def timed(self) -> bool:
        return self.ok and self.timing is not None

    @property
    def skipped(self) -> bool:
        """Not run at all: it cannot run here (:attr:`Plan.refusal`), which is no fault of it."""
        return self.refused.startswith(CANNOT_RUN + ":")

    @property
    def tier(self) -> str:
        """The check's tier; "" where the interpreter cannot judge the declared precision."""
        if not self.check.ok:
            return ""
        if self.interpreter and self.variant.precision != "fp32":
            return ""
        return self.check.tier

    @property
    def failure(self) -> str:
        """One line: what was detected, "" when nothing was."""
        if not self.check.ok:
            return "; ".join(self.check.failures)
        return self.refused

    @property
    def tflops(self) -> float:
        return achieved(self.problem.flops(self.sizes), self.problem.min_bytes(self.sizes),
                        self.timing.median_ms)[0] if self.timing else math.nan

    @property
    def gbps(self) -> float:
        return achieved(self.problem.flops(self.sizes), self.problem.min_bytes(self.sizes),
                        self.timing.median_ms)[1] if self.timing else math.nan

    @property
    def pct_of_floor(self) -> float:
        if not self.timing or self.timing.timer != "cuda-events":
            return math.nan
        return 100.0 * self.floor_ms / self.timing.median_ms

    def record_fields(self) -> dict:
        """The columns of this measurement's row in ``data/`` (see :func:`fusedkit.records.make_row`).
        Only a timed, clean measurement has a row."""
        if not self.timed:
            raise ValueError(f"{self.variant.slug}: not recorded: {self.failure or 'not timed'}")
        t, gpu = self.timing, self.gpu
        notes = [f"precision={self.variant.precision}"]
        if t.timer == "cuda-events" and gpu is not None:
            notes.append(f"floor on {gpu.name}")
        notes += self.notes
        row = dict(problem=self.problem.key, sizes=fmt_sizes(self.sizes), variant=self.variant.slug,
                   tier=self.tier, rel_error=self.check.rel_error,
                   max_abs_error=self.check.max_abs_error, allclose=self.check.allclose,
                   timer=t.timer, median_ms=t.median_ms, p10_ms=t.p10_ms, p90_ms=t.p90_ms,
                   repeats=t.repeats, tflops=self.tflops, gbps=self.gbps,
                   peak_mem_mb=self.peak_mem_mb,
                   build_s=None if math.isnan(self.build_s) else self.build_s,
                   seconds=None if math.isnan(self.seconds) else self.seconds,
                   pct_of_floor=None if math.isnan(self.pct_of_floor) else self.pct_of_floor,
                   notes="; ".join(notes))
        return row

    def row(self) -> dict:
        """This measurement's columns of ``data/`` (:meth:`record_fields`)."""
        return self.record_fields()

    def summary(self) -> str:
        """One line for logs and learners."""
        name = self.variant.slug
        if self.skipped:
            return f"{name}: not run — {self.failure}"
        if not self.ok:
            return f"{name}: FAILED — {self.failure}"
        tier = self.tier or "tier not judged (interpreter)"
        if self.timing is None:
            return f"{name}: {tier}, rel. error {self.check.rel_error:.2e} (checked, not timed)"
        return (f"{name}: {tier}, {self.timing.median_ms:.4g} ms, rel. error "
                f"{self.check.rel_error:.2e}")


def candidate(problem: Problem, what: Variant | str | Build, *, name: str = "",
              precision: str = "fp32", triton: bool = False) -> Variant:
    """A registered variant (by slug or itself), or a learner's builder wrapped as one.

    A builder is ``build(model) -> fn`` where ``fn(*inputs)`` returns the output; ``precision``
    is the arithmetic it claims (it sets the floor it may not beat), ``triton`` whether it is
    a Triton kernel (on CPU it then runs in the interpreter).
    """
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


@dataclass(frozen=True)
class Plan:
    """One measurement, every argument checked once, where it is given (the command line, a
    widget, a probe, a learner's call): the measuring path takes it as it is. ``refusal`` says
    why it cannot run here ("" when it can): a GPU step on a CPU, a Hopper step on another GPU,
    a Triton step over the interpreter's budget or outside the interpreter on a CPU; measuring
    such a plan gives that verdict, not an exception."""

    problem: Problem
    variant: Variant
    sizes: Sizes
    device: torch.device
    seeds: int | tuple[int, ...] = SEEDS
    warmup_ms: float = WARMUP_MS
    rep_ms: float = REP_MS
    time_it: bool = True
    gpu: GpuSpec | None = None
    call_timeout_s: float = CALL_TIMEOUT_S
    build_timeout_s: float = BUILD_TIMEOUT_S
    refusal: str = ""


def plan(problem: Problem | str, what: Variant | str | Build, sizes: Sizes | None = None, *,
         device: str | torch.device | None = None, seeds: int = SEEDS,
         warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS, gpu: GpuSpec | None = None,
         time_it: bool = True, name: str = "", precision: str = "fp32", triton: bool = False,
         call_timeout_s: float = CALL_TIMEOUT_S, build_timeout_s: float = BUILD_TIMEOUT_S) -> Plan:
    """The :class:`Plan` of :func:`measure`'s arguments (see there), each checked: a bad one is
    a ValueError or TypeError in one line naming it. Nothing runs."""
    if isinstance(problem, str):
        problem = problems.get(problem)
    elif not isinstance(problem, Problem):
        raise TypeError(f"problem={problem!r} is not a problem; allowed: a Problem or one of "
                        f"{', '.join(problems.names())}")
    check_seeds(seeds)
    bench.check_budgets(warmup_ms, rep_ms)
    check_call_timeout(call_timeout_s, build_timeout_s)
    _check_options(sizes, gpu, time_it, name, precision, triton)
    v = candidate(problem, what, name=name, precision=precision, triton=triton)
    sizes = problem.sizes(sizes if sizes is not None else problem.defaults)
    device = harness_device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    seeds = seeds if isinstance(seeds, int) else tuple(seeds)
    count = seeds if isinstance(seeds, int) else len(seeds)
    refusal = device_refusal(problem, v, sizes, device, seeds=count, time_it=time_it)
    return Plan(problem, v, sizes, device, seeds, float(warmup_ms), float(rep_ms), time_it, gpu,
                float(call_timeout_s), float(build_timeout_s),
                f"{CANNOT_RUN}: variant={v.slug!r} on {device} {refusal}" if refusal else "")


def measure(problem: Problem | str | Plan, what: Variant | str | Build | None = None,
            sizes: Sizes | None = None, **options: object) -> Measurement:
    """Check ``what`` (a variant, its name, or a builder) of ``problem`` (a Problem or its name,
    e.g. "p12") at ``sizes`` on ``device``, then, if the check found no fault, time it; or
    measure a :class:`Plan` made before (``measure(plan)``). Returns the :class:`Measurement`;
    never records.

    ``seeds`` builds are checked (1 to :data:`~fusedkit.check.MAX_SEEDS`); ``warmup_ms`` and
    ``rep_ms`` are the timing budgets in ms; ``call_timeout_s`` the seconds one call of the
    kernel may take before it counts as hung (default :data:`fusedkit.isolation.CALL_TIMEOUT_S`,
    60 s; ``build_timeout_s`` the same for a build, default
    :data:`~fusedkit.isolation.BUILD_TIMEOUT_S`, 900 s). ``gpu`` is the spec the
    % of floor is computed on
    (default: the detected GPU's datasheet; the ladder passes measured ceilings). The refusal of
    impossible speed always uses the datasheet. Every argument is checked before anything runs
    (:func:`plan`): a bad one is a ValueError or TypeError naming it, never a failure of the
    kernel. A variant that cannot run here at all (a GPU-only variant on a CPU, sizes over the
    interpreter's budget) is a verdict: the measurement is ``skipped``, its ``failure`` says why.
    """
    started = time.perf_counter()
    if isinstance(problem, Plan):
        if what is not None or sizes is not None or options:
            raise TypeError("measure(plan) takes the plan alone; its arguments are the plan's")
        p = problem
    else:
        if what is None:
            raise TypeError("measure() needs what to measure: a variant, its name or a builder")
        p = plan(problem, what, sizes, **options)
    m = _measure(p)
    m.seconds = time.perf_counter() - started
    return m


def _measure(p: Plan) -> Measurement:
    """:func:`measure` of a plan, but for the wall seconds it fills in."""
    problem, v, sizes, device = p.problem, p.variant, p.sizes, p.device
    datasheet = detect_gpu().spec
    m = Measurement(problem, v, sizes, device, check=CheckResult(problem.key, v.slug, sizes, []),
                    gpu=p.gpu or datasheet, interpreter=v.triton and device.type == "cpu")
    if p.refusal:
        m.refused = p.refusal
        return m
    if m.interpreter:
        m.notes.append("measured in Triton's CPU interpreter, which computes every dot in fp32 "
                       "(tf32 and fp16 ignored): the tier judges the logic, not the precision")
    m.check = check_variant(problem, v, sizes, device=device, seeds=p.seeds,
                            call_timeout_s=p.call_timeout_s, build_timeout_s=p.build_timeout_s)
    m.build_s = m.check.build_s
    if not m.check.ok or not p.time_it:
        return m
    seed = m.check.seeds[0] + 7919      # never a checked draw
    m.floor_ms = fused_floor(problem, sizes, m.gpu, v.precision).floor_ms
    _time(m, seed, p.warmup_ms, p.rep_ms, p.call_timeout_s, p.build_timeout_s)
    if m.timing and m.timing.timer == "cuda-events" and not m.refused:
        floor = fused_floor(problem, sizes, datasheet, v.precision).floor_ms
        if m.timing.median_ms < floor:
            m.refused = (f"{IMPOSSIBLE}: {m.timing.median_ms:.4g} ms is below the {v.precision} floor "
                         f"of {floor:.4g} ms on {datasheet.name}'s datasheet; it cannot be doing "
                         f"the work at {v.precision} (declare the precision it really uses)")
    return m


def _check_options(sizes: object, gpu: object, time_it: object, name: object, precision: object,
                   triton: object) -> None:
    """Refuse, in one line naming it, an option of :func:`measure` of the wrong kind."""
    if sizes is not None and not isinstance(sizes, Mapping):
        raise TypeError(f"sizes={sizes!r} is not a mapping of sizes, e.g. "
                        "{'batch_size': 8}; allowed: a dict or None (the problem's defaults)")
    if gpu is not None and not isinstance(gpu, GpuSpec):
        raise TypeError(f"gpu={gpu!r} is not a GpuSpec; allowed: None (the detected GPU) or a "
                        "spec of fusedkit.hardware, e.g. hardware.detect_gpu().spec")
    for key, value in (("time_it", time_it), ("triton", triton)):
        if not isinstance(value, bool):
            raise TypeError(f"{key}={value!r} is not True or False")
    if not isinstance(name, str):
        raise TypeError(f"name={name!r} is not a string")
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is not a precision; allowed: {', '.join(PRECISIONS)}")


def _refill(problem: Problem, inputs: list[torch.Tensor], seed: int) -> None:
    """Fresh values into ``inputs`` from a generator seeded by ``seed``, on their device (the
    device's own Philox on a GPU, numpy's PCG64 on a CPU): the worker and this process make the
    same values from the same seed."""
    device = inputs[0].device
    rng = (torch.Generator(device).manual_seed(seed) if device.type == "cuda"
           else np.random.default_rng(seed))
    problem.refill_inputs(inputs, rng)


class TimedCallsDriver:
    """This process's side of the timed calls (:func:`candidate_timing` asks it before each
    call): it decides how many calls there are, each call's input (a seed drawn here, sent just
    before that call), and which rows of each call's output are verified, drawn only once that
    call has returned (the worker asks for its next order after it). The number of calls comes
    from this process's clock: five estimating calls, then a device-wide sync, timed from here,
    size the warm-up (``warmup_ms``, randomised by a quarter) and the timed calls (``rep_ms``),
    at least :data:`MIN_TIMED_CALLS` and at most :data:`fusedkit.bench.MAX_CALLS` whatever
    the kernel does."""

    ESTIMATING = 5

    def __init__(self, rows: int, gpu: bool, warmup_ms: float, rep_ms: float) -> None:
        self.rows, self.gpu, self.warmup_ms, self.rep_ms = rows, gpu, warmup_ms, rep_ms
        self.rng = random.Random(secrets.randbits(64))
        self.seeds: list[int] = []          # per call ordered: its input's seed
        self.verified: list[list[int]] = []   # per call returned: its verified rows
        self.first_timed = self.total = -1    # set once the estimate is in
        self.started = self.synced = math.nan
        self.timed_from = math.nan            # this clock when the first timed call was ordered
        self.estimate_ms = math.nan

    def __call__(self, question: object) -> dict:
        if not (isinstance(question, list) and len(question) in (2, 3) and question[0] == "next"
                and type(question[1]) is int):
            raise wire.Malformed("a timed call's question that is not ['next', calls made]")
        made = question[1]
        said = question[2] if len(question) == 3 else None   # the estimating calls' own times
        if made != len(self.seeds):
            raise wire.Malformed(f"the worker says it made {made} timed calls; {len(self.seeds)} "
                                 "were ordered")
        rows = None
        if len(self.verified) < made:   # the last call has returned: now its rows are drawn
            rows = sorted(self.rng.sample(range(self.rows), min(self.rows, VERIFIED_ROWS)))
            self.verified.append(rows)
        now = time.monotonic()   # the clock of isolation's timeline
        if made == 0:
            self.started = now
        if made == self.ESTIMATING and math.isnan(self.synced):
            self.synced = now
            return {"op": "sync", "seed": None, "rows": rows}
        if made == self.ESTIMATING and self.total < 0:
            # The estimating calls' own times, as the worker says them, but never more than five
            # calls and a device-wide sync took on this clock: a kernel can push the count only
            # between the floor and the cap.
            seen = (now - self.started) * 1e3 / self.ESTIMATING
            if not (isinstance(said, list) and len(said) == self.ESTIMATING
                    and all(type(t) is float and math.isfinite(t) and t > 0 for t in said)):
                raise wire.Malformed("the estimating calls' times are not five positive numbers")
            self.estimate_ms = max(min(float(np.median(said)), seen), 1e-4)
            warm = int(self.warmup_ms / self.estimate_ms * self.rng.uniform(0.75, 1.25))
            warm = min(bench.MAX_CALLS // 4, max(1 if self.gpu else 0, warm))
            floor = MIN_TIMED_CALLS if self.gpu else MIN_TIMED_CALLS_CPU
            timed = min(bench.MAX_CALLS, max(floor, int(self.rep_ms / self.estimate_ms)))
            self.first_timed = self.ESTIMATING + warm
            self.total = self.first_timed + timed
        if made == self.first_timed:
            self.timed_from = now
        if self.total >= 0 and made >= self.total:
            return {"op": "stop", "seed": None, "rows": rows}
        self.seeds.append(secrets.randbits(63))
        return {"op": "call", "seed": self.seeds[-1], "rows": rows}


def _time(m: Measurement, seed: int, warmup_ms: float, rep_ms: float,
          call_timeout_s: float = CALL_TIMEOUT_S, build_timeout_s: float = BUILD_TIMEOUT_S) -> None:
    """Time ``m``'s variant in its worker (:func:`candidate_timing`) on fresh weights, every call
    ordered from here (:class:`TimedCallsDriver`: its input's seed, then its rows to verify),
    then judge here, where it never ran: the times' statistics, every call's
    :data:`VERIFIED_ROWS` random rows against float64 (the inputs replayed from the same seeds),
    the report against what this process saw, and on a GPU the events against device-wide wall
    time. Fills ``m``."""
    problem, sizes, device = m.problem, m.sizes, m.device
    rows = problem.input_shapes(sizes)[0][0]
    driver = TimedCallsDriver(rows, device.type == "cuda", warmup_ms, rep_ms)
    timeline: list = []
    try:
        got = isolation.run(candidate_timing, problem, m.variant.build, device,
                            call_timeout_s=call_timeout_s, answer=driver, timeline=timeline,
                            build_timeout_s=build_timeout_s, sizes=dict(sizes), seed=seed)
        got = wire.fields(got, dict(raised=str, faults=list, samples_ms=list, timer=str,
                                    rows=(torch.Tensor, type(None)), wall_ms=float,
                                    host_ms=float, peak_mem_mb=(float, type(None))))
    except isolation.WorkerDied as e:
        m.refused = e.line
        return
    except wire.Malformed as e:
        isolation.retire(device)
        m.refused = f"{isolation.MALFORMED} ({e})"
        return
    if got["raised"]:
        m.refused = f"raised an error while timed: {got['raised']}"
        return
    faults = [str(f) for f in got["faults"]]
    patched = [f for f in faults if f.startswith("patched ")]
    if patched:
        isolation.retire(device)
        m.refused = patched[0]
        return
    if faults:
        m.refused = f"{TIMED_DIFFER}: {faults[0]}; a kernel must return the same kind of output when timed"
        return
    forged = _report_fault(driver, got, timeline, device)
    if forged:
        isolation.retire(device)
        m.refused = f"{isolation.MALFORMED} ({forged})"
        return
    m.timing = bench.summarize(got["samples_ms"][driver.first_timed:driver.total], got["timer"])
    checkpoint()
    rel, allowed = _judge_rows(m, seed, driver, unpack(got["rows"], device))
    wrong = (~(rel <= allowed)).nonzero().flatten().tolist()
    if wrong:
        i = wrong[0]
        m.refused = (f"{TIMED_DIFFER}: {len(wrong)} of {rel.numel()} calls made while timed gave outputs "
                     f"beyond what {m.variant.precision} explains and {TIMED_ERROR_FACTOR:g}x the "
                     f"checked calls' error (call {i + 1}: rel. error {short(rel[i].item())} on "
                     f"{len(driver.verified[i])} random rows of its own fresh input, allowed "
                     f"{short(allowed[i].item())}); a kernel must not change what it computes when "
                     "it is timed")
        return
    if device.type == "cuda":
        wall, host = got["wall_ms"], got["host_ms"]
        saw = max(m.timing.median_ms, host)
        if wall > HIDDEN_WORK_FACTOR * saw and wall - saw > HIDDEN_WORK_MS:
            m.refused = (f"{HIDDEN_WORK}: events on the caller's stream saw {m.timing.median_ms:.4g} ms "
                         f"per call but the GPU was busy {wall:.4g} ms per call; join any side stream "
                         "to the caller's current stream")
            return
        m.peak_mem_mb = got["peak_mem_mb"]


def _report_fault(driver: TimedCallsDriver, got: dict, timeline: list, device: torch.device) -> str:
    """What in the worker's report of its timed calls cannot be true given what this process
    saw ("" when nothing): a sample per call ordered, rows for each, and timed calls that took,
    together, no longer than this clock saw pass from the first timed order to the report."""
    samples, calls = got["samples_ms"], len(driver.seeds)
    if driver.total < 0 or calls != driver.total:
        return f"the timed calls stopped after {calls} calls, before the {driver.total} ordered"
    if len(samples) != calls or not all(type(t) is float and math.isfinite(t) and t > 0
                                        for t in samples):
        return f"{len(samples)} times for {calls} calls, or a time that is not a positive number"
    rows = got["rows"]
    if rows is None or rows.dim() < 2 or rows.shape[0] != calls or \
            rows.shape[1] != len(driver.verified[0]):
        return f"verified rows of shape {tuple(rows.shape) if rows is not None else None} for {calls} calls"
    done = next((t for stage, t in reversed(timeline) if stage == "done"), math.nan)
    seen_ms = (done - driver.timed_from) * 1e3
    claimed = sum(samples[driver.first_timed:driver.total])
    if claimed > 1.05 * seen_ms + 5.0:
        return (f"its timed calls took {claimed:.4g} ms by its own report, more than the "
                f"{seen_ms:.4g} ms this process saw them take")
    return ""


def _judge_rows(m: Measurement, seed: int, driver: TimedCallsDriver,
                rows_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per timed call, the rel. error of the rows the worker sent and what is allowed: each
    call's input replayed from its seed and its rows those drawn here, the references computed
    from the model regenerated from ``seed`` in float64."""
    problem, sizes, device = m.problem, m.sizes, m.device
    hidden64 = problem.make_model(sizes, seed=seed, device=device).double()
    inputs = problem.get_inputs(sizes, seed=seed, device=device)
    floor = TIMED_ERROR_FACTOR * max(m.check.rel_error, m.check.eager_rel_error, 2 * EPS32)
    calls = rows_out.shape[0]
    if not calls:
        return torch.zeros(0), torch.zeros(0)
    kept = []
    for call_seed, rows in zip(driver.seeds, driver.verified):
        _refill(problem, inputs, call_seed)
        idx = torch.tensor(rows, device=device)
        kept.append([_index_select(t, 0, idx) for t in inputs])
    per = kept[0][0].shape[0]
    rels, allowed = [], []
    for start in range(0, calls, JUDGED_CALLS_AT_ONCE):
        chunk = kept[start:start + JUDGED_CALLS_AT_ONCE]
        stacked = [torch.cat([k[j] for k in chunk]) for j in range(len(inputs))]
        ref, bounds = grouped_error_bounds(hidden64, stacked, per, m.variant.precision,
                                           problem.error_model)
        got = rows_out[start:start + len(chunk)].double().reshape(len(chunk), -1)
        ref = ref.reshape(len(chunk), -1)
        norm = torch.linalg.vector_norm(ref, dim=1)
        rel = torch.linalg.vector_norm(got - ref, dim=1) / torch.where(norm > 0, norm, 1.0)
        rels.append(torch.where(torch.isfinite(got).all(dim=1), rel, math.inf))
        allowed.append(bounds.clamp(min=floor))
    return torch.cat(rels).cpu(), torch.cat(allowed).cpu()


def candidate_timing(*, build: Build, report: Callable[[str], None], progress: object,
                     ask: Callable[[object], object], problem_key: str, sizes: Sizes, seed: int,
                     device: str) -> dict:
    """The candidate's side of a timing, run in its worker process: the model and inputs under
    ``seed``, the candidate built, then each call as the caller orders it (``ask``: its input's
    seed; after it returned, the rows of its output to keep, sent back whole: the verdict on
    them is :func:`_judge_rows`'). Library functions the candidate replaced are named and put
    back."""
    problem, device = problems.get(problem_key), torch.device(device)
    sizes = problem.sizes(sizes)
    model = problem.make_model(sizes, seed=seed, device=device)
    inputs = problem.get_inputs(sizes, seed=seed, device=device)
    expect = tuple(problem.output_shape(sizes))
    out = dict(raised="", faults=[], samples_ms=[], timer="", rows=None, wall_ms=math.nan,
               host_ms=math.nan, peak_mem_mb=None)
    snapshot = Snapshot(problem, model)   # before the build: what torch and fusedkit hold
    try:
        _candidate_timing(out, problem, build, model, inputs, expect, ask, device, snapshot,
                          report, progress)
    finally:
        snapshot.restore()
    return out


def _candidate_timing(out: dict, problem: Problem, build: Build, model: torch.nn.Module,
                      inputs: list[torch.Tensor], expect: tuple[int, ...],
                      ask: Callable[[object], object], device: torch.device, snapshot: Snapshot,
                      report: Callable[[str], None], progress: object) -> None:
    """:func:`candidate_timing` once its model, inputs and snapshot exist."""
    report("the build")
    try:
        fn = build(model)
    except Exception as e:  # noqa: BLE001 - a build that breaks while timed is a finding
        if isolation.is_device_fault(e):
            raise
        out["faults"] = [f for f in [snapshot.fault("during the timing's build")] if f]
        out["raised"] = "" if out["faults"] else one_line(e)
        return
    patched = snapshot.fault("during the timing's build")
    if patched:
        out["faults"] = [patched]
        return
    report("timed calls")
    gpu = device.type == "cuda"
    flush = bench.flush_buffer(device) if gpu else None
    marks: list = []
    rows: list[torch.Tensor] = []
    faults: list[str] = out["faults"]
    last = None   # the last call's output, until its rows are chosen
    said: list = []   # after the caller's sync: the estimating calls' times, sent once
    try:
        while True:
            order = ask(["next", len(marks), *said])
            said = []
            if order["rows"] is not None and last is not None:
                rows.append(_index_select(last.detach(), 0,
                                          torch.tensor(order["rows"], device=device)))  # queued
            last = None
            if order["op"] == "sync":
                said = [bench.elapsed_ms(marks, device)]   # waits for the device
                continue
            if order["op"] == "stop":
                break
            checkpoint()
            progress.value = len(marks) + 1
            _refill(problem, inputs, order["seed"])
            marks.append(bench.timed_call(lambda: _call(fn, inputs), device, flush))
            got = marks[-1][1]
            marks[-1] = marks[-1][0]
            patched = snapshot.fault(f"during timed call {len(marks)}")
            fault = patched or plain_output_fault(got, expect, device)
            if fault:
                faults.append(fault if patched else f"call {len(marks)}: {fault}")
                return
            last = got
    except Exception as e:  # noqa: BLE001
        if isolation.is_device_fault(e):
            raise
        patched = snapshot.fault("while timed")
        out["faults"] = [patched] if patched else faults
        out["raised"] = "" if patched else one_line(e)
        return
    out["samples_ms"], out["timer"] = bench.elapsed_ms(marks, device), bench.timer_name(device)
    out["rows"] = isolation.pack(torch.stack(rows)) if rows else None
    if gpu:
        report("device-wide timing")
        median = float(np.median(out["samples_ms"])) if out["samples_ms"] else 0.01
        out["wall_ms"], out["host_ms"] = bench.device_busy_ms(lambda: _call(fn, inputs), device,
                                                              per_call_ms=median)
        out["peak_mem_mb"] = bench.peak_memory_mb(lambda: _call(fn, inputs), device)


@torch.no_grad()
def _call(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor]) -> torch.Tensor:
    return fn(*inputs)
