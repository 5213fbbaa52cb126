"""Input checks of the Triton steps' wrappers: one line naming the parameter, its value and
what is allowed (TypeError for a wrong type or dtype, ValueError for a wrong shape or device).

Loaded like a step (``load_step("common", "checks.py")``).
"""

from __future__ import annotations

import torch

from fusedkit.kernels import load_step

INTERPRET: bool = load_step("common", "triton_base.py").INTERPRET


def check_precision(precision: str, allowed: tuple[str, ...]) -> None:
    """``precision`` must be one of ``allowed``."""
    if precision not in allowed:
        raise ValueError(f"precision={precision!r}: allowed values are {allowed}")


def check_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                 multiplier: float, negative_slope: float) -> tuple[int, int, int]:
    """Validate the operands of problem 12's ``linear_leakyrelu`` steps; return (M, N, K).

    Raises TypeError / ValueError with one line naming the parameter, its value and what
    is allowed. Non-contiguous tensors are accepted: kernels read them through strides.
    """
    for name, t in (("x", x), ("weight", weight), ("bias", bias)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != torch.float32:
            raise TypeError(f"{name}.dtype={t.dtype}: only torch.float32 is allowed")
    for name, t, ndim in (("x", x, 2), ("weight", weight, 2), ("bias", bias, 1)):
        if t.dim() != ndim:
            raise ValueError(f"{name} has shape {tuple(t.shape)}: it must be {ndim}-D")
    (m, k), (n, kw) = x.shape, weight.shape
    if kw != k:
        raise ValueError(f"weight.shape={tuple(weight.shape)} does not match x.shape={tuple(x.shape)}: "
                         f"weight must be (N, K) with K = x.shape[1] = {k}")
    if bias.shape[0] != n:
        raise ValueError(f"bias.shape={tuple(bias.shape)}: it must be (N,) = ({n},), weight's first dim")
    for name, size in (("M = x.shape[0]", m), ("K = x.shape[1]", k), ("N = weight.shape[0]", n)):
        if size == 0:
            raise ValueError(f"{name} is 0: empty inputs are not allowed (every dim must be >= 1)")
    devices = {x.device, weight.device, bias.device}
    if len(devices) != 1:
        raise ValueError(f"x, weight and bias must share one device, got x on {x.device}, "
                         f"weight on {weight.device}, bias on {bias.device}")
    if x.device.type != "cuda" and not INTERPRET:
        raise ValueError(f"x.device={x.device}: Triton kernels need CUDA tensors "
                         "(CPU tensors only under TRITON_INTERPRET=1, set before triton is imported)")
    if INTERPRET and x.device.type != "cpu":
        raise ValueError(f"x.device={x.device}: under TRITON_INTERPRET=1 the tensors must be on the CPU")
    for name, value in (("multiplier", multiplier), ("negative_slope", negative_slope)):
        # bool is an int subclass but surely a mistake here; tensors would force a sync.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name}={value!r}: must be a Python float or int")
    return m, n, k


def check_tensors(named: list[tuple[str, torch.Tensor, int]]) -> None:
    """Type (float32), rank, non-empty and device rules for (name, tensor, ndim) triples."""
    for name, t, _ in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != torch.float32:
            raise TypeError(f"{name}.dtype={t.dtype}: only torch.float32 is allowed")
    for name, t, ndim in named:
        if t.dim() != ndim:
            raise ValueError(f"{name} has shape {tuple(t.shape)}: it must be {ndim}-D")
    for name, t, _ in named:
        for d, size in enumerate(t.shape):
            if size == 0:
                raise ValueError(f"{name}.shape[{d}] is 0 (shape {tuple(t.shape)}): empty inputs are "
                                 "not allowed (every dim must be >= 1)")
    devices = {t.device for _, t, _ in named}
    if len(devices) != 1:
        where = ", ".join(f"{name} on {t.device}" for name, t, _ in named)
        raise ValueError(f"the tensors must share one device, got {where}")
    dev = named[0][1].device
    if dev.type != "cuda" and not INTERPRET:
        raise ValueError(f"{named[0][0]}.device={dev}: Triton kernels need CUDA tensors "
                         "(CPU tensors only under TRITON_INTERPRET=1, set before triton is imported)")
    if INTERPRET and dev.type != "cpu":
        raise ValueError(f"{named[0][0]}.device={dev}: under TRITON_INTERPRET=1 the tensors must be on the CPU")


def check_layer(a_name: str, a: torch.Tensor, w_name: str, w: torch.Tensor,
                b_name: str, b: torch.Tensor,
                a_dtypes: tuple[torch.dtype, ...] = (torch.float32,)) -> tuple[int, int, int]:
    """One Linear layer a (M, K) @ w (N, K).T + b (N,); returns (M, K, N). w and b are
    float32; a is one of ``a_dtypes`` (float32 unless a step reads 16-bit activations)."""
    if a_dtypes == (torch.float32,):
        check_tensors([(a_name, a, 2), (w_name, w, 2), (b_name, b, 1)])
    else:
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"{a_name} must be a torch.Tensor, got {type(a).__name__}")
        if a.dtype not in a_dtypes:
            raise TypeError(f"{a_name}.dtype={a.dtype}: allowed are {', '.join(map(str, a_dtypes))}")
        if a.dim() != 2:
            raise ValueError(f"{a_name} has shape {tuple(a.shape)}: it must be 2-D")
        check_tensors([(w_name, w, 2), (b_name, b, 1)])
        if 0 in a.shape:
            raise ValueError(f"{a_name} has shape {tuple(a.shape)}: empty inputs are not allowed "
                             "(every dim must be >= 1)")
        if a.device != w.device:
            raise ValueError(f"the tensors must share one device, got {a_name} on {a.device}, "
                             f"{w_name} on {w.device}")
    (m, k), (n, kw) = a.shape, w.shape
    if kw != k:
        raise ValueError(f"{w_name}.shape={tuple(w.shape)} does not match {a_name}.shape={tuple(a.shape)}: "
                         f"{w_name} must be ({n}, {k}), its second dim = {a_name}.shape[1] = {k}")
    if b.shape[0] != n:
        raise ValueError(f"{b_name}.shape={tuple(b.shape)}: it must be ({n},), {w_name}'s first dim")
    return m, k, n


def check_two_layers(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                 w2: torch.Tensor, b2: torch.Tensor) -> tuple[int, int, int, int]:
    """Validate the operands of problem 45's ``linear_sigmoid_linear_lse`` steps; return (M, K, H, N).

    x (M, K), w1 (H, K), b1 (H,), w2 (N, H), b2 (N,): float32, one device (CUDA, or the
    CPU under TRITON_INTERPRET=1), every dim >= 1. Non-contiguous tensors are accepted:
    the kernels read them through strides. Raises TypeError / ValueError with one line
    naming the parameter, its value and what is allowed.
    """
    check_tensors([("x", x, 2), ("w1", w1, 2), ("b1", b1, 1), ("w2", w2, 2), ("b2", b2, 1)])
    m, k, h = check_layer("x", x, "w1", w1, "b1", b1)
    if w2.shape[1] != h:
        raise ValueError(f"w2.shape={tuple(w2.shape)} does not match w1.shape={tuple(w1.shape)}: "
                         f"w2 must be (N, {h}), its second dim = H = w1.shape[0] = {h}")
    if b2.shape[0] != w2.shape[0]:
        raise ValueError(f"b2.shape={tuple(b2.shape)}: it must be ({w2.shape[0]},), w2's first dim")
    return m, k, h, w2.shape[0]
