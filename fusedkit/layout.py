"""Row-major meets column-major: the ``cublasSgemm`` call behind ``y = x @ W.T (+ b)``.

PyTorch stores ``x`` (M, K), ``W`` (N, K) and ``y`` (M, N) row-major: element (i, j) of
an (R, C) tensor sits at float offset ``i*C + j``. BLAS (Fortran BLAS, cuBLAS) is
column-major: element (i, j) of a matrix with leading dimension ``ld`` sits at ``i + j*ld``.
So one buffer, read column-major with ``ld = C``, is a (C, R) matrix whose (j, i) element
is at ``j + i*C``: **a row-major (R, C) buffer read column-major is its transpose.**

* x's buffer, read column-major with ld = K, is ``x.T`` (K x M);
* W's buffer, read column-major with ld = K, is ``W.T`` (K x N);
* a column-major (N x M) result with ld = N, read row-major, is its transpose (M x N).

So ask BLAS for ``y.T`` and let PyTorch read it as ``y``:
``y.T = (x @ W.T).T = W @ x.T`` (N x M). BLAS computes ``C = op(A) @ op(B)``:

* A = W's buffer, which BLAS sees as ``W.T``; ``transa = T`` turns it back into ``W`` (N x K);
* B = x's buffer, which BLAS sees as ``x.T`` (K x M); ``transb = N`` keeps it;
* so m = N, n = M, k = K; lda = ldb = K (both buffers' row length), ldc = N.

``cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, W, K, x, K, &beta, y, N)``
writes the column-major (N x M) ``C = y.T`` with ldc = N, and that buffer read row-major
*is* y (M, N): no copy, no transpose kernel. The bias ``b`` is not part of the product:
add it in the epilogue, or pre-fill y with b in every row and pass ``beta = 1``.

This module derives that call (:func:`derive_linear_gemm`), checks it against BLAS's own
argument rules (:meth:`GemmCall.validate`), runs any call on a real column-major BLAS on
the CPU (:func:`run_colmajor_sgemm`, SciPy's Fortran ``sgemm``) and says in words what a
call really computed (:func:`verify_linear_gemm`). :func:`candidate_calls` lists the
guesses learners make, starting with the ones people most often try first.
"""

from __future__ import annotations

import math
import numbers
import secrets
from dataclasses import dataclass
from typing import Literal

import numpy as np
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
    """``value`` as an int in [low, high]; TypeError/ValueError naming ``name`` otherwise."""
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


class InvalidGemmCall(ValueError):
    """A call that cannot run: BLAS rejects it, or it would touch memory past a buffer."""


class BlasArgumentError(InvalidGemmCall):
    """BLAS's xerbla (cuBLAS: CUBLAS_STATUS_INVALID_VALUE) rejects the arguments."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        super().__init__("BLAS rejects the arguments: " + "; ".join(violations))


class BufferOverrunError(InvalidGemmCall):
    """The call would read or write past the end of one of its buffers."""


@dataclass(frozen=True)
class GemmCall:
    """One ``cublasSgemm`` / Fortran ``SGEMM`` call: ``C = alpha * op(A) @ op(B) + beta * C``.

    All matrices are column-major. ``op(A)`` is m x k, ``op(B)`` is k x n, C is m x n.
    ``a`` and ``b`` name the row-major PyTorch buffer passed as A and as B ("W" or "x");
    C is always y's buffer. Sizes and leading dimensions count float32 elements.
    Values are not checked here (so that wrong calls can be built and studied):
    :meth:`validate` applies BLAS's own rules.
    """

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

    # -- what BLAS reads and writes ---------------------------------------------------

    @property
    def a_stored(self) -> tuple[int, int]:
        """(rows, columns) of A as stored column-major: m x k for 'N', k x m for 'T'."""
        return (self.m, self.k) if self.transa.upper() == "N" else (self.k, self.m)

    @property
    def b_stored(self) -> tuple[int, int]:
        """(rows, columns) of B as stored column-major: k x n for 'N', n x k for 'T'."""
        return (self.k, self.n) if self.transb.upper() == "N" else (self.n, self.k)

    def floats_touched(self) -> dict[str, int]:
        """Floats from the start of each argument that the call reads (A, B) or writes (C).

        A (rows x cols) matrix with leading dimension ld ends at ``ld*(cols-1) + rows``.
        """
        def extent(rows: int, cols: int, ld: int) -> int:
            return 0 if rows <= 0 or cols <= 0 else ld * (cols - 1) + rows
        return {"A": extent(*self.a_stored, self.lda), "B": extent(*self.b_stored, self.ldb),
                "C": extent(self.m, self.n, self.ldc)}

    # -- BLAS's own argument rules ----------------------------------------------------

    def validate(self) -> list[str]:
        """BLAS's argument checks, as reference SGEMM and its error handler xerbla apply them.

        Returns one string per violation, in the order SGEMM tests them (xerbla reports
        only the first: "On entry to SGEMM parameter number 8 had an illegal value").
        Parameter numbers are Fortran's (cublasSgemm adds ``handle`` in front and returns
        CUBLAS_STATUS_INVALID_VALUE instead). An empty list means BLAS accepts the call.
        BLAS accepts m, n or k = 0 (it returns without computing). A last entry flags
        values that do not fit cublasSgemm's 32-bit ``int``.
        """
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

    # -- the call as C source -----------------------------------------------------------

    def to_c(self, commented: bool = False) -> str:
        """The call as C source, with the buffers named ``W``, ``x`` and ``y``.

        ``commented=True`` labels each number inline (``/*m=*/8192``) and names the
        operands (``/*A=*/W``); both forms compile against cublas_v2.h.
        """
        op = {"N": "CUBLAS_OP_N", "T": "CUBLAS_OP_T", "C": "CUBLAS_OP_C"}
        ta, tb = op.get(self.transa.upper(), self.transa), op.get(self.transb.upper(), self.transb)
        if not commented:
            args = [ta, tb, self.m, self.n, self.k, "&alpha", self.a, self.lda,
                    self.b, self.ldb, "&beta", "y", self.ldc]
        else:
            args = [ta, tb, f"/*m=*/{self.m}", f"/*n=*/{self.n}", f"/*k=*/{self.k}", "&alpha",
                    f"/*A=*/{self.a}", f"/*lda=*/{self.lda}", f"/*B=*/{self.b}",
                    f"/*ldb=*/{self.ldb}", "&beta", "/*C=*/y", f"/*ldc=*/{self.ldc}"]
        return "cublasSgemm(handle, " + ", ".join(str(a) for a in args) + ")"


def derive_linear_gemm(batch: int, in_features: int, out_features: int) -> GemmCall:
    """The column-major SGEMM call that writes ``y = x @ W.T`` into y's row-major buffer.

    ``batch`` = M (rows of x and y), ``in_features`` = K, ``out_features`` = N; x is
    (M, K), W is (N, K) as ``nn.Linear`` stores it, y is (M, N), all row-major and
    contiguous. Result: ``transa='T', transb='N', m=N, n=M, k=K, lda=K, ldb=K, ldc=N``
    with A = W and B = x (see the module docstring for why). Each size must be an
    integer in [1, 2**31 - 1]; anything else raises TypeError or ValueError.
    """
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
    """The (rows x cols) column-major matrix with leading dimension ``ld`` over ``flat``.

    Element (i, j) is ``flat[i + j*ld]``: a strided view, Fortran order with ``ld - rows``
    floats of padding per column, exactly how BLAS addresses the pointer it is given.
    """
    return np.ndarray((rows, cols), dtype=np.float32, buffer=flat,
                      strides=(flat.itemsize, flat.itemsize * ld))


def run_colmajor_sgemm(call: GemmCall, buffers: dict[str, np.ndarray]) -> np.ndarray:
    """Run ``call`` on a real column-major BLAS (SciPy's Fortran sgemm) on the CPU.

    ``buffers`` maps "x", "W" and "y" to float32 arrays holding each tensor's memory
    exactly as PyTorch stores it (row-major, contiguous; any shape, read flat). y's
    contents matter when ``beta != 0``; its size bounds what the call may write.
    A, B and C are views of these buffers read column-major with the call's leading
    dimensions; Python transposes nothing (BLAS applies ``transa``/``transb`` itself).
    Returns a new flat float32 array: y's buffer after the call (C is ldc x n column-major
    inside it; rows m..ldc-1 of each column keep their old contents). The inputs are
    not modified.

    Raises BlasArgumentError if BLAS would reject the arguments, BufferOverrunError
    ("invalid: reads past the end of W's buffer (needs X floats, has Y)") if the call
    would touch memory past a buffer, KeyError/TypeError/ValueError for bad buffers.
    """
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
    """Fresh random buffers for ``y = x @ W.T``, drawn the way KernelBench and nn.Linear do.

    x (M, K) is ``torch.rand`` in [0, 1); W (N, K) is uniform in ±1/sqrt(K) like
    ``nn.Linear``'s default init; y (M, N) is finite garbage in ±100, standing in for
    ``torch.empty``'s uninitialised memory. Returned flat (float32, PyTorch's memory order).
    """
    M, K, N = _check_linear_sizes(batch, in_features, out_features)
    g = torch.Generator().manual_seed(_check_int("seed", seed, 0, 2**63 - 1))
    x = torch.rand(M, K, generator=g)
    bound = 1.0 / math.sqrt(K)
    w = torch.empty(N, K).uniform_(-bound, bound, generator=g)
    y = torch.empty(M, N).uniform_(-_GARBAGE_RANGE, _GARBAGE_RANGE, generator=g)
    return {"x": x.numpy().reshape(-1), "W": w.numpy().reshape(-1), "y": y.numpy().reshape(-1)}


@dataclass(frozen=True)
class Verdict:
    """What a GEMM call did to y's buffer, judged against ``x @ W.T`` in float64.

    ``rel_error`` is ‖out − y‖ / ‖y‖ over y's buffer read row-major as (M, N);
    ``max_abs_error`` is max |out − y|; both are NaN when the call could not run and
    inf when the buffer holds NaN or inf. ``computes`` says in words what the call
    computed (found by comparing the buffer with products of x, W and their transposes).
    """

    ok: bool
    rel_error: float
    max_abs_error: float
    computes: str
    seed: int


def _products(mats: dict[str, np.ndarray]) -> list[tuple[str, tuple[str, bool, str, bool], tuple[int, int]]]:
    """Every product op(P) @ op(Q) of P, Q in {x, W} whose inner sizes agree.

    Ordered y = x @ W.T first, then y.T = W @ x.T, then the rest. Each entry is
    (label, (P, P transposed, Q, Q transposed), result shape); nothing is computed yet.
    """
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


def _colmajor_bool(mask: np.ndarray, call: GemmCall) -> None:
    """Set ``mask`` True where C (m x n, leading dimension ldc) lies in y's buffer."""
    if call.m > 0 and call.n > 0:
        view = np.ndarray((call.m, call.n), dtype=bool, buffer=mask,
                          strides=(mask.itemsize, mask.itemsize * call.ldc))
        view[...] = True


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
    _colmajor_bool(written, call)
    adjusted[written] -= call.beta * prior64[written]
    if call.alpha != 0:
        adjusted[written] /= call.alpha
    scale = "" if call.alpha == 1 else f"alpha = {call.alpha:g} times "
    extra = ("" if call.beta == 0 else
             f", plus beta = {call.beta:g} times whatever y's buffer held before the call "
             f"(torch.empty leaves it uninitialised, so the sum is garbage)")

    cache: dict[str, np.ndarray] = {}

    def value(label: str, spec: tuple[str, bool, str, bool]) -> np.ndarray:
        if label not in cache:
            p, tp, q, tq = spec
            cache[label] = (mats[p].T if tp else mats[p]) @ (mats[q].T if tq else mats[q])
        return cache[label]

    products = _products(mats)
    compared: list[str] = []
    # 1. The whole buffer, read row-major, as one product laid out row-major.
    for label, spec, (r, c) in products:
        if r * c == out.size:
            compared.append(label)
            if _rel(adjusted, value(label, spec).reshape(-1)) < _MATCH_TOL:
                if label == "x @ W.T":
                    if scale or extra:
                        return f"{scale}y = x @ W.T{extra}"
                    return (f"y = x @ W.T, but with a relative error of "
                            f"{_rel(adjusted, value(label, spec).reshape(-1)):.3g}, above the tolerance")
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
            if _rel(np.asarray(cmat, dtype=np.float64), value(label, spec)) < _MATCH_TOL:
                return (f"{scale}C = {_meaning(label, spec)} as a column-major {call.m} x "
                        f"{call.n} matrix with ldc = {call.ldc}, which is not y's row-major "
                        f"({M} x {N}) layout{extra}")
    y = value("x @ W.T", ("x", False, "W", True)).reshape(-1)
    tried = ", ".join(compared) if compared else "no product of x and W fits"
    return (f"an unrelated product (rel. error {_rel(out64, y):.3g} against y; "
            f"compared with: {tried})")


def verify_linear_gemm(call: GemmCall, batch: int, in_features: int, out_features: int,
                       seed: int | None = None, tol: float = 1e-5) -> Verdict:
    """Run ``call`` on fresh random x and W and say whether y's buffer then holds ``x @ W.T``.

    x (batch x in_features) and W (out_features x in_features) are drawn by
    :func:`draw_linear_buffers` (``seed=None`` draws a fresh seed, reported in the
    verdict); y's buffer starts as garbage. The call runs on a real column-major BLAS
    (:func:`run_colmajor_sgemm`); y's buffer is then read row-major as (M, N) and compared
    with ``x @ W.T`` in float64. ``ok`` means relative error below ``tol``, or every element
    within float32's rounding bound for a K-term dot product (gamma_K times |x| @ |W|.T). A call BLAS
    rejects or one that would overrun a buffer is not run: ``ok`` is False and
    ``computes`` says why. Meant for teaching-sized shapes: a wrong result is identified by
    computing, in float64, every product of x, W and their transposes that fits y's buffer.
    """
    M, K, N = _check_linear_sizes(batch, in_features, out_features)
    if seed is None:
        seed = secrets.randbits(63)
    seed = _check_int("seed", seed, 0, 2**63 - 1)
    violations = call.validate()
    if violations:
        return Verdict(False, math.nan, math.nan,
                       "BLAS rejects the arguments: " + "; ".join(violations), seed)
    buffers = draw_linear_buffers(M, K, N, seed)
    try:
        out = run_colmajor_sgemm(call, buffers)
    except BufferOverrunError as err:
        return Verdict(False, math.nan, math.nan, str(err).removeprefix("invalid: "), seed)

    mats = {"x": buffers["x"].astype(np.float64).reshape(M, K),
            "W": buffers["W"].astype(np.float64).reshape(N, K)}
    y = mats["x"] @ mats["W"].T
    got = out.astype(np.float64).reshape(M, N)
    if np.all(np.isfinite(got)):
        diff = np.abs(got - y)
        rel, max_abs = _rel(got, y), float(diff.max())
        # fp32's own bound on any order of summation: |fl(x.w) - x.w| <= gamma_K |x|.|w|,
        # gamma_K = K u / (1 - K u), u = 2^-24. A sum that nearly cancels (one output of a
        # few terms) can pass `tol` relative to |y| by rounding alone; a wrong call is far
        # outside both.
        u = 2.0 ** -24
        gamma = K * u / (1 - K * u)
        within_rounding = bool(np.all(diff <= gamma * (np.abs(mats["x"]) @ np.abs(mats["W"]).T)))
    else:
        rel = max_abs = math.inf
        within_rounding = False
    ok = rel < tol or within_rounding
    computes = (f"y = x @ W.T, row-major ({M} x {N}): correct" if ok
                else _identify(call, out, buffers["y"], mats, M, N))
    return Verdict(ok, rel, max_abs, computes, seed)


def candidate_calls(batch: int, in_features: int, out_features: int,
                    notes: str = "p12") -> list[tuple[str, GemmCall]]:
    """The calls learners try for ``y = x @ W.T``, each with a label; the correct one included.

    First the attempts people most often make for problem 12 (labelled "common attempt i"),
    then the rest of
    the naive grid: both operand orders (A = W or A = x) times the four transa/transb
    pairs, with m x n the shape the learner expects C to have (N x M with W first, M x N
    with x first), k = K, and the leading dimensions read off the row-major tensors
    (lda = ldb = K, the row length of x and of W; ldc = N, the row length of y).
    Calls equal to an earlier one are listed once. ``notes="p45"`` takes the common attempts
    for problem 45 instead (its GEMM1: x @ W1.T).
    """
    M, K, N = _check_linear_sizes(batch, in_features, out_features)
    if notes not in ("p12", "p45"):
        raise ValueError(f"notes={notes!r} names no set of common attempts; valid: p12, p45")
    calls = _notes_attempts_p12(M, K, N) if notes == "p12" else _notes_attempts_p45(M, K, N)
    for a, b, m, n in (("W", "x", N, M), ("x", "W", M, N)):
        for transa in ("N", "T"):
            for transb in ("N", "T"):
                call = GemmCall(transa, transb, m=m, n=n, k=K, lda=K, ldb=K, ldc=N, a=a, b=b)
                if all(call != seen for _, seen in calls):
                    calls.append((f"naive guess: A = {a}, B = {b}, transa = {transa}, "
                                  f"transb = {transb}, m = {m}, n = {n}, k = {K}, "
                                  f"lda = ldb = {K}, ldc = {N}", call))
    return calls


def _notes_attempts_p45(M: int, K: int, N: int) -> list[tuple[str, GemmCall]]:
    """The distinct calls people commonly try for h = x @ W1.T (M = batch, K = input_size,
    N = hidden_size), in cublasSgemm's argument order."""
    return [
        # Lines ~1019-1064 and ~1111: (T, N, batch, hidden, input, x, input, w1, input, h, hidden),
        # declared correct at ~1064, rejected at ~1074-1091.
        ("common attempt 1 (p45): (T, N, batch, hidden, input, x, input, w1, input, h, hidden)",
         GemmCall("T", "N", m=M, n=N, k=K, lda=K, ldb=K, ldc=N, a="x", b="W")),
        # Lines ~1094-1099 and ~1194, "the standard trick" / "known formula".
        ("common attempt 2 (p45): (N, T, hidden, batch, input, w1, input, x, input, h, hidden)",
         GemmCall("N", "T", m=N, n=M, k=K, lda=K, ldb=K, ldc=N, a="W", b="x")),
        # Line ~1211, "I think I found it": ldc = m = batch.
        ("common attempt 3 (p45): (T, N, batch, hidden, input, x, input, w1, input, h, batch)",
         GemmCall("T", "N", m=M, n=N, k=K, lda=K, ldb=K, ldc=M, a="x", b="W")),
        # Lines ~1220-1228, operands swapped, each declared "no".
        ("common attempt 4 (p45): (T, T, hidden, batch, input, w1, input, x, input, h, hidden)",
         GemmCall("T", "T", m=N, n=M, k=K, lda=K, ldb=K, ldc=N, a="W", b="x")),
        ("common attempt 5 (p45): (N, N, hidden, batch, input, w1, input, x, input, h, hidden)",
         GemmCall("N", "N", m=N, n=M, k=K, lda=K, ldb=K, ldc=N, a="W", b="x")),
        # Lines ~943 (first draft) and ~1266-1279 (final, verified): the correct call.
        ("common attempt 6 (p45), the correct call: "
         "(T, N, hidden, batch, input, w1, input, x, input, h, hidden)",
         derive_linear_gemm(M, K, N)),
    ]


def _notes_attempts_p12(M: int, K: int, N: int) -> list[tuple[str, GemmCall]]:
    """The calls people commonly try for problem 12, in order (M = batch, K = in, N = out)."""
    return [
        # Note lines 88-92: "cublasDgemm with opA=CUBLAS_OP_N, opB=CUBLAS_OP_T: A is MxK (x),
        # B is NxK (weight), C is MxN (output)". No leading dimensions are written; we use
        # the row lengths of those row-major tensors (K, K, N).
        ("common attempt 1: opA=CUBLAS_OP_N, opB=CUBLAS_OP_T, A = x [M, K], B = weight [N, K], "
         "C = M x N",
         GemmCall("N", "T", m=M, n=N, k=K, lda=K, ldb=K, ldc=N, a="x", b="W")),
        # Note lines 172-176: "if we pass weight with no transpose, it's K x N ... x with no
        # transpose is K x M ... C_cublas = alpha * B_cublas * A_cublas", C_cublas N x M:
        # weight first, both CUBLAS_OP_N, m = N, n = M, lda = ldb = K, ldc = N.
        ("common attempt 2: weight and x both with no transpose (CUBLAS_OP_N, CUBLAS_OP_N), "
         "weight first, C = N x M",
         GemmCall("N", "N", m=N, n=M, k=K, lda=K, ldb=K, ldc=N, a="W", b="x")),
        # Note lines 159 and 181-197: cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K,
        # &alpha, weight, K, x, K, &beta, output, N) with `float beta = 1.0f` (line 159) on a
        # torch::empty output: "Currently beta is 1 and output is uninitialized!" (line 196).
        ("common attempt 3: CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, weight, K, x, K, output, N "
         "with beta = 1.0f on torch::empty output",
         GemmCall("T", "N", m=N, n=M, k=K, lda=K, ldb=K, ldc=N, a="W", b="x", beta=1.0)),
        # Note lines 333 and 462: the same call with `float beta = 0.0f`: the correct one.
        ("common attempt 4 (final): CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, weight, K, x, K, "
         "output, N with beta = 0.0f",
         derive_linear_gemm(M, K, N)),
    ]


def describe_call(call: GemmCall, correct: GemmCall) -> str:
    """What a ``cublasSgemm`` call (:class:`GemmCall`) does differently from
    the correct one, in words: the operand order, the transposes, m/n, the leading dimension
    of C, beta."""
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


def wrong_calls_table(batch: int, in_features: int, out_features: int) -> "pd.DataFrame":
    """Every call of :func:`candidate_calls` and two more people try (x first with ``ldc = M``;
    the derived call with only its transposes swapped), each run on a real column-major BLAS
    (:func:`verify_linear_gemm`): what it changes against the derived call, the call, whether it
    is right, and what it computes instead (found from its output, not written by hand)."""
    import pandas as pd  # noqa: PLC0415 - pandas only for the table

    M, K, N = _check_linear_sizes(batch, in_features, out_features)
    right = derive_linear_gemm(M, K, N)
    tries = [c for _, c in candidate_calls(M, K, N)]
    tries += [c for c in (GemmCall("T", "N", m=M, n=N, k=K, lda=K, ldb=K, ldc=M, a="x", b="W"),
                          GemmCall("N", "T", m=N, n=M, k=K, lda=K, ldb=K, ldc=N, a="W", b="x"))
              if c not in tries]
    verdicts = [verify_linear_gemm(c, batch=M, in_features=K, out_features=N) for c in tries]
    return pd.DataFrame({"against the derived call": [describe_call(c, right) for c in tries],
                         "call": [c.to_c().splitlines()[0] for c in tries],
                         "correct": [v.ok for v in verdicts], "what it computes": [v.computes for v in verdicts]})
