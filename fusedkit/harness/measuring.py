"""The one measuring path: check, then time, then one result (the design: docs/measuring.md).

Checked: ``seeds`` builds in a worker that has run nothing else, each called on two inputs and
judged whole against float64 here, then a nearby odd shape. Timed: every call ordered from here on
a fresh seed, its time bounded by this process's clock, its rows chosen after the worker committed
to a digest of all of them."""

from __future__ import annotations

import math
import random
import secrets
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

import torch

from fusedkit.hardware import GpuSpec, detect_gpu
from fusedkit.harness import judge, pool, timing, wire
from fusedkit.harness.plans import Plan, plan
from fusedkit.harness.terms import (CALLS_PER_BUILD, CANNOT_RUN, FAULT_CLASSES, HIDDEN_WORK,
                                    IMPOSSIBLE, MALFORMED, MUTATION, RAISED, SECOND_INPUT,
                                    SPECIALISED, TIMED_DIFFER, WRONG, row_digest)
from fusedkit.precision import EPS32, TIERS
from fusedkit.problems import Problem, Sizes, Variant, fmt_sizes
from fusedkit.problems.base import nearby_odd
from fusedkit.roofline import fused_floor

VERIFIED_ROWS = 8
"""The fewest rows of a timed call's output judged; more when calls are few (ten outputs' worth
of rows in all), so that a kernel wrong on one row of every call is caught with probability
over 99.99%."""
SPECIALISED_FACTOR = 10.0
"""At the nearby odd shape, an error this many times the requested sizes' fails."""
GPU_GAP = (0.2, 0.10)
"""On a GPU, what a timed call's round trip may exceed its events by beyond the harness's own cost
(ms, share of the call): the bound on events forged in the kernel's own process (docs/measuring.md)."""


@dataclass
class CheckResult:
    """The check of one candidate over several builds (the worst input reported)."""

    seeds: list[int]
    rel_error: float = math.nan
    max_abs_error: float = math.nan
    eager_rel_error: float = math.nan
    allclose: bool = False
    tier: str = ""
    failures: list[str] = field(default_factory=list)
    odd_sizes: Sizes | None = None
    calls: int = 0
    build_s: float = math.nan     # the first build and its first call, on this process's clock

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def fault_classes(self) -> list[str]:
        return [c for c in FAULT_CLASSES if any(f.startswith(c) for f in self.failures)]

    def fill(self, compared: list[judge.Compared]) -> None:
        self.rel_error = max(c.rel for c in compared)
        self.max_abs_error = max(c.max_abs for c in compared)
        self.eager_rel_error = max(c.eager_rel for c in compared)
        self.allclose = all(c.allclose for c in compared)


@dataclass
class Measurement:
    """One candidate measured at one size: its check, its timing, and why it was refused."""

    problem: Problem
    variant: Variant
    sizes: Sizes
    device: torch.device
    check: CheckResult
    timing: timing.Timing | None = None
    build_s: float = math.nan
    seconds: float = math.nan
    peak_mem_mb: float | None = None
    floor_ms: float = math.nan
    gpu: GpuSpec | None = None
    refused: str = ""
    interpreter: bool = False
    notes: list[str] = field(default_factory=list)
    timed_from: float = math.nan   # this machine's clock (Unix seconds) around the timed calls
    timed_to: float = math.nan

    @property
    def ok(self) -> bool:
        return self.check.ok and not self.refused

    @property
    def timed(self) -> bool:
        return self.ok and self.timing is not None

    @property
    def skipped(self) -> bool:
        """Not run at all: it cannot run here, which is no fault of it."""
        return self.refused.startswith(CANNOT_RUN + ":")

    @property
    def tier(self) -> str:
        """The check's tier; "" where the interpreter cannot judge the declared precision."""
        if not self.check.ok or (self.interpreter and self.variant.precision != "fp32"):
            return ""
        return self.check.tier

    @property
    def failure(self) -> str:
        return "; ".join(self.check.failures) if not self.check.ok else self.refused

    @property
    def tflops(self) -> float:
        return self.problem.flops(self.sizes) / self.timing.median_ms / 1e9 if self.timing else math.nan

    @property
    def gbps(self) -> float:
        return self.problem.min_bytes(self.sizes) / self.timing.median_ms / 1e6 if self.timing else math.nan

    @property
    def pct_of_floor(self) -> float:
        if not self.timing or self.timing.timer != "cuda-events":
            return math.nan
        return 100.0 * self.floor_ms / self.timing.median_ms

    def row(self) -> dict:
        """The columns of this measurement's row in ``data/`` (:func:`fusedkit.records.make_row`);
        only a timed, clean measurement has one."""
        if not self.timed:
            raise ValueError(f"{self.variant.slug}: not recorded: {self.failure or 'not timed'}")
        t = self.timing
        notes = [f"precision={self.variant.precision}"]
        if t.timer == "cuda-events" and self.gpu is not None:
            notes.append(f"floor on {self.gpu.name}")

        def num(v: float) -> float | None:
            return None if v is None or math.isnan(v) else v
        return dict(problem=self.problem.key, sizes=fmt_sizes(self.sizes), variant=self.variant.slug,
                    tier=self.tier, rel_error=self.check.rel_error,
                    max_abs_error=self.check.max_abs_error, allclose=self.check.allclose,
                    timer=t.timer, median_ms=t.median_ms, p10_ms=t.p10_ms, p90_ms=t.p90_ms,
                    repeats=t.repeats, tflops=self.tflops, gbps=self.gbps,
                    peak_mem_mb=self.peak_mem_mb, build_s=num(self.build_s),
                    seconds=num(self.seconds), pct_of_floor=num(self.pct_of_floor),
                    timed_from=_iso(self.timed_from), timed_to=_iso(self.timed_to),
                    notes="; ".join(notes + self.notes))

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
        return f"{name}: {tier}, {self.timing.median_ms:.4g} ms, rel. error {self.check.rel_error:.2e}"


def _iso(t: float) -> str | None:
    stamp = None if math.isnan(t) else datetime.fromtimestamp(t, timezone.utc)
    return stamp and stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Refused(Exception):
    """A verdict found while timing."""


def measure(problem: Problem | str | Plan, what: object = None, sizes: Sizes | None = None,
            **options: object) -> Measurement:
    """Check ``what`` (a variant, its name, or a builder ``build(model) -> fn``) of ``problem``
    at ``sizes``, then, if the check found no fault, time it; or measure a :class:`Plan` made
    before. Options and their checks: :func:`fusedkit.harness.plan`. Never records; a candidate
    that cannot run here is measured ``skipped``, with why."""
    started = time.perf_counter()
    if isinstance(problem, Plan) and (what is not None or sizes is not None or options):
        raise TypeError("measure(plan) takes the plan alone; its arguments are the plan's")
    if not isinstance(problem, Plan) and what is None:
        raise TypeError("measure() needs what to measure: a variant, its name or a builder")
    m = _measure(problem if isinstance(problem, Plan) else plan(problem, what, sizes, **options))
    m.seconds = time.perf_counter() - started
    return m


def _measure(p: Plan) -> Measurement:
    datasheet = detect_gpu().spec
    m = Measurement(p.problem, p.variant, p.sizes, p.device, CheckResult([]), gpu=p.gpu or datasheet,
                    interpreter=p.variant.triton and p.device.type == "cpu")
    if p.refusal:
        m.refused = p.refusal
        return m
    if m.interpreter:
        m.notes.append("measured in Triton's CPU interpreter, which computes every dot in fp32 "
                       "(tf32 and fp16 ignored): the tier judges the logic, not the precision")
    spec = pool.builder_spec(p.problem, p.variant.build)
    with pool.worker(p.device) as w:
        overhead = _overhead_ms(w, p) if p.time_it else math.nan   # before any of the candidate's code runs
        sources = pool.Sources()
        m.check = _check(w, p, spec)
        m.build_s = m.check.build_s
        line = sources.undo() or w.left_running()
        if line:
            m.check.failures = [line]
        if not m.check.ok or not p.time_it:
            return m
        m.floor_ms = fused_floor(p.problem, p.sizes, m.gpu, p.variant.precision).floor_ms
        try:
            _time(w, p, m, spec, m.check.seeds[0] + 7919, overhead)
        except _Refused as e:
            m.refused, m.timing = str(e), None
        except pool.WorkerDied as e:
            m.refused, m.timing = e.line, None
        m.refused = m.refused or sources.undo() or w.left_running()
    if m.timing and m.timing.timer == "cuda-events" and not m.refused:
        floor = fused_floor(p.problem, p.sizes, datasheet, p.variant.precision).floor_ms
        if m.timing.median_ms < floor:
            m.refused = (f"{IMPOSSIBLE}: {m.timing.median_ms:.4g} ms is below the {p.variant.precision} "
                         f"floor of {floor:.4g} ms on {datasheet.name}'s datasheet; it cannot be doing "
                         f"the work at {p.variant.precision} (declare the precision it really uses)")
    return m


def run_job(job, problem: Problem, build, device: str | torch.device, *,
            call_timeout_s: float = 60.0, build_timeout_s: float = 900.0, **kwargs: object) -> object:
    """Run ``job`` (a module-level function of fusedkit, such as an exercise's probe) on the
    candidate ``build`` in a worker of its own: ``job(build=, report=, problem_key=, device=,
    **kwargs)`` there, its plain result (tensors :func:`pack`-ed) here. A crash, a hang, a
    forbidden reach or a raised error is :class:`~fusedkit.harness.WorkerDied`, its ``line`` the
    verdict."""
    device = torch.device(device)
    with pool.worker(device) as w:
        sources = pool.Sources()
        kind, body = w.ask({"op": "job", "job": f"{job.__module__}:{job.__qualname__}",
                            "spec": pool.builder_spec(problem, build), "problem": problem.key,
                            "kwargs": kwargs}, build_timeout_s + call_timeout_s, "the probe's call")
        line = sources.undo() or w.left_running()
    if line:
        raise pool.WorkerDied(line)
    if kind == "raised":
        raise pool.WorkerDied(f"{RAISED}: {body}")
    return body


def pack(t: torch.Tensor | None) -> torch.Tensor | None:
    """A tensor for a job to return: its values, on the host."""
    return None if t is None else t.detach().to("cpu").contiguous()


def unpack(t: object, device: str | torch.device) -> torch.Tensor | None:
    """A tensor a job returned, on ``device``; anything else where a tensor belongs is malformed."""
    if t is None:
        return None
    if type(t) is not torch.Tensor:
        raise wire.Malformed(f"a {type(t).__name__} where a tensor belongs")
    return t.to(device)


# -- the check ----------------------------------------------------------------------------------

def _check(w: pool.Worker, p: Plan, spec: list) -> CheckResult:
    seeds = list(p.seeds) if isinstance(p.seeds, tuple) else \
        [secrets.randbelow(2**30) + i for i in range(p.seeds)]
    res = CheckResult(seeds)
    compared: list[judge.Compared] = []
    for seed in seeds:
        t0 = time.monotonic()
        failures, got = _check_build(w, p, spec, p.sizes, seed)
        if math.isnan(res.build_s):
            res.build_s = time.monotonic() - t0
        res.calls += CALLS_PER_BUILD
        compared += got
        if failures:
            res.failures = failures
            if compared:
                res.fill(compared)
            return res
    res.fill(compared)
    res.odd_sizes = nearby_odd(p.problem, p.sizes)
    failures, got = _check_build(w, p, spec, res.odd_sizes, seeds[0] + 17)
    res.calls += CALLS_PER_BUILD
    worst = max((c.rel for c in got), default=math.nan)
    allowed = SPECIALISED_FACTOR * max([res.rel_error, *(c.eager_rel for c in got), 2 * EPS32])
    if failures and not failures[0].startswith((WRONG, RAISED)):   # not a matter of shape
        res.failures = failures
        return res
    if failures and failures[0].startswith(WRONG) and worst <= allowed:
        c = max(got, key=lambda c: c.rel)    # as wrong there as here: wrong, not specialised
        res.failures = [judge.wrong_line(c.rel, c.bound, p.variant.precision,
                                         f"at the nearby odd shape {fmt_sizes(res.odd_sizes)}")]
        return res
    if failures or not worst <= allowed:
        seen = "; ".join(failures) if failures else f"rel. error {worst:.2e} against {res.rel_error:.2e}"
        res.failures = [f"{SPECIALISED}: right at {fmt_sizes(p.sizes)} but not at the nearby odd "
                        f"shape {fmt_sizes(res.odd_sizes)} ({seen})"]
        return res
    res.tier = "reference" if p.variant is p.problem.variants.get("eager") else \
        judge.classify(res.rel_error, res.eager_rel_error, res.allclose)
    return res


def _check_build(w: pool.Worker, p: Plan, spec: list, sizes: Sizes, seed: int
                 ) -> tuple[list[str], list[judge.Compared]]:
    """One build under ``seed``, called on two inputs, judged here; a worker that died is the
    verdict (and the next build gets a fresh one)."""
    where = fmt_sizes(sizes)
    expect = tuple(p.problem.output_shape(sizes))
    try:
        kind, body = w.ask({"op": "build", "problem": p.problem.key, "sizes": sizes, "seed": seed,
                            "spec": spec}, p.build_timeout_s, "the build", "build_timeout_s")
        if kind == "raised":
            return [f"{RAISED}: {str(body)[:2000]}"], []
        outs = []
        for k in range(CALLS_PER_BUILD):
            kind, body = w.ask({"op": "check", "seed": seed + k * SECOND_INPUT}, p.call_timeout_s,
                               f"call {k + 1} at {where}")
            if kind in ("raised", "fault"):
                return [f"{RAISED}: call {k + 1} at {where}: {body}" if kind == "raised"
                        else str(body)[:2000]], []
            if kind != "output" or type(body) is not torch.Tensor or tuple(body.shape) != expect \
                    or body.dtype != torch.float32:
                raise wire.Malformed(f"an output that is not a float32 tensor of shape {expect}")
            outs.append(body.to(p.device))
        kind, body = w.ask({"op": "mutation"}, p.call_timeout_s, "the check of its inputs")
        if kind != "mutation" or not isinstance(body, list) or not all(isinstance(b, str) for b in body):
            raise wire.Malformed("a mutation report that is not a list of lines")
    except pool.WorkerDied as e:
        return [e.line], []
    except wire.Malformed as e:
        w.stop()
        return [f"{MALFORMED} ({e})"], []
    if body:
        return [f"{MUTATION}: {body[0][:500]}"], []
    return judge.judge_build(p.problem, sizes, seed, p.device, p.variant.precision, outs)


# -- the timing ---------------------------------------------------------------------------------

def null_build(model: torch.nn.Module):
    """What a timed call costs the harness itself (refill, digest, round trip): a kernel that reads
    each weight and writes zeros, so the caches end as cold as after a real one."""
    tail: list[tuple[int, ...]] = []
    weights = [w.detach() for w in model.parameters()]

    def fn(x: torch.Tensor, *_rest: torch.Tensor) -> torch.Tensor:
        if not tail:
            tail.append(tuple(model(x[:1], *(t[:1] for t in _rest)).shape[1:]))
        for w in weights:
            w.sum()
        return torch.zeros((x.shape[0], *tail[0]), device=x.device)
    return fn


def _overhead_ms(w: pool.Worker, p: Plan) -> float:
    """The harness's own cost of a timed call, in the candidate's worker before its code is there:
    the same process and moment as the calls it is subtracted from (docs/measuring.md)."""
    w.ask({"op": "build", "problem": p.problem.key, "sizes": p.sizes, "seed": 1,
           "spec": pool.builder_spec(p.problem, null_build)},
          p.build_timeout_s, "the harness's own build", "build_timeout_s")
    pool.settle(p.device)
    gaps = []
    for _ in range(12):
        t0 = time.monotonic()
        _kind, body = w.ask({"op": "time", "seed": secrets.randbits(63)}, p.call_timeout_s,
                            "the harness's own call")
        gaps.append((time.monotonic() - t0) * 1e3 - float(body["ms"]))
        w.ask({"op": "rows", "rows": [0]}, p.call_timeout_s, "the harness's own call")
    # The least seen on a CPU (a burst of load must not shorten a round trip); a GPU's gap check, the median.
    return (statistics.median if p.device.type == "cuda" else min)(gaps[4:])


def _time(w: pool.Worker, p: Plan, m: Measurement, spec: list, seed: int, overhead: float) -> None:
    """Time the candidate on fresh weights, every call ordered and bounded from here; fill ``m``."""
    problem, device, gpu = p.problem, p.device, p.device.type == "cuda"
    rows_n = problem.input_shapes(p.sizes)[0][0]
    row_shape = tuple(problem.output_shape(p.sizes))[1:]
    kind, body = w.ask({"op": "build", "problem": problem.key, "sizes": p.sizes, "seed": seed,
                        "spec": spec}, p.build_timeout_s, "the timing's build", "build_timeout_s")
    if kind == "raised":
        raise _Refused(f"{RAISED} while timed: {body}")
    rng = random.Random(secrets.randbits(64))

    def call(k: int, label: str) -> tuple[judge.TimedCall, float, float]:
        s = secrets.randbits(62)
        t0 = time.monotonic()
        kind, body = w.ask({"op": "time", "seed": s}, p.call_timeout_s, label)
        wall = (time.monotonic() - t0) * 1e3
        if kind == "raised":
            raise _Refused(f"{RAISED} while timed ({label}): {body}")
        if kind == "fault":
            raise _Refused(f"{TIMED_DIFFER}: {label}: {str(body)[:500]}; a kernel must return the "
                           "same kind of output when timed")
        ms, digest = (body.get("ms"), body.get("digest")) if isinstance(body, dict) else (None, None)
        if type(ms) not in (int, float) or not 0 < ms <= wall or type(digest) is not torch.Tensor \
                or digest.dtype != torch.int64 or tuple(digest.shape) != (rows_n,):
            raise wire.Malformed(f"{label}: a time of {ms!r} ms against the {wall:.4g} ms seen "
                                 "here, or a digest that is not one int64 per row")
        rows = sorted(rng.sample(range(rows_n), k))
        kind, got = w.ask({"op": "rows", "rows": rows}, p.call_timeout_s, label)
        if kind != "rows" or type(got) is not torch.Tensor or got.dtype != torch.float32 \
                or tuple(got.shape) != (k, *row_shape):
            raise wire.Malformed(f"{label}: rows that are not {k} float32 rows of the output")
        if not torch.equal(row_digest(got), digest[rows]):
            raise wire.Malformed(f"{label}: rows that are not those of the output it committed to")
        return judge.TimedCall(s, rows, got), float(ms), wall

    try:
        first = min(rows_n, VERIFIED_ROWS)
        # The count fills the budgets with round trips on this clock, the harness's share included:
        # a measurement spends about warmup_ms + rep_ms whatever the kernel does with its time.
        trip = statistics.median(call(first, "an estimating call")[2] for _ in range(rng.randint(3, 5)))
        warm, n = timing.count(trip, p.warmup_ms, p.rep_ms, device, rng)
        if n * trip > 2 * p.rep_ms:
            m.notes.append(f"timed on {n} calls of about {trip:.3g} ms, more than rep_ms="
                           f"{p.rep_ms:g} allows: a slow call is timed on few calls")
        for _ in range(warm):
            call(first, "a warm-up call")
        k = min(rows_n, max(VERIFIED_ROWS, math.ceil(10 * rows_n / n)))
        calls, samples, gaps = [], [], []
        cpu0, wall0, m.timed_from = w.cpu_s(), time.monotonic(), time.time()
        for i in range(n):
            tc, ms, wall = call(k, f"timed call {i + 1}")
            calls.append(tc)
            samples.append(ms if gpu else max(ms, wall - overhead))   # a CPU: never under its round trip
            gaps.append(wall - ms)
        m.timed_to = time.time()
        cpu, spent = w.cpu_s() - cpu0, time.monotonic() - wall0
    except wire.Malformed as e:
        raise _Refused(f"{MALFORMED} ({e})") from None
    if not gpu and cpu > 1.1 * spent + 0.05:
        raise _Refused(f"{HIDDEN_WORK}: its process used {cpu:.3g} s of CPU in {spent:.3g} s of "
                       "timed calls, more than one core; a kernel gets one core on a CPU (undo "
                       "torch.set_num_threads or a thread of your own)")
    gap = statistics.median(gaps) - overhead
    if gpu and gap > GPU_GAP[0] + GPU_GAP[1] * statistics.median(samples):
        raise _Refused(f"{HIDDEN_WORK}: each timed call took {gap:.3g} ms longer here than the events "
                       f"it reported, beyond the harness's own cost ({overhead:.3g} ms); events are read in the "
                       "kernel's process, so this clock bounds them: do no work outside the call")
    m.timing = timing.summarize(samples, "cuda-events" if gpu else "cpu-wall")
    tier, rel, verdict = judge.judge_timed(problem, p.sizes, seed, device, p.variant.precision,
                                           m.check.eager_rel_error, calls)
    if verdict:
        raise _Refused(verdict)
    if TIERS.index(tier) > max(TIERS.index(m.check.tier), 1):   # one budget per tier, every call
        # alike (eager, the reference, is held to fp32-faithful)
        m.notes.append(f"tiered {tier} by its timed calls ({m.check.tier} on its checked calls)")
        m.check.tier, m.check.rel_error = tier, max(m.check.rel_error, rel)
    if gpu:
        _kind, peak = w.ask({"op": "peak"}, p.call_timeout_s, "a call to measure its memory")
        m.peak_mem_mb = float(peak) if isinstance(peak, (int, float)) else None
