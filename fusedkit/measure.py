"""The one measuring path: check, then time, then one record.

Everything that checks or times a kernel goes through :func:`measure`: the ladder runner
and sweeps, the notebook steps, the explorer's Run button, and a learner's own kernel (pass
a builder instead of a registered variant). So every caller gets the same checks
(:mod:`fusedkit.check`) and the same timing (:mod:`fusedkit.bench`), with these guards on
the timing itself:

- the timed model and inputs are fresh draws, never the checked ones; before every call, warm-up
  included, the input buffer is refilled with fresh random values (never a set seen before, so a
  result cached by pointer or by content is wrong, or never found), a few of its rows drawn at
  random are copied, and after the call (outside the timed region) the same rows of its output
  are compared with float64 on those copies: every call is verified, so a kernel wrong on one
  call in five, or one in fifty, is caught whenever it is wrong while timed;
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

import contextlib
import copy
import math
import random
import secrets
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import torch

from fusedkit import bench, problems
from fusedkit.check import (EPS32, SEEDS, Build, CheckResult, check_seeds, check_variant,
                            device_refusal, harness_device, one_line, plain_output_fault, short)
from fusedkit.guard import Snapshot
from fusedkit.hardware import GpuSpec, detect_gpu
from fusedkit.interrupts import checkpoint
from fusedkit.precision import error_bound
from fusedkit.problems import Problem, Sizes, Variant, fmt_sizes
from fusedkit.roofline import achieved, fused_floor

# Bound once, here, as fusedkit.bench binds its clock: the rows each timed call is verified on are
# chosen and copied with these, whatever a candidate later puts in their place.
_rand, _topk, _index_select = torch.rand, torch.topk, torch.index_select

VERIFIED_ROWS = 8
"""Rows of every timed call's output (all of them when there are fewer) compared with float64.
Each problem here maps row m of x to row m of its output alone, so a few rows are a whole check
of the call at a few rows' cost; which rows is drawn at random before each call, from the
harness's own generator, and their inputs are copied then, before the kernel runs."""
TIMED_ERROR_FACTOR = 4.0
"""A timed output is wrong when its rel. error is beyond both what its declared precision can
explain on its rows and this many times the worst checked one (a kb-pass kernel's error may lie
beyond its precision's bound, but not grow when timed)."""
HIDDEN_WORK_FACTOR, HIDDEN_WORK_MS = 2.0, 0.05
"""Device-wide wall time above this factor of what the events (or the host) saw, and by more
than this many ms per call, means work the events did not see."""
WARMUP_MS, REP_MS = 100.0, 500.0
"""Default timing budgets (and check.SEEDS builds checked): the same for every caller unless told."""

# Refusals found while timing; each reason starts with one of these.
HIDDEN_WORK = "work outside the caller's stream"
TIMED_DIFFER = "timed calls differ from checked ones"
IMPOSSIBLE = "faster than this GPU allows"


@dataclass
class Measurement:
    """One candidate measured at one size: its check, its timing, and why it was refused."""

    problem: Problem
    variant: Variant
    sizes: Sizes
    device: torch.device
    check: CheckResult
    timing: bench.Timing | None = None
    build_s: float = math.nan            # seconds the build step took (compile, weight splits)
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
                   pct_of_floor=None if math.isnan(self.pct_of_floor) else self.pct_of_floor,
                   notes="; ".join(notes))
        return row

    def summary(self) -> str:
        """One line for logs and learners."""
        name = self.variant.slug
        if not self.ok:
            return f"{name}: FAILED — {self.failure}"
        tier = self.tier or "tier not judged (interpreter)"
        if self.timing is None:
            return f"{name}: {tier}, rel. error {self.check.rel_error:.2e} (checked, not timed)"
        return (f"{name}: {tier}, {self.timing.median_ms:.4g} ms, rel. error "
                f"{self.check.rel_error:.2e}")


def harness_bytes(problem: Problem, sizes: Sizes, device: str | torch.device = "cpu") -> float:
    """Bytes :func:`measure` holds at once on ``device`` at its peak, for a candidate that needs
    no memory of its own beyond its output: what :meth:`Problem.check_runnable` compares with
    the memory a run may use.

    Counted from the code of :func:`fusedkit.check.check_build` and :func:`_time`, in fp32
    copies of the inputs (X bytes), the parameters (W) and the output (Y):

    - the model and the harness's hidden deep copy of it: 2 W;
    - the inputs: two draws and their pristine copies while checking: 4 X (the timing refills
      one buffer);
    - the two checked outputs: 2 Y (4 Y on a GPU, with the copies taken on the caller's stream);
    - then the larger of two moments. Computing the second float64 reference beside the first
      (2 Y): the reference's own peak, the larger of its float64 model beside the fp32 copy it
      converts (3 W) and eager's peak in float64 (``problem.memory_counter(sizes, 8)``, which
      holds the float64 x and W). Or comparing: the two float64 references (4 Y), the two eager
      outputs (2 Y) and the float64 temporaries of one error (4 Y).

    The timing holds less (the model and its float64 copy, one input buffer, one output, and a
    few rows' float64 references), and the nearby odd shape is smaller. What a candidate allocates beyond its output (weight splits, a
    compiled graph's buffers) is not counted; eager's own intermediates are, in the reference.
    """
    sizes = problem.sizes(sizes)
    with torch.device("meta"):   # shapes only: no memory
        model = problem.model_factory(**sizes, **problem.constants)
    w = 4 * sum(t.numel() for t in (*model.parameters(), *model.buffers()))
    x = 4 * sum(math.prod(shape) for shape in problem.input_shapes(sizes))
    y = 4 * math.prod(problem.output_shape(sizes))
    outputs = (4 if torch.device(device).type == "cuda" else 2) * y
    reference = max(3 * w, problem.memory_counter(sizes, 8))
    return float(2 * w + 4 * x + outputs + max(2 * y + reference, 4 * y + 2 * y + 4 * y))


def interpreter_seconds(problem: Problem, v: Variant, sizes: Sizes, *, seeds: int = SEEDS,
                        time_it: bool = True) -> float:
    """Predicted seconds :func:`measure` spends on a registered Triton variant in the CPU
    interpreter (:func:`fusedkit.interpreter_cost.run_seconds`): the figure a refusal of the
    same measurement compares with the interpreter's budget."""
    from fusedkit import interpreter_cost  # noqa: PLC0415 - imports the Triton steps

    return interpreter_cost.run_seconds(problem, v, sizes, seeds=seeds, time_it=time_it)


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


@contextlib.contextmanager
def harness_stream(device: torch.device) -> Iterator[None]:
    """Make a stream of the harness's own current on a GPU (nothing on a CPU): a kernel that
    launches on the default stream instead of the current one is then seen to do so."""
    if device.type != "cuda":
        yield
        return
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        yield
    torch.cuda.current_stream(device).wait_stream(stream)


def measure(problem: Problem | str, what: Variant | str | Build, sizes: Sizes | None = None, *,
            device: str | torch.device | None = None, seeds: int = SEEDS,
            warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS, gpu: GpuSpec | None = None,
            time_it: bool = True, name: str = "", precision: str = "fp32",
            triton: bool = False) -> Measurement:
    """Check ``what`` (a variant, its name, or a builder) of ``problem`` (a Problem or its name,
    e.g. "p12") at ``sizes`` on ``device``, then, if the check found no fault, time it.
    Returns the :class:`Measurement`; never records.

    ``seeds`` builds are checked (1 to :data:`~fusedkit.check.MAX_SEEDS`); ``warmup_ms`` and
    ``rep_ms`` are the timing budgets in ms. ``gpu`` is the spec the % of floor is computed on
    (default: the detected GPU's datasheet; the ladder passes measured ceilings). The refusal of
    impossible speed always uses the datasheet. Every argument is checked before anything runs:
    a bad one is a ValueError or TypeError naming it, never a failure of the kernel. Raises
    ValueError too when the variant cannot run here at all (a GPU-only variant on a CPU, sizes
    over the interpreter's budget): ask :func:`fusedkit.check.device_refusal` first.
    """
    if isinstance(problem, str):
        problem = problems.get(problem)
    elif not isinstance(problem, Problem):
        raise TypeError(f"problem={problem!r} is not a problem; allowed: a Problem or one of "
                        f"{', '.join(problems.names())}")
    check_seeds(seeds)
    bench.check_budgets(warmup_ms, rep_ms)
    v = candidate(problem, what, name=name, precision=precision, triton=triton)
    sizes = problem.sizes(sizes if sizes is not None else problem.defaults)
    device = harness_device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    refusal = device_refusal(problem, v, sizes, device, seeds=seeds, time_it=time_it)
    if refusal:
        raise ValueError(f"variant={v.slug!r} on {device}: {refusal}")
    datasheet = detect_gpu().spec
    m = Measurement(problem, v, sizes, device, check=CheckResult(problem.key, v.slug, sizes, []),
                    gpu=gpu or datasheet, interpreter=v.triton and device.type == "cpu")
    if m.interpreter:
        m.notes.append("measured in Triton's CPU interpreter, which computes every dot in fp32 "
                       "(tf32 and fp16 ignored): the tier judges the logic, not the precision")
    with harness_stream(device):
        m.check = check_variant(problem, v, sizes, device=device, seeds=seeds)
        if not m.check.ok or not time_it:
            return m
        seed = m.check.seeds[0] + 7919      # never a checked draw
        m.floor_ms = fused_floor(problem, sizes, m.gpu, v.precision).floor_ms
        try:
            _time(m, seed, warmup_ms, rep_ms)
        except Exception as e:  # noqa: BLE001 - a kernel that breaks while timed is a finding
            m.refused = f"raised an error while timed: {one_line(e)}"
            m.timing = None
            return m
    if m.timing and m.timing.timer == "cuda-events" and not m.refused:
        floor = fused_floor(problem, sizes, datasheet, v.precision).floor_ms
        if m.timing.median_ms < floor:
            m.refused = (f"{IMPOSSIBLE}: {m.timing.median_ms:.4g} ms is below the {v.precision} floor "
                         f"of {floor:.4g} ms on {datasheet.name}'s datasheet; it cannot be doing "
                         f"the work at {v.precision} (declare the precision it really uses)")
    return m


def _time(m: Measurement, seed: int, warmup_ms: float, rep_ms: float) -> None:
    """Time ``m``'s variant on fresh weights, with fresh random inputs before every call, and
    verify :data:`VERIFIED_ROWS` random rows of every call's output; on a GPU, cross-check the
    events with device-wide wall time. Fills ``m``."""
    problem, sizes, device = m.problem, m.sizes, m.device
    # Every random choice is made from generators drawn here, before the candidate is built.
    rng = random.Random(secrets.randbits(64))
    cuda = device.type == "cuda"
    values = (torch.Generator(device).manual_seed(rng.getrandbits(63)) if cuda
              else np.random.default_rng(rng.getrandbits(64)))
    picks = torch.Generator(device).manual_seed(rng.getrandbits(63))
    model = problem.make_model(sizes, seed=seed, device=device)
    hidden64 = copy.deepcopy(model).double()          # the candidate never sees this model
    inputs = problem.get_inputs(sizes, seed=seed, device=device)
    expect = tuple(problem.output_shape(sizes))
    rows = inputs[0].shape[0]
    floor = TIMED_ERROR_FACTOR * max(m.check.rel_error, m.check.eager_rel_error, 2 * EPS32)
    snapshot = Snapshot(problem, model)   # before the build: what torch and fusedkit hold
    try:
        _time_build(m, snapshot, model, hidden64, inputs, expect, rows, floor, rng, values, picks,
                    warmup_ms, rep_ms)
    finally:
        snapshot.restore()


def _time_build(m: Measurement, snapshot: Snapshot, model: torch.nn.Module,
                hidden64: torch.nn.Module, inputs: list[torch.Tensor], expect: tuple[int, ...],
                rows: int, floor: float, rng: random.Random, values: object,
                picks: torch.Generator, warmup_ms: float, rep_ms: float) -> None:
    """:func:`_time` once its model, inputs, generators and snapshot exist."""
    problem, device = m.problem, m.device
    t0 = time.perf_counter()
    try:
        fn = m.variant.build(model)
    except Exception:
        m.refused = snapshot.fault("during the timing's build")
        if m.refused:   # what it broke, not how it broke: the patch is the finding
            return
        raise
    finally:
        m.build_s = time.perf_counter() - t0
    m.refused = snapshot.fault("during the timing's build")
    if m.refused:
        return
    picked: list = [None]          # the rows the next call is verified on, and their inputs
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []   # per call: (rel. error, allowed)
    faults: list[str] = []

    def prepare(i: int) -> None:
        problem.refill_inputs(inputs, values)
        # The rows of the largest of ``rows`` uniform draws: a random subset, drawn on the device
        # (no copy from the host, so nothing waits for the calls before).
        idx = _topk(_rand(rows, generator=picks, device=device), min(rows, VERIFIED_ROWS)).indices
        picked[0] = (idx, [_index_select(t, 0, idx) for t in inputs])

    @torch.no_grad()
    def call() -> torch.Tensor:
        return fn(*inputs)

    def after(i: int, out: object) -> None:
        # Queued behind the call's end event and read only after the loop: no synchronize here.
        idx, kept = picked[0]
        patched = snapshot.fault(f"during timed call {i + 1}")   # before anything is verified
        if patched:
            faults.append(patched)
        fault = plain_output_fault(out, expect, device)
        if fault:
            faults.append(f"call {i + 1}: {fault}")
            return
        got = _index_select(out.detach(), 0, idx).double()
        ref, bound = error_bound(hidden64, kept, m.variant.precision, problem.error_model,
                                 float64=True)
        norm = torch.linalg.vector_norm(ref)
        rel = torch.linalg.vector_norm(got - ref) / torch.where(norm > 0, norm, 1.0)
        seen.append((torch.where(torch.isfinite(got).all(), rel, math.inf), bound.clamp(min=floor)))

    try:
        timed = bench.time_calls(call, prepare=prepare, after=after, warmup_ms=warmup_ms,
                                 rep_ms=rep_ms, device=device, rng=rng)
    except Exception:
        m.refused = snapshot.fault("while timed")
        if m.refused:   # what it broke, not how it broke: the patch is the finding
            return
        raise
    m.timing = timed.timing
    checkpoint()
    patched = [f for f in faults if f.startswith("patched ")]
    if patched:
        m.refused = patched[0]
        return
    if faults:
        m.refused = f"{TIMED_DIFFER}: {faults[0]}; a kernel must return the same kind of output when timed"
        return
    rel, allowed = (torch.stack(t).cpu() for t in zip(*seen))
    wrong = (~(rel <= allowed)).nonzero().flatten().tolist()
    if wrong:
        i = wrong[0]
        m.refused = (f"{TIMED_DIFFER}: {len(wrong)} of {len(seen)} calls made while timed gave outputs "
                     f"beyond what {m.variant.precision} explains and {TIMED_ERROR_FACTOR:g}x the "
                     f"checked calls' error (call {i + 1}: rel. error {short(rel[i].item())} on "
                     f"{min(rows, VERIFIED_ROWS)} random rows of its own fresh input, allowed "
                     f"{short(allowed[i].item())}); a kernel must not change what it computes when "
                     "it is timed")
        return
    if device.type == "cuda":
        prepare(0)
        wall, host = bench.device_busy_ms(call, device, per_call_ms=m.timing.median_ms)
        saw = max(m.timing.median_ms, host)
        if wall > HIDDEN_WORK_FACTOR * saw and wall - saw > HIDDEN_WORK_MS:
            m.refused = (f"{HIDDEN_WORK}: events on the caller's stream saw {m.timing.median_ms:.4g} ms "
                         f"per call but the GPU was busy {wall:.4g} ms per call; join any side stream "
                         "to the caller's current stream")
            return
        m.peak_mem_mb = bench.peak_memory_mb(call, device)
