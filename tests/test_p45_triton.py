"""Problem 45, steps 04 (Triton GEMMs + partial logsumexp, three dot precisions) and 05
(the same pipeline on fp16x3 splits).

Without a GPU the kernels run in Triton's interpreter on CPU tensors. The interpreter
ignores ``input_precision`` and computes every dot in fp32 with numpy (and step 05 adds
its hi*hi chunks with a plain add), so CPU runs check the logic (indexing, masks, the
partial logsumexp and its combine, the h split, padding), not precision: every variant
must then be fp32-accurate. Tests marked ``gpu`` check each variant's precision on real
tensor cores. Inputs are fresh each run; the seed is in every failure message.
"""

from __future__ import annotations

import os

import torch

# The interpreter must be chosen before the kernel modules are loaded: triton.jit decides
# at decoration time whether it builds a GPU kernel or an interpreted one.
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import fusedkit  # noqa: E402,F401  (settles the run mode before triton is imported)

import math  # noqa: E402
import secrets  # noqa: E402

import pytest  # noqa: E402

pytest.importorskip("triton")

from fusedkit.check import rel_error  # noqa: E402
from fusedkit.kernels import load_step  # noqa: E402

k05 = load_step("p45", "05_triton_fp16x3_lse.py")
k04 = k05._step04  # the very module step 05 reuses (checks, helpers, combine)

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
INTERPRET = k04.INTERPRET
SEED = secrets.randbelow(2**31 - 10_000)  # fresh inputs every run; quoted in messages

VARIANTS = (*k04.PRECISIONS, "fp16x3")
# The interpreter computes every variant in fp32; on a GPU the small-shape logic tests
# allow tf32 its 10-bit mantissa.
LOGIC_TOL = {v: (1e-3 if (v == "tf32" and not INTERPRET) else 1e-5) for v in VARIANTS}
# (M, K, H, N): single elements, tails in every dim, K and H below / above one BLOCK_K,
# N below, between and above BLOCK_N (32 in the interpreter): several partial tiles.
SHAPES = [(1, 1, 1, 1), (3, 5, 7, 33), (17, 33, 65, 19), (19, 64, 40, 130)]


def make_inputs(m: int, k: int, h: int, n: int, seed: int, device: str = DEVICE):
    """x ~ U[0, 1) like KernelBench's get_inputs; weights and biases like nn.Linear's
    init, U(+-1/sqrt(fan_in))."""
    g = torch.Generator(device=device).manual_seed(seed)

    def uniform(*shape, bound):
        return (torch.rand(*shape, generator=g, device=device) * 2 - 1) * bound

    x = torch.rand(m, k, generator=g, device=device)
    w1, b1 = uniform(h, k, bound=1 / math.sqrt(k)), uniform(h, bound=1 / math.sqrt(k))
    w2, b2 = uniform(n, h, bound=1 / math.sqrt(h)), uniform(n, bound=1 / math.sqrt(h))
    return x, w1, b1, w2, b2


def logits64(x, w1, b1, w2, b2) -> torch.Tensor:
    h = torch.sigmoid(x.double() @ w1.double().T + b1.double())
    return h @ w2.double().T + b2.double()


def reference64(x, w1, b1, w2, b2) -> torch.Tensor:
    """The model in float64: the yardstick every variant's error is measured against."""
    return torch.logsumexp(logits64(x, w1, b1, w2, b2), dim=1)


def run_variant(variant: str, *args) -> torch.Tensor:
    if variant == "fp16x3":
        return k05.linear_sigmoid_linear_lse_fp16x3(*args)
    return k04.linear_sigmoid_linear_lse(*args, precision=variant)


def partial_lse(variant: str, x, w1, b1, w2, b2):
    """(pmax, psum, BLOCK_N) of the variant's GEMM2, h computed by its own GEMM1."""
    if variant == "fp16x3":
        pmax, psum = k05.linear_partial_lse_split(k05.linear_sigmoid_split(x, w1, b1), w2, b2)
        kernel = k05._fp16x3_linear_partial_lse_kernel
    else:
        h = k04.linear_sigmoid(x, w1, b1, variant)
        pmax, psum = k04.linear_partial_lse(h, w2, b2, variant)
        kernel = k04._linear_partial_lse_kernel
    return pmax, psum, kernel.best_config.kwargs["BLOCK_N"]


def tiles64(z: torch.Tensor, block_n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tile max and sum of exp(z - max) in float64, tiles of block_n columns."""
    maxes, sums = [], []
    for t0 in range(0, z.shape[1], block_n):
        zt = z[:, t0:t0 + block_n]
        mt = zt.amax(dim=1)
        maxes.append(mt)
        sums.append(torch.exp(zt - mt[:, None]).sum(dim=1))
    return torch.stack(maxes, dim=1), torch.stack(sums, dim=1)


# ---------------------------------------------------------------------------------------
# The whole pipeline (interpreter on the CPU, or the GPU when there is one)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_float64_on_odd_sizes(variant, shape):
    seed = SEED + hash(shape) % 1000
    args = make_inputs(*shape, seed=seed)
    out = run_variant(variant, *args)
    assert out.shape == (shape[0],) and out.dtype == torch.float32
    assert torch.isfinite(out).all(), f"{variant} {shape} seed {seed}: NaN/inf in out"
    err = rel_error(out, reference64(*args))
    assert err < LOGIC_TOL[variant], f"{variant} {shape} seed {seed}: rel. error {err:.2e}"


@pytest.mark.parametrize("variant", ["tf32x3", "fp16x3"])
def test_non_contiguous_inputs_read_through_strides(variant):
    m, k, h, n = 9, 20, 36, 40
    args0 = make_inputs(m, k, h, n, seed=SEED + 1)
    x0, w10, b10, w20, b20 = args0
    x = x0.T.contiguous().T  # column-major: stride (1, m)
    w1 = torch.zeros(h, 2 * k, device=DEVICE)[:, ::2]  # every other column: stride (2k, 2)
    w1.copy_(w10)
    w2 = w20.T.contiguous().T
    b1 = torch.zeros(2 * h, device=DEVICE)[::2]
    b1.copy_(b10)
    b2 = torch.zeros(3 * n, device=DEVICE)[::3]
    b2.copy_(b20)
    assert not any(t.is_contiguous() for t in (x, w1, b1, w2, b2))
    err = rel_error(run_variant(variant, x, w1, b1, w2, b2), reference64(*args0))
    assert err < LOGIC_TOL[variant], f"{variant} seed {SEED + 1}: rel. error {err:.2e}"


# ---------------------------------------------------------------------------------------
# The partial logsumexp and the combine
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["tf32x3", "fp16x3"])
def test_partials_per_tile_with_a_masked_tail(variant):
    # N = 130: four full tiles of 32 in the interpreter and a tail of 2 valid columns
    # (on a GPU 128 or 256 wide: one full tile and a short one, or a single short one).
    # A tail that summed its masked columns would show in its psum.
    m, k, h, n = 13, 24, 40, 130
    args = make_inputs(m, k, h, n, seed=SEED + 2)
    pmax, psum, block_n = partial_lse(variant, *args)
    t = math.ceil(n / block_n)
    assert pmax.shape == psum.shape == (m, t), f"expected (M, T) = ({m}, {t}) for BLOCK_N {block_n}"
    assert pmax.dtype == psum.dtype == torch.float32
    ref_max, ref_sum = tiles64(logits64(*args), block_n)
    tol = LOGIC_TOL[variant]
    assert torch.allclose(pmax.double(), ref_max, rtol=tol, atol=tol), f"seed {SEED + 2}: pmax"
    assert torch.allclose(psum.double(), ref_sum, rtol=tol, atol=tol), f"seed {SEED + 2}: psum"
    tail = n - (t - 1) * block_n  # valid columns of the last tile
    assert ((psum >= 1 - 1e-5) & (psum <= block_n + 1e-3)).all()
    assert (psum[:, -1] <= tail + 1e-3).all(), "the tail tile summed columns past N"


@pytest.mark.parametrize("variant", ["tf32", "fp16x3"])
@pytest.mark.parametrize("case", ["scaled by 100", "shifted by -1000", "shifted by +500"])
def test_large_and_negative_logits_stay_finite(variant, case):
    # Logits of +-hundreds: exp(z) alone would overflow fp32 beyond 88 and underflow to 0
    # below -103; the per-tile max and the combine's rescale keep every exponent <= 0.
    m, k, h, n = 11, 16, 24, 70
    x, w1, b1, w2, b2 = make_inputs(m, k, h, n, seed=SEED + 3)
    if case == "scaled by 100":
        w2, b2 = w2 * 100, b2 * 100
    else:
        b2 = b2 + (-1000.0 if "-" in case else 500.0)
    ref = reference64(x, w1, b1, w2, b2)
    out = run_variant(variant, x, w1, b1, w2, b2)
    assert torch.isfinite(out).all(), f"{variant} {case} seed {SEED + 3}: {out}"
    err = rel_error(out, ref)
    assert err < LOGIC_TOL[variant], f"{variant} {case} seed {SEED + 3}: rel. error {err:.2e}"


@pytest.mark.parametrize("variant", ["ieee", "fp16x3"])
def test_row_whose_max_sits_in_one_tile(variant):
    # One column of the third tile dominates every row by ~8: the other tiles' sums must be
    # rescaled by exp(pmax - M) ~ e**-8 (not dropped, not overflowed) for out to match.
    m, k, h, n = 7, 12, 20, 100
    x, w1, b1, w2, b2 = make_inputs(m, k, h, n, seed=SEED + 4)
    pmax, _, block_n = partial_lse(variant, x, w1, b1, w2, b2)
    col = min(2 * block_n + 1, n - 1)
    b2 = b2.clone()
    b2[col] += 8.0
    pmax, psum, _ = partial_lse(variant, x, w1, b1, w2, b2)
    z = logits64(x, w1, b1, w2, b2)
    assert (z.argmax(dim=1) == col).all()
    assert (pmax.argmax(dim=1) == col // block_n).all()
    out = k04.combine_lse(pmax, psum)
    ref = torch.logsumexp(z, dim=1)
    assert rel_error(out, ref) < LOGIC_TOL[variant], f"seed {SEED + 4}"
    # The other tiles still count: out exceeds the dominant logit by log(1 + rest), ~0.03.
    gap, ref_gap = out.double() - z[:, col], ref - z[:, col]
    assert (ref_gap > 1e-2).all() and torch.allclose(gap, ref_gap, rtol=1e-3, atol=1e-5), f"seed {SEED + 4}"



def test_combine_matches_float64_on_hand_made_partials():
    # T = 37 tiles spans three BLOCK_T = 16 chunks of the combine's loops; a sliced
    # (non-contiguous) pmax, maxima spread over +-300, one row's max in its last tile.
    g = torch.Generator(device=DEVICE).manual_seed(SEED + 5)
    m, t = 133, 37
    pmax = (torch.rand(m, 2 * t, generator=g, device=DEVICE) * 600 - 300)[:, ::2]
    psum = torch.rand(m, t, generator=g, device=DEVICE) * 100 + 1
    pmax[5, -1] = 400.0
    assert not pmax.is_contiguous()
    out = k04.combine_lse(pmax, psum)
    ref = torch.logsumexp(pmax.double() + torch.log(psum.double()), dim=1)
    assert out.shape == (m,) and torch.isfinite(out).all()
    assert rel_error(out, ref) < 1e-6, f"seed {SEED + 5}"
    assert abs(out[5].item() - ref[5].item()) < 1e-3
    with pytest.raises(ValueError, match=r"^psum.shape=\(133, 36\): it must equal pmax.shape"):
        k04.combine_lse(pmax, psum[:, :-1])


# ---------------------------------------------------------------------------------------
# Step 05's split of h
# ---------------------------------------------------------------------------------------
def test_h_split_reconstructs_sigmoid_and_pads_with_zeros():
    m, k, h, n = 10, 30, 70, 5  # H = 70: padded to 128, so 58 zero columns
    x, w1, b1, _, _ = make_inputs(m, k, h, n, seed=SEED + 6)
    w1 = w1 * 8  # logits of +-10 or so: h spans ~4e-5 .. 1 - 4e-5
    s = k05.linear_sigmoid_split(x, w1, b1)
    assert s.hi.shape == s.lo.shape == (m, 128) and s.hi.dtype == s.lo.dtype == torch.float16
    assert (s.hi[:, h:] == 0).all() and (s.lo[:, h:] == 0).all()
    assert (s.inv_scale == 2.0**-14).all()
    assert s.hi.float().abs().max() <= 2**14  # sigmoid <= 1: far from fp16's 65504
    hi, lo = s.hi[:, :h].double(), s.lo[:, :h].double()
    rec = (hi + lo / 2048) * 2.0**-14
    ref = torch.sigmoid(x.double() @ w1.double().T + b1.double())
    # fp32 logits of +-10 carry ~1e-6 absolute error, so h ~1e-6 relative; the split adds 2**-22.
    assert ((rec - ref).abs() <= 1e-5 * ref + 2.0**-40).all(), f"seed {SEED + 6}"
    # hi is the nearest fp16 to hs = h * 2**14: lo / 2048 is within half an ulp of hi.
    ulp = torch.ldexp(torch.ones_like(hi), torch.frexp(hi).exponent - 11).clamp(min=2.0**-24)
    assert ((lo.abs() / 2048) <= ulp / 2).all() and (lo != 0).any(), f"seed {SEED + 6}"


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf in numpy
def test_fp16x3_non_finite_x_is_rejected_or_propagated():
    x, w1, b1, w2, b2 = make_inputs(5, 8, 12, 9, seed=SEED + 7)
    x[3, 2] = float("nan")
    with pytest.raises(ValueError, match=r"^x contains inf or NaN \(first in row 3\)"):
        k05.linear_sigmoid_linear_lse_fp16x3(x, w1, b1, w2, b2, check_finite=True)
    out = k05.linear_sigmoid_linear_lse_fp16x3(x, w1, b1, w2, b2)  # default: no host sync
    assert torch.isnan(out[3]) and torch.isfinite(out[[0, 1, 2, 4]]).all()


# ---------------------------------------------------------------------------------------
# Input checks: one clear line naming the parameter
# ---------------------------------------------------------------------------------------
BAD_INPUTS = [
    ("x not a tensor", lambda a: ([[1.0]], *a[1:]), TypeError, r"^x must be a torch.Tensor"),
    ("x float64", lambda a: (a[0].double(), *a[1:]), TypeError, r"^x.dtype=torch.float64"),
    ("w2 float16", lambda a: (*a[:3], a[3].half(), a[4]), TypeError, r"^w2.dtype=torch.float16"),
    ("b1 int", lambda a: (a[0], a[1], a[2].int(), *a[3:]), TypeError, r"^b1.dtype=torch.int32"),
    ("x 3-D", lambda a: (a[0][None], *a[1:]), ValueError, r"^x has shape \(1, 4, 6\): it must be 2-D"),
    ("b2 2-D", lambda a: (*a[:4], a[4][None]), ValueError, r"^b2 has shape \(1, 5\): it must be 1-D"),
    ("K mismatch", lambda a: (a[0], a[1][:, :5], *a[2:]), ValueError,
     r"^w1.shape=\(7, 5\) does not match x.shape=\(4, 6\)"),
    ("b1 wrong length", lambda a: (a[0], a[1], a[2][:6], *a[3:]), ValueError, r"^b1.shape=\(6,\): it must be \(7,\)"),
    ("H mismatch", lambda a: (*a[:3], a[3][:, :6], a[4]), ValueError,
     r"^w2.shape=\(5, 6\) does not match w1.shape=\(7, 6\)"),
    ("b2 wrong length", lambda a: (*a[:4], a[4][:4]), ValueError, r"^b2.shape=\(4,\): it must be \(5,\)"),
    ("M empty", lambda a: (a[0][:0], *a[1:]), ValueError, r"^x.shape\[0\] is 0"),
    ("devices differ", lambda a: (a[0].to("meta"), *a[1:]), ValueError, r"share one device.*x on meta"),
]


@pytest.mark.parametrize("variant", ["tf32", "fp16x3"])
@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_name_the_parameter(variant, case):
    _, mutate, error, pattern = case
    args = mutate(make_inputs(4, 6, 7, 5, seed=SEED + 8))
    with pytest.raises(error, match=pattern):
        run_variant(variant, *args)


def test_bad_precision_lists_the_allowed_values():
    args = make_inputs(4, 6, 7, 5, seed=SEED + 9)
    allowed = r"allowed values are \('ieee', 'tf32x3', 'tf32'\)"
    with pytest.raises(ValueError, match=rf"^precision='fp16': {allowed}"):
        k04.linear_sigmoid_linear_lse(*args, precision="fp16")
    with pytest.raises(ValueError, match=rf"^precision='bf16': {allowed}"):
        k04.linear_sigmoid(*args[:3], precision="bf16")
    with pytest.raises(ValueError, match=rf"^precision='fp32': {allowed}"):
        k04.linear_partial_lse(torch.rand(4, 7, device=DEVICE), *args[3:], precision="fp32")


def test_partial_lse_checks_its_own_operands():
    x, w1, b1, w2, b2 = make_inputs(4, 6, 7, 5, seed=SEED + 10)
    with pytest.raises(ValueError, match=r"^w2.shape=\(5, 7\) does not match h.shape=\(4, 6\)"):
        k04.linear_partial_lse(x, w2, b2)
    with pytest.raises(TypeError, match=r"^h must be an Fp16x3Split"):
        k05.linear_partial_lse_split(x, w2, b2)
    with pytest.raises(ValueError, match=r"^h.hi.shape=\(4, 64\): it must be contiguous \(M, 128\)"):
        k05.linear_partial_lse_split(k05.linear_sigmoid_split(x, w1, b1), torch.rand(5, 100, device=DEVICE), b2)


# ---------------------------------------------------------------------------------------
# Precision on real tensor cores (GPU only)
# ---------------------------------------------------------------------------------------
GPU_TOL = {"ieee": 1e-5, "tf32x3": 1e-5, "tf32": 1e-3, "fp16x3": 1e-5}
DEFAULT = (16384, 2048, 4096, 1024)  # (M, K, H, N): KernelBench's sizes
# Tails everywhere (K and H not multiples of 4 or 64, N not a multiple of BLOCK_N), and a
# short M with a long hidden size.
GPU_SHAPES = [DEFAULT, (1000, 2047, 4095, 1023), (17, 33, 8191, 257)]


def _poisoned_run(variant: str, args) -> torch.Tensor:
    # Several NaN blocks of out's size left in the caching allocator: an output element
    # (or partial) that a kernel forgets to write reads back as NaN.
    blocks = [torch.full((args[0].shape[0],), float("nan"), device=DEVICE) for _ in range(4)]
    del blocks
    out = run_variant(variant, *args)
    torch.cuda.synchronize()
    return out


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_gpu_error_vs_float64(variant, shape):
    seed = SEED + 100
    args = make_inputs(*shape, seed=seed)
    out = _poisoned_run(variant, args)
    assert out.shape == (shape[0],)
    assert not torch.isnan(out).any(), f"{variant} {shape} seed {seed}: NaN in out (unwritten?)"
    err = rel_error(out, reference64(*args))
    assert err < GPU_TOL[variant], f"{variant} {shape} seed {seed}: rel. error {err:.2e}"
    k05.clear_weight_cache()


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_gpu_odd_sizes_poisoned(variant, shape):
    seed = SEED + 200
    args = make_inputs(*shape, seed=seed)
    out = _poisoned_run(variant, args)
    assert not torch.isnan(out).any(), f"{variant} {shape} seed {seed}: NaN in out"
    err = rel_error(out, reference64(*args))
    assert err < GPU_TOL[variant], f"{variant} {shape} seed {seed}: rel. error {err:.2e}"
