"""Correctness before speed: every variant against a float64 reference, on fresh inputs,
checked so that a careless or cheating kernel cannot pass.

Error is ``rel = ||out - ref64|| / ||ref64||`` (Frobenius norms). Precision tiers
(:data:`fusedkit.precision.TIERS`):

- ``fp32-faithful``: rel no worse than 2x eager fp32's on the same inputs (with a floor of
  2 * 2**-24, so an exact eager result does not demand the impossible), AND
  ``allclose(out, eager, atol=1e-4, rtol=1e-4)`` on every input;
- ``kb-pass``: the allclose alone (KernelBench's fp32 rule);
- ``fast``: neither, but within what the variant's declared arithmetic can explain
  (:func:`fusedkit.precision.error_bound`: the problem's error model, fed each precision's
  rounding, on the very inputs and weights of the call, with a margin); the error is reported
  next to the speed.

An error that is neither within KernelBench's allclose nor within that bound is no tier at all:
the check fails (*wrong result*).

How one build is checked (:func:`check_build`), and the class of fault each step catches:

1. The candidate is built and called in a worker process of its own (:mod:`fusedkit.isolation`):
   its crash, or a call that never returns, is the verdict (*the kernel crashed*, *the kernel
   hung*), never the caller's end. There it gets a model and two independent inputs drawn
   under a seed; the worker keeps a deep copy of the model and of the inputs, and a snapshot
   of the library functions (:mod:`fusedkit.guard`): one the build or a call replaced is named,
   put back, and fails the check (*patched*). Only the outputs come back. The references are
   computed in the caller's process, which never runs the candidate, from the model and the
   inputs regenerated from the same seed.
2. Each call's output region is poisoned first (CUDA: the allocator's next block is filled
   with NaN), so an element it forgets to write reads NaN (*unwritten output*).
3. Right after each call the output is copied on the caller's current stream; after a
   device-wide synchronize it must not have changed (*work outside the caller's stream*).
4. The output must be a plain ``torch.Tensor`` of the right shape, dtype and device
   (*not a plain output tensor*), sharing no memory with an input, a parameter or the
   previous call's output (*output aliasing*).
5. Inputs and parameters must be bit for bit what they were (*input or weight mutation*).
6. Each output must pass KernelBench's allclose or have an error within what the declared
   precision can explain on its inputs (*wrong result*); one that does neither, but is another
   input's right answer, is a cached answer (*result reuse*).
7. After the requested sizes, one more build at a nearby odd shape, every dimension changed
   (:func:`nearby_odd`), must not be grossly wrong (*shape specialisation*).

Each failure is one line that starts with its class, so a learner sees what was detected.
"""

from __future__ import annotations

import copy
import math
import numbers
import re
import secrets
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from fusedkit import isolation
from fusedkit.guard import PATCHED, Snapshot
from fusedkit.interrupts import checkpoint
from fusedkit.isolation import (BUILD_TIMEOUT_S, CALL_TIMEOUT_S, CRASHED, HUNG, LEFT_RUNNING, MALFORMED, is_device_fault,
                                one_line, pack, unpack)
from fusedkit.precision import EPS32, TIERS, error_bound
from fusedkit.problems import Problem, Sizes, Variant, fmt_sizes
from fusedkit.problems.base import nearby_odd
from fusedkit.problems.baselines import tf32_matmul

ATOL = RTOL = 1e-4
SECOND_INPUT = 1_000_000_007
"""Offset of the second input's seed: independent of the first, never another seed's first."""
SPECIALISED_FACTOR = 10.0
"""At the nearby odd shape an error this many times the requested sizes' (or eager's) fails."""

# The classes of fault, as the first words of each failure line ("<class>: ..."; "patched <names>
# <when>: ..." for PATCHED, fusedkit.guard's).
RAISED = "raised an error"
NOT_PLAIN = "not a plain output tensor"
UNWRITTEN = "unwritten output"
STREAM = "work outside the caller's stream"
ALIASING = "output aliasing"
MUTATION = "input or weight mutation"
WRONG = "wrong result"
REUSE = "result reuse"
SPECIALISED = "shape specialisation"
FAULT_CLASSES = (CRASHED, HUNG, MALFORMED, LEFT_RUNNING, RAISED, PATCHED, NOT_PLAIN, UNWRITTEN,
                 STREAM, ALIASING, MUTATION, WRONG, REUSE, SPECIALISED)

Build = Callable[[torch.nn.Module], Callable[..., torch.Tensor]]

SEEDS = 3
"""Builds checked unless a caller says otherwise: each on two inputs, plus the nearby odd shape."""
MAX_SEEDS = 1000
"""The most builds one check makes (each a build and two calls): a typo such as 1000000000
must be refused, not drawn."""
CALLS_PER_BUILD = 2
"""Calls of each build, on independent inputs: two, so a cached answer is seen."""


def evaluations(seeds: int) -> int:
    """Model evaluations one check of ``seeds`` builds makes: per build and at the nearby odd
    shape, :data:`CALLS_PER_BUILD` calls, each beside its float64 reference and eager's output."""
    return CALLS_PER_BUILD * 3 * (seeds + 1)


def check_seeds(seeds: object) -> None:
    """Refuse a seed count that is not an integer from 1 to :data:`MAX_SEEDS`, or a list of
    explicit seeds that is empty, longer, or not all integers (ValueError or TypeError naming
    ``seeds``, its value and what is allowed)."""
    allowed = f"an integer from 1 to {MAX_SEEDS}, or a list of 1 to {MAX_SEEDS} integer seeds"
    if isinstance(seeds, (bool, str, bytes)):
        raise TypeError(f"seeds={seeds!r} is not a count or a list of seeds; allowed: {allowed}")
    if isinstance(seeds, numbers.Integral):
        if not 1 <= seeds <= MAX_SEEDS:
            raise ValueError(f"seeds={seeds} is out of range; allowed: {allowed}")
        return
    if not isinstance(seeds, Sequence) or not all(
            isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in seeds):
        raise TypeError(f"seeds={seeds!r} is not a count or a list of seeds; allowed: {allowed}")
    if not 1 <= len(seeds) <= MAX_SEEDS:
        raise ValueError(f"seeds has {len(seeds)} seeds; allowed: {allowed}")


def check_call_timeout(call_timeout_s: object, build_timeout_s: object = BUILD_TIMEOUT_S) -> None:
    """Refuse time limits that are not finite numbers of seconds above 0, and a bad variable of
    the environment that sets a default (one line naming it)."""
    isolation.check_environment()
    isolation.check_seconds("call_timeout_s", call_timeout_s)
    isolation.check_seconds("build_timeout_s", build_timeout_s)


def harness_device(device: object) -> torch.device:
    """``device`` as a torch.device the harness can run on ("cpu", or "cuda[:N]" with that GPU
    visible), or one ValueError naming it and what is allowed here."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    allowed = "'cpu'" + (f" or 'cuda' (cuda:0 to cuda:{gpus - 1})" if gpus else "")
    try:
        dev = torch.device(device)  # type: ignore[arg-type]
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is not a device; allowed: {allowed}") from None
    if dev.type == "cpu" or (dev.type == "cuda" and (dev.index or 0) < gpus):
        return dev
    why = ("no CUDA GPU is visible here" if dev.type == "cuda" and not gpus else
           "that GPU is not visible here" if dev.type == "cuda" else "the harness runs on CPUs and CUDA GPUs")
    raise ValueError(f"device={device!r}: {why}; allowed: {allowed}")


@dataclass
class CheckResult:
    """Outcome of checking one variant over several builds (worst input reported)."""

    problem: str
    variant: str
    sizes: Sizes
    seeds: list[int]
    rel_error: float = math.nan          # worst over every checked input at ``sizes``
    max_abs_error: float = math.nan
    eager_rel_error: float = math.nan    # eager fp32 on the same inputs (worst)
    allclose: bool = False               # vs eager fp32, every input
    tier: str = ""
    precision: str = "fp32"              # the arithmetic the variant declares
    error_bound: float = math.nan        # the least rel. error it could explain on a checked input
    failures: list[str] = field(default_factory=list)   # "<class>: what was seen"
    odd_sizes: Sizes | None = None       # the nearby odd shape also checked
    calls: int = 0                       # candidate calls made
    build_s: float = math.nan            # the first build and its first call, on the caller's
                                         # clock: a compile, an extension load, a weight split

    @property
    def ok(self) -> bool:
        """True when no fault was detected (any tier)."""
        return not self.failures

    @property
    def fault_classes(self) -> list[str]:
        """The classes of the faults found, in :data:`FAULT_CLASSES` order."""
        return [c for c in FAULT_CLASSES
                if any(f.startswith(c + ":") or f.startswith(c + " ") for f in self.failures)]

    def summary(self) -> str:
        if not self.ok:
            return f"{self.variant}: FAILED — " + "; ".join(self.failures)
        odd = f", also right at {fmt_sizes(self.odd_sizes)}" if self.odd_sizes else ""
        return (f"{self.variant}: {self.tier}, rel. error {self.rel_error:.2e} "
                f"(eager fp32 {self.eager_rel_error:.2e}), max abs {self.max_abs_error:.2e}, "
                f"allclose 1e-4 {'yes' if self.allclose else 'no'} on {self.calls} calls "
                f"({len(self.seeds)} builds){odd}")


@dataclass
class _Compared:
    """One output against its own reference (and against the other input's, for reuse)."""

    rel: float
    max_abs: float
    eager_rel: float
    allclose: bool
    bound: float          # the largest rel. error the declared precision explains on this input


def short(v: float) -> str:
    """A rel. error for a failure line: ``0.57``, ``1.6``, ``3.1e-4``."""
    text = f"{v:.2g}" if 0.01 <= abs(v) < 100 else f"{v:.1e}"
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", text)


def approx(v: float) -> str:
    """A bound, to one significant figure: ``2e-3``, ``0.4``."""
    text = f"{v:.1g}" if 0.01 <= abs(v) < 100 else f"{v:.0e}"
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", text)


def wrong_line(rel: float, bound: float, precision: str, where: str = "here") -> str:
    """The *wrong result* failure: an error the declared arithmetic cannot explain."""
    return (f"{WRONG}: rel. error {short(rel)}, more than {precision} arithmetic can explain "
            f"(at most ~{approx(bound)} {where})")


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| computed in float64."""
    ref = ref.double()
    denom = torch.linalg.vector_norm(ref).item()
    diff = torch.linalg.vector_norm(out.double() - ref).item()
    return diff / denom if denom else diff


def classify(rel: float, eager_rel: float, allclose_all: bool) -> str:
    """The precision tier of a variant from its worst errors (see module docstring)."""
    if not math.isfinite(rel):
        return "fast"
    if allclose_all and rel <= 2.0 * max(eager_rel, 2.0 * EPS32):
        return "fp32-faithful"
    return "kb-pass" if allclose_all else "fast"


def tier_bound(tier: str, eager_rel: float) -> float:
    """The largest rel. error ``tier`` allows beside eager's ``eager_rel`` (inf for ``kb-pass``
    and ``fast``, whose limits are per element, or the declared precision's
    :func:`fusedkit.precision.error_bound`)."""
    if tier in ("reference", "fp32-faithful"):
        return 2.0 * max(eager_rel, 2.0 * EPS32)
    return math.inf


def poison_allocator(shape: Sequence[int], device: torch.device) -> None:
    """Leave a NaN-filled block of ``shape`` in the caching allocator for the next output.

    On CUDA the caching allocator hands the freed block to the next allocation of that
    size, so unwritten output elements read back as NaN. CPU memory is returned to the
    system, so there the check relies on the NaN/Inf and error tests alone.
    """
    if device.type == "cuda":
        block = torch.full(tuple(shape), float("nan"), device=device)
        del block


def reference64(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The model's output computed in float64 on the inputs' device."""
    with torch.no_grad():
        return copy.deepcopy(model).double()(*[t.double() for t in inputs])


def reference_and_bound(problem: Problem, model: torch.nn.Module, inputs: Sequence[torch.Tensor],
                        precision: str) -> tuple[torch.Tensor, float]:
    """The float64 reference of ``inputs`` and the largest rel. error ``precision`` arithmetic
    can explain on them (:func:`fusedkit.precision.error_bound` with the problem's error model)."""
    ref, bound = error_bound(model, inputs, precision, problem.error_model)
    return ref, float(bound)


def eager32(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The model's output in fp32 with TF32 off: KernelBench's reference."""
    with torch.no_grad(), tf32_matmul(False):
        return model(*inputs)


def needs_hopper(variant: Variant) -> bool:
    """True for a step declared ``arch="sm_90a"`` (wgmma, TMA, setmaxnreg: it includes
    ``common/hopper.cuh``), which runs on sm_90 only. Read from the registry, not the source."""
    return variant.hopper


def device_refusal(problem: Problem, variant: Variant, sizes: Sizes, device: torch.device, *,
                   seeds: int = SEEDS, time_it: bool = True) -> str:
    """Why ``variant`` cannot run at ``sizes`` on ``device`` ("" when it can), in one line: a GPU
    step on a CPU, a Hopper (sm_90a) step on any other GPU (:meth:`Variant.refusal`), a Triton
    step whose whole measurement (``seeds`` builds checked, and timed with ``time_it``) is over
    the interpreter's budget on a CPU."""
    refusal = variant.refusal(device)
    if refusal or device.type == "cuda":
        return refusal
    if variant.triton and variant.slug in problem.variants:
        # Predicted from the padded tiles the kernels really compute, not from useful FLOPs.
        from fusedkit import interpreter_cost  # noqa: PLC0415 - imports the Triton steps

        return interpreter_cost.refusal(problem, variant, sizes, seeds=seeds, time_it=time_it)
    return ""


# -- the pieces of one build's check ------------------------------------------------------

def plain_output_fault(out: object, shape: tuple[int, ...], device: torch.device) -> str:
    """What is wrong with a returned object as the problem's output ("" when it is right)."""
    if type(out) is not torch.Tensor:   # a subclass can override comparisons or compute lazily
        return f"returned a {type(out).__module__}.{type(out).__qualname__}; expected a plain torch.Tensor"
    if out.device.type != device.type or (device.type == "cuda" and out.device.index != (
            device.index if device.index is not None else torch.cuda.current_device())):
        return f"output is on {out.device}, expected {device}: the device measured"
    if tuple(out.shape) != shape or out.dtype != torch.float32:
        return f"output is {tuple(out.shape)} {out.dtype}, expected {shape} torch.float32"
    return ""


def _span(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when the storages of ``a`` and ``b`` overlap (views of one buffer included)."""
    if a.device != b.device:
        return False
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN payloads and signed zeros included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _read_on_caller_stream(out: torch.Tensor) -> torch.Tensor:
    """A copy of ``out`` made on the caller's current stream, before any device-wide sync."""
    return out.detach().clone() if out.is_cuda else out


def _input_name(k: int) -> str:
    return "x" if k == 0 else f"input #{k}"


def check_build(problem: Problem, build: Build, sizes: Sizes, seed: int,
                device: torch.device, precision: str = "fp32", *,
                call_timeout_s: float = CALL_TIMEOUT_S, build_timeout_s: float = BUILD_TIMEOUT_S,
                timeline: list | None = None) -> tuple[list[str], list[_Compared]]:
    """Build once under ``seed``, call on two independent inputs, and check both calls, the
    errors against what ``precision`` arithmetic can explain.

    The candidate is built and called in a worker process (:mod:`fusedkit.isolation`,
    :func:`candidate_calls`); the references and the comparison are computed here, from the
    model and inputs regenerated from ``seed`` (:func:`judge_calls`). A crash of the worker, or
    a call that does not return within ``call_timeout_s``, is the failure.

    Returns the failures (each "<class>: ...") and the outputs compared with their references:
    both when there is no failure, those compared so far after a *wrong result*, else none.
    ``timeline`` collects the worker's stages on this process's clock (:func:`isolation.run`).
    """
    try:
        failures, outs = isolation.run(candidate_calls, problem, build, device,
                                       call_timeout_s=call_timeout_s, timeline=timeline,
                                       calls=CALLS_PER_BUILD, build_timeout_s=build_timeout_s,
                                       sizes=dict(sizes), seed=seed)
    except isolation.WorkerDied as e:
        return [e.line], []
    expect = tuple(problem.output_shape(sizes))
    if not (isinstance(failures, list) and all(isinstance(f, str) for f in failures)
            and isinstance(outs, list) and len(outs) == (0 if failures else CALLS_PER_BUILD)
            and all(type(o) is torch.Tensor and tuple(o.shape) == expect
                    and o.dtype == torch.float32 for o in outs)):
        isolation.retire(device)
        return [f"{MALFORMED} (failures and outputs that are not {CALLS_PER_BUILD} float32 "
                f"tensors of shape {expect})"], []
    if failures:
        if failures[0].startswith(PATCHED + " "):   # put back there, but start afresh
            isolation.retire(device)
        return [f[:2000] for f in failures], []
    outs = [unpack(o, device) for o in outs]   # read as raw bytes (fusedkit.wire), checked above
    return judge_calls(problem, sizes, seed, device, precision, outs)


def candidate_calls(*, build: Build, report: Callable[[str], None], progress: object,
                    ask: Callable[[object], object], problem_key: str, sizes: Sizes, seed: int,
                    device: str) -> tuple[list[str], list[torch.Tensor]]:
    """The candidate's side of one build's check, run in its worker process: build the model
    and two inputs under ``seed``, build the candidate and call it on both, and the checks that
    need the candidate's own objects (a patched library function, a plain output, aliasing,
    work outside the stream, mutated inputs or weights). Returns the failures and the two
    outputs (packed for the pipe); the verdict on their values is :func:`judge_calls`'.
    Library functions the candidate replaced are put back before it returns."""
    from fusedkit import problems  # noqa: PLC0415 - the registry imports check

    problem, device = problems.get(problem_key), torch.device(device)
    sizes = problem.sizes(sizes)
    model = problem.make_model(sizes, seed=seed, device=device)
    hidden = copy.deepcopy(model)      # the candidate never sees this model
    draws = [problem.get_inputs(sizes, seed=seed + k * SECOND_INPUT, device=device)
             for k in range(CALLS_PER_BUILD)]
    originals = [[t.clone() for t in d] for d in draws]
    snapshot = Snapshot(problem, model)   # before the build: what torch and fusedkit hold
    try:
        failures, outs = _candidate_calls(problem, build, model, hidden, draws, originals, sizes,
                                          device, snapshot, report)
        return failures, [pack(o) for o in outs]
    finally:
        snapshot.restore()


def _candidate_calls(problem: Problem, build: Build, model: torch.nn.Module, hidden: torch.nn.Module,
                     draws: list, originals: list, sizes: Sizes, device: torch.device,
                     snapshot: Snapshot, report: Callable[[str], None]
                     ) -> tuple[list[str], list[torch.Tensor]]:
    """:func:`candidate_calls` once its model, inputs and snapshot exist."""
    expect = tuple(problem.output_shape(sizes))
    report("the build")   # from here to call 2: the build and its first call (a compile)
    try:
        fn = build(model)
    except Exception as e:  # noqa: BLE001 - a learner's build may fail in any way
        if is_device_fault(e):
            raise   # the worker reports the crash and ends
        return [snapshot.fault("during the build") or f"{RAISED}: building it raised {one_line(e)}"], []
    patched = snapshot.fault("during the build")
    if patched:
        return [patched], []
    outs: list[tuple[torch.Tensor, torch.Tensor]] = []
    for k, inputs in enumerate(draws):
        report(f"call {k + 1} at {fmt_sizes(sizes)}")
        poison_allocator(expect, device)
        try:
            with torch.no_grad():
                out = fn(*inputs)
        except Exception as e:  # noqa: BLE001
            if is_device_fault(e):
                raise
            return [snapshot.fault(f"during call {k + 1} at {fmt_sizes(sizes)}")
                    or f"{RAISED}: call {k + 1} at {fmt_sizes(sizes)} raised {one_line(e)}"], []
        patched = snapshot.fault(f"during call {k + 1} at {fmt_sizes(sizes)}")
        if patched:
            return [patched], []
        fault = plain_output_fault(out, expect, device)
        if fault:
            return [f"{NOT_PLAIN}: {fault}"], []
        outs.append((out, _read_on_caller_stream(out)))
    if device.type == "cuda":
        torch.cuda.synchronize(device)

    failures = []
    named = {f"input {_input_name(i)} of call {k + 1}": t
             for k, d in enumerate(draws) for i, t in enumerate(d)}
    named.update({f"parameter {n}": p for n, p in model.named_parameters()})
    named.update({f"buffer {n}": b for n, b in model.named_buffers()})
    for k, (out, _) in enumerate(outs):
        hits = [name for name, t in named.items() if shares_memory(out, t)]
        if k and shares_memory(out, outs[0][0]):
            hits.append("the previous call's output")
        if hits:
            failures.append(f"{ALIASING}: call {k + 1}'s output shares memory with {hits[0]}; "
                            "return a new tensor")
    if failures:   # a shared buffer is rewritten by the next call: report that, not a race
        return failures, []
    for k, (out, early) in enumerate(outs):
        if not same_bits(out, early):
            failures.append(f"{STREAM}: call {k + 1}'s output was still changing after the call "
                            "returned; join any side stream to the caller's current stream")
    before = dict(hidden.named_parameters()) | dict(hidden.named_buffers())
    after = dict(model.named_parameters()) | dict(model.named_buffers())
    for name, t in before.items():
        if not same_bits(t, after[name]):
            failures.append(f"{MUTATION}: the call changed {name}; a kernel must not write its weights")
    for k, (d, o) in enumerate(zip(draws, originals)):
        for i, (t, t0) in enumerate(zip(d, o)):
            if not same_bits(t, t0):
                failures.append(f"{MUTATION}: call {k + 1} changed its input {_input_name(i)}; "
                                "a kernel must not write its inputs")
    if failures:
        return failures, []

    return [], [out for out, _ in outs]


def judge_calls(problem: Problem, sizes: Sizes, seed: int, device: torch.device, precision: str,
                outs: list[torch.Tensor]) -> tuple[list[str], list[_Compared]]:
    """The verdict on one build's two outputs, reached where the candidate never ran: the model
    and the inputs regenerated from ``seed`` (bit for bit what the worker drew), their float64
    references, eager fp32, and the comparison (see :func:`check_build`)."""
    hidden = problem.make_model(sizes, seed=seed, device=device)
    originals = [problem.get_inputs(sizes, seed=seed + k * SECOND_INPUT, device=device)
                 for k in range(CALLS_PER_BUILD)]
    # References only now, from copies the candidate never held.
    checkpoint()
    refs, bounds = zip(*[reference_and_bound(problem, hidden, o, precision) for o in originals])
    eagers = [eager32(hidden, o) for o in originals]
    compared = []
    for k, out in enumerate(outs):
        bad = (~torch.isfinite(out) & torch.isfinite(refs[k])).sum().item()
        if bad:
            return [f"{UNWRITTEN}: call {k + 1}: {bad} of {out.numel()} elements are NaN/Inf "
                    "(unwritten or overflowed) where the reference is finite"], []
        compared.append(_Compared(rel_error(out, refs[k]), (out.double() - refs[k]).abs().max().item(),
                                  rel_error(eagers[k], refs[k]),
                                  torch.allclose(out, eagers[k], atol=ATOL, rtol=RTOL), bounds[k]))
    # A wrong answer first; it is a reused one only when it is another input's right answer
    # (two equal outputs that are right for neither, zeros say, are just wrong).
    for k, out in enumerate(outs):
        if compared[k].allclose or compared[k].rel <= compared[k].bound:
            continue
        for j in range(len(outs)):
            if j != k and rel_error(out, refs[j]) <= bounds[j]:
                first, second = ("first", "second") if j < k else ("second", "first")
                return [f"{REUSE}: the {second} input got an answer nearer the {first} input's "
                        "than its own; a kernel must compute from the input it is given, not a "
                        "cached result"], []
        return [wrong_line(compared[k].rel, compared[k].bound, precision)], compared[:k + 1]
    return [], compared


def check_variant(problem: Problem, variant: Variant | str, sizes: Sizes, *,
                  device: str | torch.device = "cpu", seeds: int | Sequence[int] = SEEDS,
                  build: Build | None = None, odd_shape: bool = True,
                  call_timeout_s: float = CALL_TIMEOUT_S,
                  build_timeout_s: float = BUILD_TIMEOUT_S) -> CheckResult:
    """Check ``variant`` on ``seeds`` fresh builds (weights drawn under each seed), each called
    on two independent inputs, then once more at :func:`nearby_odd` sizes.

    ``seeds`` is a count (fresh random seeds, recorded in the result) or explicit seeds.
    ``build`` overrides ``variant.build`` (to check a function that is not registered).
    ``call_timeout_s``: seconds one call may take before it counts as hung; ``build_timeout_s``
    the same for a build (which may compile).
    """
    variant = problem.variant(variant) if isinstance(variant, str) else variant
    sizes = problem.sizes(sizes)
    device = harness_device(device)
    check_seeds(seeds)
    check_call_timeout(call_timeout_s, build_timeout_s)
    count = seeds if isinstance(seeds, numbers.Integral) else len(seeds)
    refusal = device_refusal(problem, variant, sizes, device, seeds=count, time_it=False)
    if refusal:
        raise ValueError(f"variant={variant.slug!r} on {device}: {refusal}")
    problem.check_runnable(sizes, device)
    isolation.fresh(device)   # a worker that no other candidate ran in
    if isinstance(seeds, numbers.Integral):
        base = secrets.randbelow(2**30)
        seeds = [base + i for i in range(seeds)]
    build = build or variant.build
    res = CheckResult(problem.key, variant.slug, sizes, list(seeds), precision=variant.precision)
    compared: list[_Compared] = []
    for seed in seeds:
        checkpoint()
        timeline: list = []
        failures, got = check_build(problem, build, sizes, seed, device, variant.precision,
                                    call_timeout_s=call_timeout_s,
                                    build_timeout_s=build_timeout_s, timeline=timeline)
        if math.isnan(res.build_s):
            res.build_s = isolation.seconds_between(timeline, "the build", f"call {CALLS_PER_BUILD}")
        res.calls += CALLS_PER_BUILD
        compared += got
        if failures:
            res.failures = failures
            if compared:   # a wrong result: its errors are the finding
                _fill(res, compared)
            return res
    _fill(res, compared)
    if odd_shape:
        res.odd_sizes = nearby_odd(problem, sizes)
        failures, got = check_build(problem, build, res.odd_sizes, res.seeds[0] + 17, device,
                                    variant.precision, call_timeout_s=call_timeout_s,
                                    build_timeout_s=build_timeout_s)
        res.calls += CALLS_PER_BUILD
        worst = max((c.rel for c in got), default=math.nan)
        allowed = SPECIALISED_FACTOR * max([res.rel_error, *(c.eager_rel for c in got), 2 * EPS32])
        if failures and failures[0].startswith((PATCHED + " ", CRASHED, HUNG, MALFORMED,
                                                 LEFT_RUNNING)):   # not a matter of shape
            res.failures = failures
            return res
        if failures and failures[0].startswith(WRONG + ":") and worst <= allowed:
            # As wrong here as there (its error there only just within allclose): wrong, not
            # specialised to the requested sizes.
            c = max(got, key=lambda c: c.rel)
            res.failures = [wrong_line(c.rel, c.bound, variant.precision,
                                       f"at the nearby odd shape {fmt_sizes(res.odd_sizes)}")]
            _fill(res, compared + got)
            return res
        if failures or not worst <= allowed:
            seen = "; ".join(failures) if failures else f"rel. error {worst:.2e} against {res.rel_error:.2e}"
            res.failures = [f"{SPECIALISED}: right at {fmt_sizes(sizes)} but not at the nearby odd "
                            f"shape {fmt_sizes(res.odd_sizes)} ({seen})"]
            return res
    res.tier = "reference" if variant.slug == "eager" and build is variant.build else classify(
        res.rel_error, res.eager_rel_error, res.allclose)
    return res


def _fill(res: CheckResult, compared: list[_Compared]) -> None:
    """The worst errors of ``compared`` into ``res``, and the least bound."""
    res.rel_error = max(c.rel for c in compared)
    res.max_abs_error = max(c.max_abs for c in compared)
    res.eager_rel_error = max(c.eager_rel for c in compared)
    res.allclose = all(c.allclose for c in compared)
    res.error_bound = min(c.bound for c in compared)


def describe(result: CheckResult) -> str:
    """One line for logs: problem, sizes and the summary."""
    return f"[{result.problem} {fmt_sizes(result.sizes)}] {result.summary()}"


__all__ = ["ATOL", "CALLS_PER_BUILD", "EPS32", "MAX_SEEDS", "RTOL", "TIERS", "CheckResult",
           "FAULT_CLASSES", "candidate_calls", "check_build", "check_call_timeout", "check_seeds",
           "check_variant", "classify", "device_refusal", "describe", "evaluations",
           "harness_device", "judge_calls", "nearby_odd", "needs_hopper", "reference_and_bound",
           "rel_error", "tier_bound", "wrong_line"]
