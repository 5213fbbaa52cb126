"""What every problem module provides: sizes with their limits, FLOP and byte counts per
stage, the reference model, inputs, and the registry of variants (the kernel ladder).

A problem is a :class:`Problem` instance in its own module (:mod:`fusedkit.problems` finds it);
its kernel steps are the step files of ``fusedkit/kernels/<problem>/`` with their sidecars
(:func:`discover_steps`), which the module puts in order beside the baselines.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from fusedkit.build import HOPPER_ARCH, load_extension, needs_hopper
from fusedkit.kernels import StepFile, load_step, step_files
from fusedkit.mode import triton_interprets
from fusedkit.precision import PRECISIONS, ErrorModel

Sizes = dict[str, int]

# Counts of 32-bit elements above this overflow the int32 indices our CUDA kernels use.
INT32_MAX = 2**31 - 1
CPU_BYTE_BUDGET = 8 * 2**30
# What a step is compiled for: "any" device its needs_gpu allows, or Hopper's own target.
ARCHES = ("any", HOPPER_ARCH)


class SizeError(ValueError):
    """A size outside what a problem allows; the message names the parameter and range."""


@dataclass(frozen=True)
class Dim:
    """One size of a problem (a batch or feature dimension)."""

    name: str
    default: int          # KernelBench's value
    description: str
    maximum: int = 65536

    def validate(self, value: object) -> int:
        """The value as an int, or :class:`SizeError` naming this dimension and its range."""
        allowed = f"an integer from 1 to {self.maximum}"
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise SizeError(f"{self.name}={value!r} is not an integer; allowed: {allowed}")
        value = int(value)
        if not 1 <= value <= self.maximum:
            raise SizeError(f"{self.name}={value} is out of range; allowed: {allowed}")
        return value


@dataclass(frozen=True)
class Stage:
    """One stage of the unfused model as eager PyTorch runs it.

    ``flops`` counts multiply and add separately (a GEMM is 2*M*N*K); elementwise FLOP
    counts are a convention (see each problem) and are negligible beside the GEMMs.
    ``bytes_read`` / ``bytes_written`` are the fewest bytes this stage moves through
    device memory on its own: each input read once, each output written once. A GEMM stage
    names its shape in ``mnk``, so its cuBLAS rate can be measured at exactly that shape
    (:mod:`fusedkit.ceilings`).
    """

    name: str
    kind: str             # "gemm" (tensor-core capable) or "elementwise" / "reduction"
    flops: float
    bytes_read: float
    bytes_written: float
    mnk: tuple[int, int, int] | None = None   # a GEMM's (M, N, K): (M, K) times (K, N)

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written


@dataclass(frozen=True)
class Variant:
    """One step of a problem's ladder.

    ``build(model)`` does the one-off preparation (compile, weight splits) and returns
    the callable that maps the problem's inputs to its output; a kernel step's build is a
    :class:`StepCall`, data that says what it calls (:attr:`call`).
    """

    number: int
    slug: str
    title: str
    summary: str                      # one line: what changed against the previous step
    build: Callable[[nn.Module], Callable[..., torch.Tensor]]   # a StepCall for a kernel step
    precision: str = "fp32"           # the arithmetic it uses (fusedkit.precision.PRECISIONS)
    needs_gpu: bool = False
    source: str = ""                  # kernel file relative to fusedkit/kernels, "" for PyTorch
    baseline: bool = False            # PyTorch itself, not one of our kernels
    triton: bool = False              # a Triton kernel: on CPU it runs in the (slow) interpreter
    routes: tuple["Route", ...] = ()  # a choice among other steps by batch size (see by_batch)
    arch: str = "any"                 # "sm_90a": built for Hopper's own target, runs on sm_90 only

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r} is not known; valid: {', '.join(PRECISIONS)}")
        if self.arch not in ARCHES:
            raise ValueError(f"{self.slug}: arch={self.arch!r} is not known; valid: {', '.join(ARCHES)}")
        if self.arch == HOPPER_ARCH and not self.needs_gpu:
            raise ValueError(f"{self.slug}: arch={self.arch!r} needs needs_gpu=True (no CPU build)")
        if self.call is not None and (self.call.kind == "hopper") != self.hopper:
            raise ValueError(f"{self.slug}: a {self.call.kind} step declared arch={self.arch!r}; "
                             "the Hopper extension's steps, and only they, are sm_90a")

    @property
    def call(self) -> "StepCall | None":
        """What a kernel step's build calls, as data (None for a build that is a plain function)."""
        return self.build if isinstance(self.build, StepCall) else None

    @property
    def hopper(self) -> bool:
        """True for a step built for sm_90a (wgmma, TMA, setmaxnreg), which runs on sm_90 only."""
        return self.arch == HOPPER_ARCH

    def refusal(self, device: torch.device) -> str:
        """Why this step cannot run on ``device`` at any size ("" when it can), in one line: a GPU
        step on a CPU, a Hopper (sm_90a) step on any other GPU, a Triton step on a CPU in a
        process whose Triton compiles for a GPU. Read from the declaration and the mode alone."""
        if device.type == "cuda":
            if not self.hopper:
                return ""
            major, minor = torch.cuda.get_device_capability(device)
            if major == 9:
                return ""
            return (f"needs a Hopper (sm_90) GPU (wgmma and TMA, built for sm_90a); this one, "
                    f"{torch.cuda.get_device_name(device)}, is sm_{major}{minor}")
        if self.needs_gpu:
            what = "a Hopper (sm_90) GPU" if self.hopper else "a CUDA GPU"
            return f"needs {what} (its GPU results are in the records in data/)"
        if self.triton and not triton_interprets():
            return ("is a Triton kernel, which runs on a CPU only in Triton's interpreter, and this "
                    "process compiles Triton for a GPU (TRITON_INTERPRET=1 before Triton is "
                    "imported chooses the interpreter)")
        return ""


@dataclass(frozen=True)
class Route:
    """One band of batch sizes of a :func:`by_batch` step: batches of at most ``max_rows`` rows
    (``None``: every larger batch) go to the first of ``slugs`` that can run on the device."""

    max_rows: int | None
    slugs: tuple[str, ...]
    why: str = ""                     # the measurement behind the band, in a few words


@dataclass(frozen=True)
class Component:
    """A memory-bound piece of a ladder timed on its own, against a copy of the same bytes.

    ``make(sizes, device)`` returns a no-argument callable and the bytes one call must
    move (read plus written); the runner compares its rate with a device-to-device copy
    that moves as many bytes, measured in the same run.
    """

    slug: str
    title: str
    make: Callable[[Sizes, torch.device], tuple[Callable[[], object], float]]
    needs_gpu: bool = True


@dataclass
class Problem:
    """A KernelBench problem: sizes, model, inputs, counts and its ladder of variants."""

    key: str                          # "p12"
    slug: str                         # "gemm_multiply_leakyrelu"
    kernelbench_id: int
    title: str
    dims: tuple[Dim, ...]
    constants: Mapping[str, float]
    model_factory: Callable[..., nn.Module]
    stage_counter: Callable[[Sizes, int], list[Stage]]
    min_bytes_counter: Callable[[Sizes, int], float]
    output_shape: Callable[[Sizes], tuple[int, ...]]
    memory_counter: Callable[[Sizes, int], float]   # bytes eager holds at its peak
    error_model: ErrorModel                         # how rounding reaches the output (the check's bound)
    variants: dict[str, Variant] = field(default_factory=dict)
    components: dict[str, Component] = field(default_factory=dict)

    # -- sizes -----------------------------------------------------------------------
    @property
    def defaults(self) -> Sizes:
        return {d.name: d.default for d in self.dims}

    def sizes(self, overrides: Mapping[str, object] | None = None, **kw: object) -> Sizes:
        """Validated sizes: the defaults with ``overrides`` applied.

        Unknown names and bad values raise :class:`SizeError` naming the parameter.
        """
        given = dict(overrides or {}, **kw)
        names = [d.name for d in self.dims]
        for name in given:
            if name not in names:
                raise SizeError(f"{name!r} is not a size of {self.key}; valid: {', '.join(names)}")
        return {d.name: d.validate(given.get(d.name, d.default)) for d in self.dims}

    def check_runnable(self, sizes: Sizes, device: str | torch.device) -> None:
        """Refuse sizes too large to run on ``device``, with a one-line reason.

        Every tensor must fit int32 indexing, and the memory the measuring harness holds at
        once (:func:`harness_bytes`: the larger of the kernel's worker, with the
        model and its hidden copy, four copies of the inputs and the outputs, and this process
        after it, with the float64 references) must fit 90% of the free
        device memory on a GPU, :data:`CPU_BYTE_BUDGET` on a CPU; a refusal says which sizes
        would fit. (How long a run may take is the harness's estimate: :mod:`fusedkit.harness.budget`.)
        """

        sizes = self.sizes(sizes)
        device = torch.device(device)
        biggest = max(s.bytes_written for s in self.stages(sizes)) / 4
        if biggest > INT32_MAX:
            raise SizeError(f"sizes {fmt_sizes(sizes)} make a tensor of {biggest:.3g} elements; "
                            f"allowed: at most {INT32_MAX} (int32 indexing)")
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
            budget, where = 0.9 * free, "on the GPU (90% of its free memory)"
        else:
            budget, where = CPU_BYTE_BUDGET, "in a CPU run"
        need = harness_bytes(self, sizes, device)
        if need > budget:
            fits = self._largest_fitting(sizes, lambda s: harness_bytes(self, s, device) <= budget)
            digits = next(d for d in range(1, 9) if f"{need / 2**30:.{d}f}" != f"{budget / 2**30:.{d}f}")
            raise SizeError(f"sizes {fmt_sizes(sizes)} need {need / 2**30:.{digits}f} GiB while checked and "
                            f"timed; allowed: at most {budget / 2**30:.{digits}f} GiB {where}, e.g. "
                            f"{' or '.join(f'{k}<={v}' for k, v in fits.items()) or 'smaller sizes'}")

    def _largest_fitting(self, sizes: Sizes, fits: Callable[[Sizes], bool]) -> dict[str, int]:
        """For each dimension, the largest value below its own in ``sizes`` at which ``fits``
        holds with the others unchanged (a dimension at which nothing fits is left out)."""
        out = {}
        for d in self.dims:
            lo, hi = 0, sizes[d.name] - 1    # fits(lo) or lo == 0; the answer lies in [lo, hi]
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if fits({**sizes, d.name: mid}):
                    lo = mid
                else:
                    hi = mid - 1
            if lo:
                out[d.name] = lo
        return out

    # -- counts ----------------------------------------------------------------------
    def stages(self, sizes: Sizes, element_bytes: int = 4) -> list[Stage]:
        """The unfused stages with their FLOPs and bytes (``element_bytes`` per element)."""
        return self.stage_counter(self.sizes(sizes), element_bytes)

    def min_bytes(self, sizes: Sizes, element_bytes: int = 4) -> float:
        """Fewest bytes any implementation moves: inputs and weights read once, output written once."""
        return self.min_bytes_counter(self.sizes(sizes), element_bytes)

    def flops(self, sizes: Sizes) -> float:
        return sum(s.flops for s in self.stages(sizes))

    # -- model and inputs --------------------------------------------------------------
    def make_model(self, sizes: Sizes, *, seed: int = 0,
                   device: str | torch.device = "cpu") -> nn.Module:
        """The exact KernelBench model, its weights drawn by nn.Linear's own init under ``seed``
        on ``device`` itself (on a GPU by that GPU's generator: the same seed gives the same
        weights in every process there, and the host spends nothing on them; made on the host
        and copied, KernelBench's 64M weights of problem 12 cost about a second of CPU time a
        model, and one measurement makes ten)."""
        sizes = self.sizes(sizes)
        device = torch.device(device)
        gpus = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=gpus), device:
            torch.manual_seed(seed)
            model = self.model_factory(**sizes, **self.constants)
        return model.to(device).eval()

    def model_with(self, sizes: Sizes, *params: torch.Tensor,
                   device: str | torch.device = "cpu") -> nn.Module:
        """The model at ``sizes`` with its parameters set to ``params``, in the order
        ``model.parameters()`` yields them (p12: w, b; p45: w1, b1, w2, b2): a check or probe
        that draws its own weights runs the variant on exactly those."""
        model = self.make_model(sizes, device=device)
        own = list(model.parameters())
        if len(own) != len(params):
            raise ValueError(f"{self.key}'s model has {len(own)} parameters, got {len(params)}")
        with torch.no_grad():
            for p, value in zip(own, params):
                p.copy_(value)
        return model

    def input_shapes(self, sizes: Sizes) -> list[tuple[int, ...]]:
        """The shapes of :meth:`get_inputs`' tensors: x is (first dimension, second)."""
        sizes = self.sizes(sizes)
        return [(sizes[self.dims[0].name], sizes[self.dims[1].name])]

    def get_inputs(self, sizes: Sizes, *, seed: int = 0,
                   device: str | torch.device = "cpu") -> list[torch.Tensor]:
        """KernelBench's inputs (``torch.rand``, uniform in [0, 1)) drawn under ``seed`` on
        ``device`` itself, by its own generator (as :meth:`make_model`)."""
        device = torch.device(device)
        g = torch.Generator(device=device).manual_seed(seed + 1_000_003)
        return [torch.rand(*shape, generator=g, device=device) for shape in self.input_shapes(sizes)]

    def refill_inputs(self, inputs: Sequence[torch.Tensor],
                      rng: "np.random.Generator | torch.Generator") -> None:
        """Write a fresh draw of :meth:`get_inputs`' distribution into ``inputs`` (contiguous
        float32 tensors, as it returns them) in place, from ``rng``: a torch.Generator of their
        device on a GPU (Philox, on the device), a numpy Generator on a CPU (PCG64 writes 32M
        floats in 0.07 s on this workbook's 2-core machine, torch's CPU generator in 0.13)."""
        for t in inputs:
            if isinstance(rng, torch.Generator):
                t.uniform_(0.0, 1.0, generator=rng)
            else:
                rng.random(out=t.numpy(), dtype=np.float32)

    # -- variants ----------------------------------------------------------------------
    def variant(self, slug: str) -> Variant:
        """The variant called ``slug``; an unknown name lists the valid ones."""
        try:
            return self.variants[slug]
        except KeyError:
            raise ValueError(f"variant={slug!r} is not a variant of {self.key}; "
                             f"valid: {', '.join(self.variants)}") from None

    def ladder(self, names: Sequence[str] | None = None) -> list[Variant]:
        """Variants in ladder order (all, or the named ones, validated)."""
        chosen = [self.variant(n) for n in names] if names else list(self.variants.values())
        return sorted(chosen, key=lambda v: v.number)

    def add_variant(self, v: Variant) -> Variant:
        if v.slug in self.variants:
            raise ValueError(f"variant {v.slug!r} is registered twice for {self.key}")
        self.variants[v.slug] = v
        return v


def fmt_sizes(sizes: Mapping[str, int]) -> str:
    """``batch_size=1024,in_features=8192,...``: the compact form used in records."""
    return ",".join(f"{k}={v}" for k, v in sizes.items())


def parse_sizes(text: str) -> dict[str, int]:
    """Inverse of :func:`fmt_sizes`; values stay unvalidated until ``Problem.sizes``.

    A name given twice is refused: silently keeping the last would run sizes nobody asked for.
    """
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise SizeError(f"size {part!r} has no value; allowed: name=value pairs, e.g. "
                            "batch_size=1024,in_features=8192")
        if name in out:
            raise SizeError(f"{name} is given twice in sizes={text!r}; allowed: each size once")
        try:
            out[name] = int(value)
        except ValueError:
            raise SizeError(f"{name}={value!r} is not an integer; allowed: a whole number, e.g. "
                            f"{name}=1024") from None
    return out


# -- kernel steps bound to a model's weights ---------------------------------------------


@dataclass(frozen=True)
class Weights:
    """What a kernel step takes from the model after x, in this order: ``tensors``, attribute
    paths of parameters (``"gemm.weight"``: the module's own tensor, detached, so a weight cache
    keyed on it sees the same tensor each call), then ``numbers``, attribute paths of constants
    (``"multiplier"``), each passed as a Python float."""

    tensors: tuple[str, ...]
    numbers: tuple[str, ...] = ()

    def __call__(self, model: nn.Module) -> tuple:
        """``model``'s values at these paths, in order."""
        return (*(attrgetter(p)(model).detach() for p in self.tensors),
                *(float(attrgetter(p)(model)) for p in self.numbers))


STEP_KINDS = ("cuda", "triton", "cuda_operands", "hopper")


@dataclass(frozen=True, eq=False)
class StepCall:
    """A kernel step's ``build``, as data: what it calls, ``function(x, *weights(model), **options)``.

    ``kind`` is "cuda" (``function`` of the problem's extension), "triton" (``function`` of the
    step file ``fusedkit/kernels/<problem>/<filename>``), "cuda_operands" (``function`` of the
    problem's extension, called as ``operands(function, x, *weights(model))`` where ``operands``,
    a function of ``kernels/common/<filename>``, makes the operands the kernel takes, e.g. W
    transposed, cached per weight version) or "hopper" (the same with the problem's Hopper
    extension, sm_90a). A step of several launches names a tuple of functions, handed over in that
    order: ``operands(*function, x, *weights(model))``, which chains them. Calling it with a model
    does the one-off preparation and returns the callable x -> output; fusedkit.export writes the
    same call into a standalone file from these fields.
    """

    kind: str
    problem: str
    function: str | tuple[str, ...]
    weights: Weights
    filename: str = ""
    options: Mapping[str, object] = field(default_factory=dict)
    operands: str = ""

    def __post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise ValueError(f"kind={self.kind!r} is not known; valid: {', '.join(STEP_KINDS)}")
        fed = self.kind in ("cuda_operands", "hopper")
        if (bool(self.filename), bool(self.operands)) != (self.kind != "cuda", fed):
            raise ValueError(f"kind={self.kind!r} takes {'a' if self.kind != 'cuda' else 'no'} filename "
                             f"and {'an' if fed else 'no'} operands function; got "
                             f"filename={self.filename!r}, operands={self.operands!r}")
        if not isinstance(self.function, str) and not fed:
            raise ValueError(f"function={self.function!r}: only an operands step chains several")

    @property
    def functions(self) -> tuple[str, ...]:
        """The launches in order (one for every kind but a chained operands step)."""
        return (self.function,) if isinstance(self.function, str) else tuple(self.function)

    def __call__(self, model: nn.Module) -> Callable[..., torch.Tensor]:
        """The step bound to ``model``'s weights: the extension is built on first use (cached by
        source hash) or the Triton step file loaded, once per build, not per call."""
        bound = self.weights(model)
        if self.kind == "triton":
            fn = getattr(load_step(self.problem, self.filename), self.function)
            options = dict(self.options)
            return lambda x: fn(x, *bound, **options)
        ext = load_extension(self.problem, hopper=self.kind == "hopper")
        if self.kind == "cuda":
            fn = getattr(ext, self.function)
            return lambda x: fn(x, *bound)
        fns = [getattr(ext, f) for f in self.functions]
        prepare = getattr(load_step("common", self.filename), self.operands)
        return lambda x: prepare(*fns, x, *bound)


def cuda_step(problem_key: str, function: str, weights: Weights) -> StepCall:
    """A step of the problem's CUDA extension, called as ``function(x, *weights(model))``."""
    return StepCall("cuda", problem_key, function, weights)


def triton_step(problem_key: str, filename: str, function: str, weights: Weights,
                **options: object) -> StepCall:
    """A Triton step file's wrapper, called as ``function(x, *weights(model), **options)``."""
    return StepCall("triton", problem_key, function, weights, filename, options)


def operands_step(problem_key: str, function: str | tuple[str, ...], weights: Weights,
                  operands_file: str, operands: str, hopper: bool = False) -> StepCall:
    """A step of the problem's CUDA extension whose kernel takes its operands in another form
    than the model holds them (W transposed, 16-bit copies, fp16x3 splits): ``operands`` of
    ``kernels/common/<operands_file>`` makes them and calls the kernel (see :class:`StepCall`).
    ``hopper=True`` takes the kernels from the problem's Hopper extension (sm_90a; on a GPU that
    is not sm_90 it refuses to load, and :meth:`Variant.refusal` refuses first)."""
    return StepCall("hopper" if hopper else "cuda_operands", problem_key, function, weights,
                    operands_file, operands=operands)


def hopper_step(problem_key: str, function: str | tuple[str, ...], weights: Weights,
                operands_file: str, operands: str) -> StepCall:
    """A step of the problem's Hopper extension (sm_90a) fed by 16-bit operands:
    :func:`operands_step` with ``hopper=True``."""
    return operands_step(problem_key, function, weights, operands_file, operands, hopper=True)


def discover_steps(problem_key: str, weights: Weights) -> list[Variant]:
    """Every variant of every step file of ``fusedkit/kernels/<problem_key>/``, in number order
    (:func:`fusedkit.kernels.step_files`), each called with ``weights`` after x. What the sidecar
    ``NN_slug.step`` says is the variant's slug, title, summary, precision (fp32 if not given) and
    call; the rest is the file's: its number, its source, a Triton step for a ``.py`` file (it runs
    anywhere, in the interpreter on a CPU), a CUDA step for a ``.cu`` one (GPU only; sm_90a, in the
    problem's Hopper extension, when it includes ``common/hopper.cuh``: :func:`needs_hopper`)."""
    return [_step_variant(step, fields, weights)
            for step in step_files(problem_key) for fields in step.variants]


def _step_variant(step: StepFile, fields: Mapping[str, str], weights: Weights) -> Variant:
    """One variant of ``step`` from its sidecar's ``fields`` (see :func:`discover_steps`):
    ``function`` names the call (a comma-separated list: the launches of a chained step, in
    order), ``operands`` the module of ``kernels/common/`` and its function that makes a CUDA
    step's operands (``fp16_operands.py:call_fp16``), ``options`` a Triton step's keyword
    arguments (``precision=tf32``)."""
    where = f"{step.problem}/{step.path.stem}.step ({fields['slug']})"
    functions = tuple(f.strip() for f in fields["function"].split(","))
    function = functions[0] if len(functions) == 1 else functions
    options = {}
    for item in filter(None, (o.strip() for o in fields.get("options", "").split(","))):
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{where}: options item {item!r} is not name=value")
        options[name.strip()] = value.strip()
    operands_file, _, operands = fields.get("operands", "").partition(":")
    triton = step.path.suffix == ".py"
    if triton and operands_file:
        raise ValueError(f"{where}: a Triton step makes its own operands; allowed: no operands field")
    if not triton and options:
        raise ValueError(f"{where}: only a Triton step takes options, got {fields['options']!r}")
    if operands_file and not operands:
        raise ValueError(f"{where}: operands={fields['operands']!r}; allowed: file.py:function")
    hopper = not triton and needs_hopper(step.path)
    if hopper and not operands_file:
        raise ValueError(f"{where}: a Hopper step (it includes common/hopper.cuh) needs operands: "
                         "file.py:function of kernels/common/, which makes its 16-bit operands")
    if triton:
        call = triton_step(step.problem, step.path.name, function, weights, **options)
    elif operands_file:
        call = operands_step(step.problem, function, weights, operands_file, operands, hopper=hopper)
    else:
        call = cuda_step(step.problem, function, weights)
    return Variant(step.number, fields["slug"], fields["title"], fields["summary"], call,
                   precision=fields.get("precision", "fp32"), needs_gpu=not triton,
                   source=f"{step.problem}/{step.path.name}", triton=triton,
                   arch=HOPPER_ARCH if hopper else "any")


def by_batch(problem: Callable[[], "Problem"], routes: Sequence[Route]
             ) -> Callable[[nn.Module], Callable[..., torch.Tensor]]:
    """A ``build`` that sends each call to another step of the ladder by the batch's rows: the
    first route whose ``max_rows`` holds x.shape[0] (the last route, ``max_rows=None``, takes
    the rest), and in it the first step the device can run (:meth:`Variant.refusal`: e.g. a
    Hopper step on Hopper, its Triton twin elsewhere). Each chosen step is built once, on first
    use, for this model; the choice costs one comparison per call, no sync."""
    if not routes or routes[-1].max_rows is not None:
        raise ValueError("routes must end with a Route(max_rows=None, ...) for the largest batches")
    bounds = [r.max_rows for r in routes[:-1]]
    if any(b is None or b < 1 for b in bounds) or bounds != sorted(set(bounds)):
        raise ValueError(f"routes' max_rows must rise strictly from 1, then None; got {bounds + [None]}")

    def build(model: nn.Module) -> Callable[..., torch.Tensor]:
        prob = problem()
        device = next(model.parameters()).device
        chosen = []
        for r in routes:
            ok = [s for s in r.slugs if not prob.variant(s).refusal(device)]
            if not ok:
                band = f"up to {r.max_rows} rows" if r.max_rows else "of the largest batches"
                raise RuntimeError(f"no step of the band {band} runs on {device}: {', '.join(r.slugs)}")
            chosen.append(ok[0])
        built: dict[str, Callable[..., torch.Tensor]] = {}

        def run(x: torch.Tensor) -> torch.Tensor:
            rows = x.shape[0]
            slug = next(s for r, s in zip(routes, chosen) if r.max_rows is None or rows <= r.max_rows)
            if slug not in built:
                built[slug] = prob.variant(slug).build(model)
            return built[slug](x)
        return run
    return build


def nearby_odd(problem: Problem, sizes: Sizes) -> Sizes:
    """Sizes near ``sizes`` with every dimension changed to an odd number (so not a multiple
    of 4, 16 or 128): about an eighth smaller, or 1-2 larger where that is impossible."""
    out = {}
    for d in problem.dims:
        v = sizes[d.name]
        c = v - max(1, v // 8)
        c -= 1 - c % 2             # odd
        if c < 1:
            c = v + 1 if v % 2 == 0 else v + 2
        out[d.name] = min(c, d.maximum if d.maximum % 2 else d.maximum - 1)
    return problem.sizes(out)


def harness_bytes(problem: Problem, sizes: Sizes, device: str | torch.device = "cpu") -> float:
    """Bytes :func:`measure` holds at once on ``device`` at its peak, for a candidate that needs
    no memory of its own beyond its output: what :meth:`Problem.check_runnable` compares with
    the memory a run may use.

    Counted from the code of the kernel's worker (:class:`fusedkit.harness.worker.Session`) and
    of the judge (:func:`fusedkit.harness.judge.judge_build`), in fp32 copies of the inputs (X bytes),
    the parameters (W) and the output (Y). The two peaks come one after the other (the worker
    holds nothing of a build once it has sent its outputs), so the larger one counts:

    - the worker: the model and its hidden deep copy (2 W); two draws of the inputs and their
      pristine copies (4 X); the two outputs and, on a CPU, their bytes and the message that
      carries them (6 Y), on a GPU the copies taken on the caller's stream (4 Y);
    - this process: the model regenerated (W), the two inputs regenerated (2 X), the two
      outputs received (2 Y), then the larger of two moments. Computing the second float64
      reference beside the first (2 Y): the reference's own peak, the larger of its float64 model
      beside the fp32 one it converts (3 W) and eager's peak in float64
      (``problem.memory_counter(sizes, 8)``, which holds the float64 x and W). Or comparing: the
      two float64 references (4 Y), the two eager outputs (2 Y) and the float64 temporaries of
      one error (4 Y).

    The timing holds less (the model, one input buffer, one output and a few rows' float64
    references), and the nearby odd shape is smaller. What a candidate allocates beyond its
    output (weight splits, a compiled graph's buffers) is not counted; eager's own
    intermediates are, in the reference.
    """
    sizes = problem.sizes(sizes)
    with torch.device("meta"):   # shapes only: no memory
        model = problem.model_factory(**sizes, **problem.constants)
    w = 4 * sum(t.numel() for t in (*model.parameters(), *model.buffers()))
    x = 4 * sum(math.prod(shape) for shape in problem.input_shapes(sizes))
    y = 4 * math.prod(problem.output_shape(sizes))
    worker = 2 * w + 4 * x + (4 if torch.device(device).type == "cuda" else 6) * y
    reference = max(3 * w, problem.memory_counter(sizes, 8))
    judge = w + 2 * x + 2 * y + max(2 * y + reference, 4 * y + 2 * y + 4 * y)
    return float(max(worker, judge))
