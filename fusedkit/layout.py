"""Row-major meets column-major: the ``cublasSgemm`` call behind ``y = x @ W.T``.

PyTorch stores x (M, K), W (N, K) and y (M, N) row-major; BLAS reads column-major, and a row-major
(R, C) buffer read column-major with ``ld = C`` is its transpose. So ask BLAS for ``y.T = W @ x.T``:
A = W's buffer with ``transa = T``, B = x's with ``transb = N``, m = N, n = M, k = K, lda = ldb = K,
ldc = N; the column-major (N x M) result, read row-major, is y. Any call runs here on a real
column-major BLAS (SciPy's Fortran ``sgemm``), and what a wrong one computes is read off its output.
"""

from __future__ import annotations

import math
import numbers
import secrets
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import torch
from scipy.linalg import blas

# cublasSgemm takes every size and leading dimension as a C `int`.
INT32_MAX = 2**31 - 1

# A product "matches" an output buffer when their relative error is below this. Wrong
# guesses land near 1; float32 rounding and the subtraction of beta * C stay near 1e-5.
_MATCH_TOL = 1e-3

# Values a freshly allocated (torch.empty) output buffer might hold: finite garbage, so a
# call with beta != 0 visibly adds it and rows BLAS never writes stay visibly unwritten.
_GARBAGE_RANGE = 100.0


def _check_int(name: str, value: object, low: int, high: int = INT32_MAX) -> int:
    """``value`` as an int in [low, high]; TypeError or ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}={value!r} ({type(value).__name__}) must be an integer "
                        f"in [{low}, {high}]")
    if not low <= int(value) <= high:
        why = " (cublasSgemm takes C ints)" if high == INT32_MAX else ""
        raise ValueError(f"{name}={value!r} is out of range: must be an integer in "
                         f"[{low}, {high}]{why}")
    return int(value)


def _check_linear_sizes(batch: object, in_features: object, out_features: object) -> tuple[int, int, int]:
    """(M, K, N) from the row-major shapes of ``y = x @ W.T``, each in [1, 2**31 - 1]."""
    return (_check_int("batch", batch, 1), _check_int("in_features", in_features, 1),
            _check_int("out_features", out_features, 1))


class BlasArgumentError(ValueError):
    """BLAS's xerbla (cuBLAS: CUBLAS_STATUS_INVALID_VALUE) rejects the arguments."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        super().__init__("BLAS rejects the arguments: " + "; ".join(violations))


class BufferOverrunError(ValueError):
    """The call would read or write past the end of one of its buffers."""


@dataclass(frozen=True)
class GemmCall:
    """One ``cublasSgemm`` call, ``C = alpha * op(A) @ op(B) + beta * C``, column-major, A and B the
    buffers ``a`` and ``b`` ("W" or "x"), C y's; checked by :meth:`validate`, so wrong calls can be built."""

    transa: Literal["N", "T"]
    transb: Literal["N", "T"]
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    a: Literal["W", "x"]
    b: Literal["W", "x"]
    alpha: float = 1.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        for name in ("transa", "transb"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name}={getattr(self, name)!r} must be a str: 'N' or 'T'")
        for name in ("m", "n", "k", "lda", "ldb", "ldc"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{name}={value!r} ({type(value).__name__}) must be an integer")
            object.__setattr__(self, name, int(value))   # numpy ints become plain ints
        for name in ("a", "b"):
            if getattr(self, name) not in ("W", "x"):
                raise ValueError(f"{name}={getattr(self, name)!r} must name a buffer: 'W' or 'x'")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name}={value!r} must be a real number")
            object.__setattr__(self, name, float(value))

    @property
    def a_stored(self) -> tuple[int, int]:
        """(rows, columns) of A as stored column-major: m x k for 'N', k x m for 'T'."""
        return (self.m, self.k) if self.transa.upper() == "N" else (self.k, self.m)

    @property
    def b_stored(self) -> tuple[int, int]:
        """(rows, columns) of B as stored column-major: k x n for 'N', n x k for 'T'."""
        return (self.k, self.n) if self.transb.upper() == "N" else (self.n, self.k)

    def floats_touched(self) -> dict[str, int]:
        """Floats from the start of each argument the call reads (A, B) or writes (C)."""
        def extent(rows: int, cols: int, ld: int) -> int:
            return 0 if rows <= 0 or cols <= 0 else ld * (cols - 1) + rows
        return {"A": extent(*self.a_stored, self.lda), "B": extent(*self.b_stored, self.ldb),
                "C": extent(self.m, self.n, self.ldc)}

    def validate(self) -> list[str]:
        """BLAS's argument checks as reference SGEMM's xerbla applies them, one string per violation in
        its parameter order ([] when accepted), then values past cublasSgemm's C ``int``."""
        out: list[str] = []
        for number, name in ((1, "transa"), (2, "transb")):
            value = getattr(self, name)
            if value.upper() not in ("N", "T", "C"):
                out.append(f"parameter {number} ({name} = {value!r}) is illegal: "
                           f"{name} must be 'N', 'T' or 'C'")
        for number, name in ((3, "m"), (4, "n"), (5, "k")):
            if getattr(self, name) < 0:
                out.append(f"parameter {number} ({name} = {getattr(self, name)}) is illegal: "
                           f"{name} must be >= 0")
        rows_a = "m" if self.transa.upper() == "N" else "k"
        rows_b = "k" if self.transb.upper() == "N" else "n"
        checks = (
            (8, "lda", rows_a, self.a_stored[0], f"transa = '{self.transa}' stores A as "
             f"{'m x k' if rows_a == 'm' else 'k x m'} = {self.a_stored[0]} x {self.a_stored[1]}"),
            (10, "ldb", rows_b, self.b_stored[0], f"transb = '{self.transb}' stores B as "
             f"{'k x n' if rows_b == 'k' else 'n x k'} = {self.b_stored[0]} x {self.b_stored[1]}"),
            (13, "ldc", "m", self.m, f"C is m x n = {self.m} x {self.n}"),
        )
        for number, name, rows_name, rows, why in checks:
            ld = getattr(self, name)
            if ld < max(1, rows):
                out.append(f"parameter {number} ({name} = {ld}) is illegal: {name} must be "
                           f">= max(1, {rows_name}) = {max(1, rows)}, because {why}")
        too_big = [f"{f} = {getattr(self, f)}" for f in ("m", "n", "k", "lda", "ldb", "ldc")
                   if getattr(self, f) > INT32_MAX]
        if too_big:
            out.append(f"cublasSgemm takes C ints: {', '.join(too_big)} exceed{'s' if len(too_big) == 1 else ''} "
                       f"2**31 - 1")
        return out

    def to_c(self) -> str:
        """The call as C source, buffers named W, x and y."""
        op = {"N": "CUBLAS_OP_N", "T": "CUBLAS_OP_T", "C": "CUBLAS_OP_C"}
        args = [op.get(self.transa.upper(), self.transa), op.get(self.transb.upper(), self.transb),
                self.m, self.n, self.k, "&alpha", self.a, self.lda, self.b, self.ldb, "&beta", "y", self.ldc]
        return "cublasSgemm(handle, " + ", ".join(str(a) for a in args) + ")"


def derive_linear_gemm(batch: int, in_features: int, out_features: int) -> GemmCall:
    """The column-major SGEMM call that writes ``y = x @ W.T`` into y's row-major buffer (module
    docstring); each size an integer in [1, 2**31 - 1]."""
    M, K, N = _check_linear_sizes(batch, in_features, out_features)
    # BLAS sees W's buffer as W.T (K x N, ld K) and x's as x.T (K x M, ld K);
    # op(A) = (W.T).T = W (N x K), op(B) = x.T (K x M), C = W @ x.T = y.T (N x M, ld N).
    return GemmCall(transa="T", transb="N", m=N, n=M, k=K, lda=K, ldb=K, ldc=N, a="W", b="x")


def _as_flat_float32(name: str, buffer: object) -> np.ndarray:
    """A C-contiguous float32 array as its flat memory (a view, no copy)."""
    if not isinstance(buffer, np.ndarray):
        raise TypeError(f"buffers[{name!r}] is a {type(buffer).__name__}: pass a numpy array "
                        f"(for a tensor t: t.contiguous().numpy())")
    if buffer.dtype != np.float32:
        raise TypeError(f"buffers[{name!r}] has dtype {buffer.dtype}: sgemm needs float32")
    if not buffer.flags.c_contiguous:
        raise ValueError(f"buffers[{name!r}] is not contiguous: pass the buffer exactly as "
                         f"stored (a contiguous tensor's memory)")
    return buffer.reshape(-1)


def _colmajor(flat: np.ndarray, rows: int, cols: int, ld: int) -> np.ndarray:
    """The (rows x cols) column-major matrix with leading dimension ``ld`` over ``flat``: how BLAS
    addresses the pointer it is given."""
    return np.ndarray((rows, cols), dtype=flat.dtype, buffer=flat,
                      strides=(flat.itemsize, flat.itemsize * ld))


def run_colmajor_sgemm(call: GemmCall, buffers: dict[str, np.ndarray]) -> np.ndarray:
    """y's buffer after ``call`` on SciPy's Fortran sgemm over the flat float32 buffers of x, W and y;
    BlasArgumentError where BLAS rejects it, BufferOverrunError where it would overrun a buffer."""
    violations = call.validate()
    if violations:
        raise BlasArgumentError(violations)
    missing = [name for name in (call.a, call.b, "y") if name not in buffers]
    if missing:
        raise KeyError(f"buffers lacks {missing}: pass {{'x': ..., 'W': ..., 'y': ...}} "
                       f"(flat float32 memory of each tensor)")
    flat = {name: _as_flat_float32(name, buffers[name]) for name in {call.a, call.b, "y"}}
    touched = call.floats_touched()
    for arg, name, verb in (("A", call.a, "reads"), ("B", call.b, "reads"), ("C", "y", "writes")):
        if touched[arg] > flat[name].size:
            raise BufferOverrunError(
                f"invalid: {verb} past the end of {name}'s buffer (needs {touched[arg]} floats, "
                f"has {flat[name].size}) as {arg} with ld{arg.lower()} = "
                f"{getattr(call, 'ld' + arg.lower())}")

    out = flat["y"].copy()
    c = _colmajor(out, call.m, call.n, call.ldc)   # writes through to `out`
    if call.m == 0 or call.n == 0:
        return out                                   # BLAS quick return: nothing written
    if call.k == 0:
        c[...] = call.beta * c if call.beta != 0 else 0.0   # C = beta*C, no product
        return out
    a = _colmajor(flat[call.a], *call.a_stored, call.lda)
    b = _colmajor(flat[call.b], *call.b_stored, call.ldb)
    # f2py hands column-contiguous views to sgemm as they are and gathers padded
    # (ld > rows) ones into a packed copy first: same elements, same BLAS call.
    result = blas.sgemm(call.alpha, a, b, beta=call.beta,
                        c=np.asfortranarray(c) if call.beta != 0 else None,
                        trans_a=0 if call.transa.upper() == "N" else 1,
                        trans_b=0 if call.transb.upper() == "N" else 1)
    c[...] = result
    return out


def draw_linear_buffers(batch: int, in_features: int, out_features: int,
                        seed: int) -> dict[str, np.ndarray]:
    """Fresh buffers for ``y = x @ W.T`` drawn as KernelBench and nn.Linear draw them, y finite
    garbage standing in for ``torch.empty``; flat float32."""
    M, K, N = _check_linear_sizes(batch, in_features, out_features)
    g = torch.Generator().manual_seed(_check_int("seed", seed, 0, 2**63 - 1))
    x = torch.rand(M, K, generator=g)
    bound = 1.0 / math.sqrt(K)
    w = torch.empty(N, K).uniform_(-bound, bound, generator=g)
    y = torch.empty(M, N).uniform_(-_GARBAGE_RANGE, _GARBAGE_RANGE, generator=g)
    return {"x": x.numpy().reshape(-1), "W": w.numpy().reshape(-1), "y": y.numpy().reshape(-1)}


@dataclass(frozen=True)
class Verdict:
    """What a call did to y's buffer against ``x @ W.T`` in float64: ``ok``, ``rel_error``,
    ``max_abs_error`` and ``computes``, in words."""

    ok: bool
    rel_error: float
    max_abs_error: float
    computes: str
    seed: int


def _products(mats: dict[str, np.ndarray]) -> list[tuple[str, tuple[str, bool, str, bool], tuple[int, int]]]:
    """(label, (P, P transposed, Q, Q transposed), shape) of every product op(P) @ op(Q) of P, Q in
    {x, W} whose inner sizes agree: y = x @ W.T first, then y.T = W @ x.T, then the rest."""
    found = []
    for p in ("x", "W"):
        for q in ("x", "W"):
            for tp in (False, True):
                for tq in (False, True):
                    lp = mats[p].shape[::-1] if tp else mats[p].shape
                    rq = mats[q].shape[::-1] if tq else mats[q].shape
                    if lp[1] == rq[0]:
                        label = f"{p}{'.T' if tp else ''} @ {q}{'.T' if tq else ''}"
                        found.append((label, (p, tp, q, tq), (lp[0], rq[1])))
    first = {"x @ W.T": 0, "W @ x.T": 1}
    return sorted(found, key=lambda e: first.get(e[0], 2))


def _meaning(label: str, spec: tuple[str, bool, str, bool]) -> str:
    """Plain words for a product, relative to y = x @ W.T and y.T = W @ x.T."""
    p, tp, q, tq = spec
    if label == "x @ W.T":
        return "y = x @ W.T"
    if label == "W @ x.T":
        return "y.T = W @ x.T, y's transpose"
    if p == q:
        return f"{label} ({p} multiplied by itself; the other operand is never used)"
    notes = []
    if p == "W":
        notes.append("operands' roles swapped: W first")
    # Against the nearest correct form: x @ W.T (x first) or W @ x.T (W first).
    if (p == "x" and tp) or (q == "x" and not tq):
        notes.append("x " + ("transposed" if p == "x" else "not transposed"))
    if (q == "W" and not tq) or (p == "W" and tp):
        notes.append("W " + ("not transposed" if q == "W" else "transposed"))
    return f"{label} ({', '.join(notes)})"


def _rel(got: np.ndarray, ref: np.ndarray) -> float:
    scale = float(np.linalg.norm(ref))
    return float(np.linalg.norm(got - ref)) / (scale if scale > 0 else 1.0)


def _identify(call: GemmCall, out: np.ndarray, prior: np.ndarray,
              mats: dict[str, np.ndarray], M: int, N: int) -> str:
    """Say what ``out`` (y's buffer after ``call``; ``prior`` before it) holds."""
    out64, prior64 = out.astype(np.float64), prior.astype(np.float64)
    if not np.all(np.isfinite(out64)):
        return "non-finite values (NaN or inf) in y's buffer"
    if np.array_equal(out, prior):
        return ("nothing: y's buffer is left exactly as it was (BLAS returns at once when "
                "m or n is 0, or when alpha is 0 and beta is 1)")
    # Undo alpha and beta on the part of the buffer the call writes, so the product shows.
    adjusted = out64.copy()
    written = np.zeros(out.size, dtype=bool)
    _colmajor(written, call.m, call.n, call.ldc)[...] = True   # where C lies in y's buffer
    adjusted[written] -= call.beta * prior64[written]
    if call.alpha != 0:
        adjusted[written] /= call.alpha
    scale = "" if call.alpha == 1 else f"alpha = {call.alpha:g} times "
    extra = ("" if call.beta == 0 else
             f", plus beta = {call.beta:g} times whatever y's buffer held before the call "
             f"(torch.empty leaves it uninitialised, so the sum is garbage)")

    products = _products(mats)
    value = {label: (mats[p].T if tp else mats[p]) @ (mats[q].T if tq else mats[q])
             for label, (p, tp, q, tq), _ in products}
    compared: list[str] = []
    # 1. The whole buffer, read row-major, as one product laid out row-major.
    for label, spec, (r, c) in products:
        if r * c == out.size:
            compared.append(label)
            if _rel(adjusted, value[label].reshape(-1)) < _MATCH_TOL:
                if label == "x @ W.T":
                    if scale or extra:
                        return f"{scale}y = x @ W.T{extra}"
                    return (f"y = x @ W.T, but with a relative error of "
                            f"{_rel(adjusted, value[label].reshape(-1)):.3g}, above the tolerance")
                if label == "W @ x.T":
                    return (f"{scale}y's transpose: the buffer holds y.T = W @ x.T row-major "
                            f"({N} x {M}), which is y in column-major order; read row-major as "
                            f"({M}, {N}) it is scrambled{extra}")
                return (f"{scale}{_meaning(label, spec)}, laid out row-major ({r} x {c}) in "
                        f"y's buffer instead of y{extra}")
    # 2. Only BLAS's C (m x n, column-major, ldc) as a product, when it is not all of y.
    cmat = _colmajor(adjusted, call.m, call.n, call.ldc)
    for label, spec, shape in products:
        if shape == (call.m, call.n):
            if label not in compared:
                compared.append(label)
            if _rel(cmat, value[label]) < _MATCH_TOL:
                return (f"{scale}C = {_meaning(label, spec)} as a column-major {call.m} x "
                        f"{call.n} matrix with ldc = {call.ldc}, which is not y's row-major "
                        f"({M} x {N}) layout{extra}")
    y = value["x @ W.T"].reshape(-1)
    tried = ", ".join(compared) if compared else "no product of x and W fits"
    return (f"an unrelated product (rel. error {_rel(out64, y):.3g} against y; "
            f"compared with: {tried})")


def verify_linear_gemm(call: GemmCall, batch: int, in_features: int, out_features: int,
                       seed: int | None = None, tol: float = 1e-5) -> Verdict:
    """Run ``call`` on fresh buffers (:func:`draw_linear_buffers`) and judge what it wrote
    (:class:`Verdict`); a call that cannot run says why."""
    M, K, N = _check_linear_sizes(batch, in_features, out_features)
    if seed is None:
        seed = secrets.randbits(63)
    seed = _check_int("seed", seed, 0, 2**63 - 1)
    buffers = draw_linear_buffers(M, K, N, seed)
    try:
        out = run_colmajor_sgemm(call, buffers)
    except (BlasArgumentError, BufferOverrunError) as err:
        return Verdict(False, math.nan, math.nan, str(err).removeprefix("invalid: "), seed)

    mats = {"x": buffers["x"].astype(np.float64).reshape(M, K),
            "W": buffers["W"].astype(np.float64).reshape(N, K)}
    y = mats["x"] @ mats["W"].T
    got = out.astype(np.float64).reshape(M, N)
    if not np.all(np.isfinite(got)):
        return Verdict(False, math.inf, math.inf, _identify(call, out, buffers["y"], mats, M, N), seed)
    diff = np.abs(got - y)
    rel, max_abs = _rel(got, y), float(diff.max())
    # fp32's own bound on any order of summation: |fl(x.w) - x.w| <= gamma_K |x|.|w|, gamma_K =
    # K u / (1 - K u), u = 2^-24. A sum that nearly cancels (one output of a few terms) can pass
    # `tol` relative to |y| by rounding alone; a wrong call is far outside both.
    gamma = K * 2.0 ** -24 / (1 - K * 2.0 ** -24)
    ok = rel < tol or bool(np.all(diff <= gamma * (np.abs(mats["x"]) @ np.abs(mats["W"]).T)))
    computes = (f"y = x @ W.T, row-major ({M} x {N}): correct" if ok
                else _identify(call, out, buffers["y"], mats, M, N))
    return Verdict(ok, rel, max_abs, computes, seed)


def candidate_calls(batch: int, in_features: int, out_features: int) -> list[tuple[str, GemmCall]]:
    """The calls one might try for ``y = x @ W.T``, labelled: the derived call with beta = 1, then
    both operand orders times the four transpose pairs, sizes read off the row-major tensors."""
    M, K, N = _check_linear_sizes(batch, in_features, out_features)
    calls = [("beta = 1 on an output never written (torch.empty)",
              GemmCall("T", "N", m=N, n=M, k=K, lda=K, ldb=K, ldc=N, a="W", b="x", beta=1.0))]
    for a, b, m, n in (("W", "x", N, M), ("x", "W", M, N)):
        for transa in ("N", "T"):
            for transb in ("N", "T"):
                calls.append((f"A = {a}, B = {b}, transa = {transa}, transb = {transb}",
                              GemmCall(transa, transb, m=m, n=n, k=K, lda=K, ldb=K, ldc=N, a=a, b=b)))
    return calls


def describe_call(call: GemmCall, correct: GemmCall) -> str:
    """What ``call`` does differently from ``correct``, in words."""
    if call == correct:
        return "the derived call"
    parts = []
    if (call.a, call.b) != (correct.a, correct.b):
        parts.append(f"operands in the math's order (A = {call.a}, B = {call.b})")
    if (call.transa, call.transb) != (correct.transa, correct.transb):
        if (call.transa, call.transb) == (correct.transb, correct.transa):
            parts.append(f"the transposes swapped ({call.transa}, {call.transb})")
        else:
            parts.append(f"transposes ({call.transa}, {call.transb})")
    if (call.m, call.n) != (correct.m, correct.n):
        parts.append(f"m × n = {call.m} × {call.n}")
    if call.ldc != correct.ldc:
        parts.append(f"ldc = {call.ldc}")
    if (call.lda, call.ldb) != (correct.lda, correct.ldb):
        parts.append(f"lda = {call.lda}, ldb = {call.ldb}")
    if call.beta != correct.beta:
        parts.append(f"beta = {call.beta:g} on an output that was never written")
    return "; ".join(parts) or "the derived call"


def wrong_calls_table(batch: int, in_features: int, out_features: int) -> pd.DataFrame:
    """Every call of :func:`candidate_calls` and two more people try, each run on a real BLAS: what
    it changes against the derived call, the call, whether it is right, and what it computes instead."""

    M, K, N = _check_linear_sizes(batch, in_features, out_features)
    right = derive_linear_gemm(M, K, N)
    tries = [c for _, c in candidate_calls(M, K, N)]
    tries += [c for c in (GemmCall("T", "N", m=M, n=N, k=K, lda=K, ldb=K, ldc=M, a="x", b="W"),
                          GemmCall("N", "T", m=N, n=M, k=K, lda=K, ldb=K, ldc=N, a="W", b="x"))
              if c not in tries]
    verdicts = [verify_linear_gemm(c, batch=M, in_features=K, out_features=N) for c in tries]
    return pd.DataFrame({"against the derived call": [describe_call(c, right) for c in tries],
                         "call": [c.to_c() for c in tries],
                         "correct": [v.ok for v in verdicts], "what it computes": [v.computes for v in verdicts]})
