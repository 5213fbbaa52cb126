"""The row-major / column-major mapping of fusedkit.layout, proved on a real Fortran BLAS."""

from __future__ import annotations

import ctypes
import dataclasses
import math
import re
import shutil
import subprocess

import numpy as np
import pytest
import scipy.linalg.cython_blas as cython_blas
from hypothesis import given, settings, strategies as st

from fusedkit.layout import (
    BlasArgumentError,
    BufferOverrunError,
    GemmCall,
    candidate_calls,
    derive_linear_gemm,
    draw_linear_buffers,
    run_colmajor_sgemm,
    verify_linear_gemm,
)

# KernelBench level 2 problem 12: batch 1024, in 8192, out 8192.
KB = dict(batch=1024, in_features=8192, out_features=8192)


def fresh_seed() -> int:
    return int(np.random.SeedSequence().entropy % 2**63)


# -- a second, independent route to the same Fortran SGEMM -------------------------------
# SciPy exports its BLAS's `sgemm` as a C function pointer (scipy.linalg.cython_blas). Called
# through ctypes it takes raw pointers and leading dimensions, like cuBLAS does, so it
# checks both the strided views of run_colmajor_sgemm and validate()'s reading of xerbla.

def _raw_sgemm():
    capsule = cython_blas.__pyx_capi__["sgemm"]
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    i, f = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_float)
    proto = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, i, i, i, f, f, i, f, i, f, f, i)
    return proto(get(capsule, name(capsule)))


RAW_SGEMM = _raw_sgemm()
LIBC = ctypes.CDLL(None)


def raw_sgemm(call: GemmCall, buffers: dict[str, np.ndarray]) -> np.ndarray:
    """Fortran SGEMM on raw pointers; only called when the buffers are large enough."""
    out = buffers["y"].copy()
    ints = [ctypes.c_int(v) for v in (call.m, call.n, call.k, call.lda, call.ldb, call.ldc)]
    fptr = lambda arr: arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float))  # noqa: E731
    RAW_SGEMM(call.transa.encode(), call.transb.encode(), *map(ctypes.byref, ints[:3]),
              ctypes.byref(ctypes.c_float(call.alpha)), fptr(buffers[call.a]), ctypes.byref(ints[3]),
              fptr(buffers[call.b]), ctypes.byref(ints[4]), ctypes.byref(ctypes.c_float(call.beta)),
              fptr(out), ctypes.byref(ints[5]))
    return out


def index_formula_sgemm(call: GemmCall, buffers: dict[str, np.ndarray]) -> np.ndarray:
    """C = alpha op(A) op(B) + beta C from the BLAS addressing rule a[i + j*ld], in float64."""
    def colmajor(flat, rows, cols, ld):
        i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        return flat.astype(np.float64)[i + j * ld]
    a = colmajor(buffers[call.a], *call.a_stored, call.lda)
    b = colmajor(buffers[call.b], *call.b_stored, call.ldb)
    a = a if call.transa == "N" else a.T
    b = b if call.transb == "N" else b.T
    out = buffers["y"].astype(np.float64)
    i, j = np.meshgrid(np.arange(call.m), np.arange(call.n), indexing="ij")
    out[i + j * call.ldc] = call.alpha * (a @ b) + call.beta * out[i + j * call.ldc]
    return out


# -- derivation ------------------------------------------------------------------------

def test_derive_kernelbench_sizes():
    call = derive_linear_gemm(**KB)
    assert (call.transa, call.transb, call.m, call.n, call.k) == ("T", "N", 8192, 1024, 8192)
    assert (call.lda, call.ldb, call.ldc, call.a, call.b) == (8192, 8192, 8192, "W", "x")
    assert (call.alpha, call.beta) == (1.0, 0.0)
    assert call.to_c() == ("cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, 8192, 1024, 8192, "
                           "&alpha, W, 8192, x, 8192, &beta, y, 8192)")
    assert call.validate() == []
    # It touches each buffer exactly to its end: W (N*K), x (M*K), y (M*N) floats.
    assert call.floats_touched() == {"A": 8192 * 8192, "B": 1024 * 8192, "C": 1024 * 8192}


def test_derive_non_square_sizes():
    call = derive_linear_gemm(batch=16384, in_features=2048, out_features=4096)  # problem 45
    assert (call.m, call.n, call.k, call.lda, call.ldb, call.ldc) == (4096, 16384, 2048, 2048, 2048, 4096)


def test_small_example_proved_on_real_blas():
    M, K, N = 2, 3, 4
    seed = fresh_seed()
    buffers = draw_linear_buffers(M, K, N, seed)
    x = buffers["x"].reshape(M, K).astype(np.float64)
    w = buffers["W"].reshape(N, K).astype(np.float64)
    y = x @ w.T
    # The fact the derivation rests on: a row-major (R, C) buffer read column-major is (C, R) = transpose.
    assert np.array_equal(buffers["x"].reshape((K, M), order="F"), buffers["x"].reshape(M, K).T)
    assert np.array_equal(buffers["W"].reshape((K, N), order="F"), buffers["W"].reshape(N, K).T)

    out = run_colmajor_sgemm(derive_linear_gemm(M, K, N), buffers)
    assert out.shape == (M * N,) and out.dtype == np.float32
    np.testing.assert_allclose(out.reshape(M, N), y, rtol=1e-6, atol=1e-7)      # row-major: y
    np.testing.assert_allclose(out.reshape((N, M), order="F"), y.T, rtol=1e-6, atol=1e-7)  # BLAS's C = y.T
    # The same call on the raw-pointer BLAS gives the same bits.
    assert np.array_equal(raw_sgemm(derive_linear_gemm(M, K, N), buffers), out)
    # The inputs are untouched, the garbage-filled y included.
    assert np.array_equal(draw_linear_buffers(M, K, N, seed)["y"], buffers["y"])


def test_kernelbench_shape_ratio_verifies():
    # KernelBench's shapes scaled down by 64: M = 16, K = N = 128 (K == N, M < N, like 1024 x 8192 x 8192).
    verdict = verify_linear_gemm(derive_linear_gemm(16, 128, 128), 16, 128, 128)
    assert verdict.ok and verdict.rel_error < 1e-6, verdict


@settings(deadline=None, max_examples=50)
@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 64), st.integers(0, 2**63 - 1))
def test_derived_call_verifies_on_any_shape(batch, in_features, out_features, seed):
    verdict = verify_linear_gemm(derive_linear_gemm(batch, in_features, out_features),
                                 batch, in_features, out_features, seed=seed)
    assert verdict.ok, verdict
    # Relative to |y| a sum that nearly cancels can err by more than 1e-5 (1 x 20 x 1, seed 0:
    # 4.1e-5); the absolute error stays at fp32 rounding of |x| . |W|.
    assert verdict.max_abs_error < 1e-5
    assert verdict.computes.endswith("correct") and verdict.seed == seed


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to compile the C call")
def test_to_c_is_valid_c(tmp_path):
    # cublas_v2.h is not installed here; declare the prototype exactly as cuBLAS does.
    call = derive_linear_gemm(3, 5, 7)
    src = tmp_path / "call.c"
    src.write_text(
        "typedef struct cublasContext *cublasHandle_t;\n"
        "typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;\n"
        "int cublasSgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,\n"
        "                const float *, const float *, int, const float *, int, const float *,\n"
        "                float *, int);\n"
        "void f(cublasHandle_t handle, const float *W, const float *x, float *y) {\n"
        "  const float alpha = 1.0f, beta = 0.0f;\n"
        f"  {call.to_c()};\n}}\n")
    done = subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-fsyntax-only", str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# -- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["batch", "in_features", "out_features"])
@pytest.mark.parametrize("value, error", [(0, ValueError), (-3, ValueError), (2**31, ValueError),
                                          (True, TypeError), (4.0, TypeError), ("8", TypeError),
                                          (None, TypeError)])
def test_bad_sizes_name_parameter_value_and_range(name, value, error):
    sizes = dict(batch=2, in_features=3, out_features=4)
    sizes[name] = value
    for fn in (derive_linear_gemm, candidate_calls):
        with pytest.raises(error) as info:
            fn(**sizes)
        message = str(info.value)
        assert name in message and repr(value) in message and "[1, 2147483647]" in message
    with pytest.raises(error, match=name):
        verify_linear_gemm(derive_linear_gemm(2, 3, 4), **sizes)


def test_numpy_integers_are_accepted():
    assert derive_linear_gemm(np.int64(2), np.int32(3), np.uint16(4)) == derive_linear_gemm(2, 3, 4)


@pytest.mark.parametrize("field, value, error", [("m", 2.0, TypeError), ("lda", True, TypeError),
                                                 ("a", "y", ValueError), ("transa", 1, TypeError),
                                                 ("beta", "1", TypeError)])
def test_gemmcall_rejects_wrong_types(field, value, error):
    with pytest.raises(error, match=field):
        dataclasses.replace(derive_linear_gemm(2, 3, 4), **{field: value})


def test_run_rejects_bad_buffers():
    call = derive_linear_gemm(2, 3, 4)
    buffers = draw_linear_buffers(2, 3, 4, fresh_seed())
    with pytest.raises(KeyError, match="y"):
        run_colmajor_sgemm(call, {"x": buffers["x"], "W": buffers["W"]})
    with pytest.raises(TypeError, match="float64"):
        run_colmajor_sgemm(call, {**buffers, "x": buffers["x"].astype(np.float64)})
    with pytest.raises(ValueError, match="contiguous"):
        run_colmajor_sgemm(call, {**buffers, "W": buffers["W"].reshape(4, 3).T})


# -- BLAS's argument rules ---------------------------------------------------------------

def test_lda_too_small_is_reported_not_crashed():
    call = dataclasses.replace(derive_linear_gemm(2, 3, 4), lda=2)   # A = W stored 3 x 4: lda >= 3
    violations = call.validate()
    assert violations == ["parameter 8 (lda = 2) is illegal: lda must be >= max(1, k) = 3, because "
                          "transa = 'T' stores A as k x m = 3 x 4"]
    with pytest.raises(BlasArgumentError, match="parameter 8"):
        run_colmajor_sgemm(call, draw_linear_buffers(2, 3, 4, fresh_seed()))
    verdict = verify_linear_gemm(call, 2, 3, 4)
    assert not verdict.ok and math.isnan(verdict.rel_error) and math.isnan(verdict.max_abs_error)
    assert verdict.computes == "BLAS rejects the arguments: " + violations[0]


def test_validate_lists_every_violation_in_xerbla_order():
    call = GemmCall("X", "N", m=-1, n=2, k=3, lda=0, ldb=1, ldc=0, a="W", b="x")
    numbers = [int(re.match(r"parameter (\d+)", v).group(1)) for v in call.validate()]
    assert numbers == [1, 3, 8, 10, 13]


def _xerbla_parameter(call: GemmCall, capfd) -> int | None:
    """The parameter number real Fortran SGEMM's xerbla reports for ``call`` (None: accepted)."""
    capfd.readouterr()
    # Far more than any call below can touch (sizes and leading dimensions are <= 4).
    buffers = {name: np.random.default_rng().random(1024, dtype=np.float32) for name in ("x", "W", "y")}
    raw_sgemm(call, buffers)
    LIBC.fflush(None)
    said = "".join(capfd.readouterr())
    found = re.search(r"parameter number\s+(\d+)", said)
    return int(found.group(1)) if found else None


@pytest.mark.parametrize("changes", [
    {}, {"lda": 2}, {"ldb": 1}, {"ldc": 3}, {"m": -1}, {"k": -2}, {"transb": "Q"},
    {"transa": "N"}, {"transa": "N", "lda": 4}, {"transb": "T"}, {"transb": "T", "ldb": 2},
    {"lda": 2, "ldc": 1},
])
def test_validate_agrees_with_real_xerbla(changes, capfd):
    call = dataclasses.replace(derive_linear_gemm(2, 3, 4), **changes)
    violations = call.validate()
    first = int(re.match(r"parameter (\d+)", violations[0]).group(1)) if violations else None
    assert _xerbla_parameter(call, capfd) == first, violations


# -- running any call on the real BLAS ----------------------------------------------------

@settings(deadline=None, max_examples=40)
@given(st.sampled_from("NT"), st.sampled_from("NT"), st.integers(1, 9), st.integers(1, 9),
       st.integers(1, 9), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3),
       st.sampled_from([1.0, -0.5]), st.sampled_from([0.0, 1.0, 2.5]), st.integers(0, 2**32))
def test_strided_views_match_raw_pointer_blas(ta, tb, m, n, k, pad_a, pad_b, pad_c, alpha, beta, seed):
    rows_a = m if ta == "N" else k
    rows_b = k if tb == "N" else n
    call = GemmCall(ta, tb, m, n, k, lda=rows_a + pad_a, ldb=rows_b + pad_b, ldc=m + pad_c,
                    a="W", b="x", alpha=alpha, beta=beta)
    # Column j of a column-major matrix starts at j*ld: the last element is at ld*(cols-1) + rows - 1.
    need = {"A": call.lda * ((k if ta == "N" else m) - 1) + rows_a,
            "B": call.ldb * ((n if tb == "N" else k) - 1) + rows_b,
            "C": call.ldc * (n - 1) + m}
    assert call.floats_touched() == need
    rng = np.random.default_rng(seed)
    buffers = {"W": rng.random(need["A"], dtype=np.float32) + 0.5,
               "x": rng.random(need["B"], dtype=np.float32) + 0.5,
               "y": rng.random(need["C"], dtype=np.float32) + 0.5}
    out = run_colmajor_sgemm(call, buffers)
    np.testing.assert_allclose(out, raw_sgemm(call, buffers), rtol=1e-6)
    np.testing.assert_allclose(out, index_formula_sgemm(call, buffers), rtol=1e-5, atol=1e-5)


def test_beta_zero_never_reads_y():
    M, K, N = 3, 4, 5
    buffers = draw_linear_buffers(M, K, N, fresh_seed())
    buffers["y"][:] = np.nan                       # whatever torch.empty left there
    out = run_colmajor_sgemm(derive_linear_gemm(M, K, N), buffers)
    assert np.all(np.isfinite(out))


def test_overrun_is_reported_with_sizes():
    M, K, N = 2, 3, 4
    call = dataclasses.replace(derive_linear_gemm(M, K, N), n=M + 1)   # one row of x too many
    assert call.validate() == []                                       # BLAS cannot know
    with pytest.raises(BufferOverrunError,
                       match=r"invalid: reads past the end of x's buffer \(needs 9 floats, has 6\)"):
        run_colmajor_sgemm(call, draw_linear_buffers(M, K, N, fresh_seed()))
    verdict = verify_linear_gemm(call, M, K, N)
    assert not verdict.ok and verdict.computes.startswith("reads past the end of x's buffer (needs 9")
    wide = dataclasses.replace(derive_linear_gemm(M, K, N), ldc=N + 1)
    assert "writes past the end of y's buffer (needs 9 floats, has 8)" in verify_linear_gemm(wide, M, K, N).computes


# -- what wrong calls compute -------------------------------------------------------------

def test_candidates_cover_the_grid_and_the_unwritten_output():
    calls = candidate_calls(4, 3, 4)
    assert len(calls) == len(set(c for _, c in calls)) == 9
    grid = {(c.a, c.transa, c.transb) for _, c in calls if c.beta == 0}
    assert grid == {(a, ta, tb) for a in "Wx" for ta in "NT" for tb in "NT"}
    assert calls[0][1] == dataclasses.replace(derive_linear_gemm(4, 3, 4), beta=1.0)
    assert derive_linear_gemm(4, 3, 4) in [c for _, c in calls]


@pytest.mark.parametrize("shape", [(4, 3, 4), (3, 5, 5), (4, 4, 4), (5, 4, 3), (16, 128, 128), (7, 2, 9)])
def test_every_wrong_candidate_is_caught(shape):
    correct = derive_linear_gemm(*shape)
    seed = fresh_seed()
    texts = []
    for label, call in candidate_calls(*shape):
        verdict = verify_linear_gemm(call, *shape, seed=seed)
        assert verdict.ok == (call == correct), (label, verdict)
        if verdict.ok:
            continue
        text = verdict.computes
        assert text and "correct" not in text, (label, verdict)
        # Computed, not canned: each text carries this call's own numbers or product.
        if text.startswith("BLAS rejects the arguments: parameter"):
            for param, value in re.findall(r"\((l\w\w) = (\d+)\)", text):
                assert getattr(call, param) == int(value), (label, text)
        elif " past the end of " in text:
            needed = int(re.search(r"needs (\d+) floats", text).group(1))
            assert needed in call.floats_touched().values(), (label, text)
        else:
            texts.append(text)
    # Different wrong products get different descriptions.
    assert len(set(texts)) == len(texts), texts


def test_transpose_is_identified():
    # M == N: "A = x, transa = T, B = W, transb = N, m = M, n = N, ldc = N" writes y column-major.
    (label, call), = [(lb, c) for lb, c in candidate_calls(4, 3, 4)
                      if (c.a, c.transa, c.transb) == ("x", "T", "N")]
    verdict = verify_linear_gemm(call, 4, 3, 4)
    assert not verdict.ok and verdict.rel_error > 0.1
    assert verdict.computes.startswith("y's transpose: the buffer holds y.T = W @ x.T"), verdict


def test_no_transpose_and_beta_one_are_identified():
    calls = dict(candidate_calls(3, 5, 5))                       # K == N, as at KernelBench sizes
    no_t = verify_linear_gemm(calls["A = W, B = x, transa = N, transb = N"], 3, 5, 5)
    assert no_t.computes.startswith("x @ W (W not transposed)"), no_t
    beta = verify_linear_gemm(calls["beta = 1 on an output never written (torch.empty)"], 3, 5, 5)
    assert not beta.ok and beta.computes.startswith("y = x @ W.T, plus beta = 1 times whatever y's buffer held")


def test_swapped_roles_and_unrelated_products_are_named():
    correct = derive_linear_gemm(4, 4, 4)
    # A = x's buffer (x.T to BLAS), op T: x; B = W's (W.T), op N: W.T. C = x @ W.T = y, but
    # column-major with ldc = 4: y's buffer then holds y.T row-major.
    swapped = dataclasses.replace(correct, a="x", b="W")
    assert verify_linear_gemm(swapped, 4, 4, 4).computes.startswith("y's transpose")
    both_n = dataclasses.replace(correct, transa="N", a="x", b="W")   # x.T @ W.T, column-major
    assert verify_linear_gemm(both_n, 4, 4, 4).computes.startswith(
        "W @ x (operands' roles swapped: W first, x not transposed)")
    scrambled = dataclasses.replace(correct, lda=5, m=3)           # valid for BLAS, reads W askew
    text = verify_linear_gemm(scrambled, 4, 4, 4).computes
    assert text.startswith("an unrelated product (rel. error "), text
    doubled = dataclasses.replace(correct, alpha=2.0)
    assert verify_linear_gemm(doubled, 4, 4, 4).computes == "alpha = 2 times y = x @ W.T"


def test_a_broken_call_cannot_pass():
    # The check itself must be able to fail: flip each argument of the right call in turn.
    correct = derive_linear_gemm(6, 5, 7)
    broken = [dataclasses.replace(correct, transa="N"), dataclasses.replace(correct, transb="T"),
              dataclasses.replace(correct, a="x", b="W"), dataclasses.replace(correct, m=6, n=7, ldc=6),
              dataclasses.replace(correct, ldb=6), dataclasses.replace(correct, beta=0.5)]
    for call in broken:
        verdict = verify_linear_gemm(call, 6, 5, 7)
        assert not verdict.ok, (call, verdict)


def test_the_wrong_calls_table_runs_each_call_on_blas():
    from fusedkit import layout

    table = layout.wrong_calls_table(5, 7, 3)
    assert table["correct"].sum() == 1 and len(table) == 10   # the grid, beta = 1, x first with ldc = M
    assert (table.loc[table["correct"], "against the derived call"] == "the derived call").all()
    assert table["what it computes"].str.contains("transpose").any()


def test_describe_call_in_words():
    from fusedkit import layout

    right = layout.derive_linear_gemm(5, 7, 3)
    swapped = layout.GemmCall("T", "N", m=5, n=3, k=7, lda=7, ldb=7, ldc=5, a="x", b="W")
    text = layout.describe_call(swapped, right)
    assert "operands" in text and "ldc = 5" in text
    assert layout.describe_call(right, right) == "the derived call"
