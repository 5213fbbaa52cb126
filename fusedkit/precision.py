"""The precision vocabulary (the arithmetic a variant declares, the tiers a check assigns),
reduced-precision tensor-core inputs emulated on any device, to measure their error without a
GPU, and the error each declared precision can explain, which bounds a check's verdict.

A TF32 tensor-core product rounds each fp32 input to 10 explicit mantissa bits and accumulates
in (at least) fp32. Rounding the inputs here and multiplying in float64 isolates the input
rounding, which dominates at K in the thousands; the GPU's fp32 accumulation adds a little.

The bound (:func:`error_bound`) is the precision lab's model (notebook 05, sections 3 to 5) made
a rule: each operand of a product carries a relative rounding error (:data:`ROUNDING`), the K
products of a dot product add them like a random walk (an error growing as sqrt(K) times a
term), a truncation adds its one-signed part without cancellation, the fp32 sums round each
partial sum, and each problem's :class:`ErrorModel` carries the errors through its own model
(problem 45's logsumexp averages its logits' errors with their softmax weights). It is computed
on the very inputs and weights of a call, from the float64 reference's own intermediates, and
:data:`BOUND_MARGIN` times the predicted root mean square error: beyond it an answer is wrong,
whatever its precision.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

import torch
from torch import nn

# Which rate each arithmetic precision runs at (a field of fusedkit.hardware.GpuSpec).
# "tf32x3" is three TF32 products per multiply-add (hi*hi + hi*lo + lo*hi) to recover FP32
# accuracy: a third of the TF32 rate; "fp16x3" likewise on the fp16 tensor cores.
PRECISIONS: dict[str, str] = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops",
    "tf32x3": "tf32_tflops",
    "fp16x3": "bf16_tflops",   # fp16 and bf16 tensor rates are equal on these parts
    "fp16": "bf16_tflops",     # one fp16 product per multiply-add, fp32 accumulation
    "bf16": "bf16_tflops",
}
PASSES: dict[str, int] = {"tf32x3": 3, "fp16x3": 3}

TIERS: tuple[str, ...] = ("reference", "fp32-faithful", "kb-pass", "fast")
"""Precision tiers from the most to the least accurate (rules in :mod:`fusedkit.harness.judge`)."""
KERNEL_TIERS: tuple[str, ...] = TIERS[1:]
"""The tiers a kernel of ours can reach ("reference" is eager fp32 itself); a variant of one
tier also meets every later one."""


def to_tf32(t: torch.Tensor) -> torch.Tensor:
    """``t`` (float32) rounded to nearest to TF32's 10 explicit mantissa bits, still stored as
    float32: the low 13 bits of each value are cleared after adding half of their range."""
    if t.dtype != torch.float32:
        raise TypeError(f"t must be torch.float32, got {t.dtype}")
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32).view_as(t)


def to_fp16(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to nearest even to fp16 (10 explicit mantissa bits, as TF32, but a 5-bit
    exponent: magnitudes below 2**-14 lose bits, above 65504 overflow), stored as float32."""
    return t.half().float()


def to_bf16(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to nearest even to bf16 (7 explicit mantissa bits, fp32's exponent),
    stored as float32."""
    return t.bfloat16().float()


def tf32_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T + bias`` with x and weight rounded to TF32, accumulated in float64
    (returns float64): the input-rounding error of one TF32 GEMM, nothing else."""
    return to_tf32(x).double() @ to_tf32(weight).double().T + bias.double()


# -- what each declared precision can do to a result: the bound of the judge (fusedkit.harness) ---

EPS32 = 2.0**-24
"""fp32's unit roundoff: half the spacing of float32 numbers near 1."""


@dataclass(frozen=True)
class Rounding:
    """What one declared precision does to the products of a GEMM, as bounds on relative errors.

    ``operand``: the root mean square of the relative error each operand brings into its
    products (rounding to nearest keeps it within half a spacing, the unit roundoff ``u``);
    ``bias``: the largest mean of that error, its one-signed part (0 when rounding to nearest;
    a conversion that truncates shrinks every value, by ``u * ln 2`` on average for evenly spread
    mantissas, at most ``u``); ``accumulate``: the unit roundoff of the sums and of the
    elementwise work (fp32 everywhere in this workbook).
    """

    operand: float
    bias: float = 0.0
    accumulate: float = EPS32


ROUNDING: Mapping[str, Rounding] = MappingProxyType({
    "fp32": Rounding(0.0),                     # fp32 operands: only the sums round
    # 10 explicit mantissa bits, u = 2**-11: cuBLAS rounds to nearest; Triton's tf32 dots
    # truncate (the low 13 bits dropped), so the bias of truncation is allowed too
    "tf32": Rounding(2.0**-11, 2.0**-11),
    # big + small, each TF32: the small part's own rounding and the dropped small * small
    # are each below 2**-20 of a product (truncated), 2**-22 (rounded)
    "tf32x3": Rounding(2.0**-20, 2.0**-20),
    # hi + lo / 2048, each fp16 rounded to nearest: lo's rounding and the dropped lo * lo are
    # each about 2**-22 of a product
    "fp16x3": Rounding(2.0**-21),
    "fp16": Rounding(2.0**-11),                # 11 significant bits, rounded to nearest
    "bf16": Rounding(2.0**-8),                 # 8 significant bits, rounded to nearest
})   # read-only: nothing can edit this table in place
assert set(ROUNDING) == set(PRECISIONS)

BOUND_MARGIN = 2.0
"""The error bound is this many times the predicted root mean square error (already an
over-estimate: every rms is taken at its largest, every unknown weight at its largest)."""


Seen = Mapping[str, tuple["torch.Tensor | None", "torch.Tensor | None"]]


@dataclass(frozen=True)
class ErrorModel:
    """How rounding errors reach a problem's output: :func:`error_bound` runs the model in
    float64 keeping, of each submodule named in ``capture``, the float64 tensors it names
    (``"input"``, the first, and/or ``"output"``: keep only what is needed, as each kept tensor
    outlives the forward), and ``variance(model64, seen, out64, rounding)`` returns the
    predicted sum over all outputs of each output's squared error (a 0-dim float64 tensor) from
    them, where ``seen`` maps each captured name to its (input, output), None where not kept."""

    capture: Mapping[str, tuple[str, ...]]
    variance: Callable[[nn.Module, Seen, torch.Tensor, Rounding], torch.Tensor]


def forward64(model: nn.Module, inputs: Sequence[torch.Tensor],
              capture: Mapping[str, tuple[str, ...]] | None = None, *, float64: bool = False
              ) -> tuple[torch.Tensor, nn.Module, dict[str, tuple]]:
    """The model's own forward on a float64 copy of it and of ``inputs``: its output, the copy,
    and for each submodule named in ``capture`` its (first input, output) during that call,
    each kept only where ``capture`` names it ("input", "output"), else None. With
    ``float64=True`` the model is a float64 copy already, kept by the caller, and run as it is."""
    model64 = model if float64 else copy.deepcopy(model).double()
    seen: dict[str, tuple] = {}
    subs = dict(model64.named_modules())

    def keeper(name: str, parts: tuple[str, ...]) -> Callable:
        def hook(_m: nn.Module, args: tuple, out: torch.Tensor) -> None:
            seen[name] = (args[0] if "input" in parts else None, out if "output" in parts else None)
        return hook
    hooks = [subs[name].register_forward_hook(keeper(name, parts))
             for name, parts in (capture or {}).items()]
    try:
        with torch.no_grad():
            out = model64(*[t.double() for t in inputs])
    finally:
        for h in hooks:
            h.remove()
    return out, model64, seen


def error_bounds(model: nn.Module, inputs: Sequence[torch.Tensor], precisions: Sequence[str],
                 errors: ErrorModel, *, float64: bool = False
                 ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(the float64 output, for each of ``precisions`` the largest relative error its arithmetic
    can explain on these inputs): :data:`BOUND_MARGIN` times the root of ``errors``' predicted
    squared error over the reference's norm, both Frobenius over every output. Each bound is a
    0-dim tensor on the inputs' device (reading it is the caller's choice: on a GPU that
    synchronizes). ``float64`` as in :func:`forward64`."""
    out, model64, seen = forward64(model, inputs, errors.capture, float64=float64)
    norm = torch.linalg.vector_norm(out)
    norm = torch.where(norm > 0, norm, 1.0)
    with torch.no_grad():
        return out, {p: BOUND_MARGIN * errors.variance(model64, seen, out, ROUNDING[p]).sqrt() / norm
                     for p in precisions}


def error_bound(model: nn.Module, inputs: Sequence[torch.Tensor], precision: str,
                errors: ErrorModel, *, float64: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(the float64 output, the largest relative error ``precision`` arithmetic can explain on
    these inputs): :func:`error_bounds` for one precision."""
    out, bounds = error_bounds(model, inputs, [precision], errors, float64=float64)
    return out, bounds[precision]


def grouped_error_bounds(model64: nn.Module, inputs: Sequence[torch.Tensor], group_rows: int,
                         precision: str, errors: ErrorModel) -> tuple[torch.Tensor, torch.Tensor]:
    """(the float64 output, one bound per group): :func:`error_bound` of ``precision`` on each
    consecutive ``group_rows`` rows of ``inputs`` as if they were its own call, from one float64
    forward of all of them through ``model64`` (a float64 model, run as it is). Every problem
    here maps row m of its inputs to row m of its output and of every captured tensor, so a
    group's captured rows are exactly what its own call would have captured."""
    out, _, seen = forward64(model64, inputs, errors.capture, float64=True)
    rounding, bounds = ROUNDING[precision], []
    with torch.no_grad():
        for start in range(0, out.shape[0], group_rows):
            rows = slice(start, start + group_rows)
            part = {name: tuple(t[rows] if t is not None else None for t in kept)
                    for name, kept in seen.items()}
            norm = torch.linalg.vector_norm(out[rows])
            norm = torch.where(norm > 0, norm, 1.0)
            bounds.append(BOUND_MARGIN * errors.variance(model64, part, out[rows], rounding).sqrt() / norm)
    return out, torch.stack(bounds) if bounds else out.new_zeros(0)


def row_chunks(rows: int, per_row: int, elements: int = 2**18) -> list[slice]:
    """Slices of ``rows`` rows, each holding at most about ``elements`` temporaries of
    ``per_row`` each: an error model's temporaries stay small whatever the sizes."""
    step = max(1, elements // max(1, per_row))
    return [slice(i, min(rows, i + step)) for i in range(0, rows, step)]
