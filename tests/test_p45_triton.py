"""Problem 45, steps 04 (Triton GEMMs + partial logsumexp, three dot precisions), 05 (the same
pipeline on fp16x3 splits) and 06 (one fp16 or bf16 product per term): what the harness's run of
every variant at one small size cannot see.

Without a GPU the kernels run in Triton's interpreter on CPU tensors. The interpreter ignores
``input_precision`` and computes every dot in fp32 (step 05 adds its hi*hi chunks with a plain add),
so CPU runs check the logic (indexing, masks, the partial logsumexp and its combine, the h split,
padding), not precision: every variant must then be fp32-accurate, except step 06, whose operands
are rounded to 16 bits there too (and which is held to the same rounding emulated in torch). Tests
marked ``gpu`` check each variant on real tensor cores. Inputs are fresh each run; the seed is in
every failure message.
"""

from __future__ import annotations

import math
import secrets

import pytest
import torch

pytest.importorskip("triton")

from fusedkit.harness import rel_error  # noqa: E402
from fusedkit.kernels import load_step  # noqa: E402
from fusedkit.precision import to_bf16, to_fp16  # noqa: E402
from kernel_helpers import gpu_test, poison_allocator, triton_sm90  # noqa: E402
from reference import operands, reference64, tier  # noqa: E402

k05 = load_step("p45", "05_triton_fp16x3_lse.py")
k04 = load_step("p45", "04_triton_fused_lse.py")
k06 = load_step("p45", "06_triton_fp16_lse.py")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INTERPRET = k04.INTERPRET
SEED = secrets.randbelow(2**31 - 10_000)  # fresh inputs every run; quoted in messages

VARIANTS = (*k04.PRECISIONS, "fp16x3", *k06.PRECISIONS)
# The interpreter computes steps 04 and 05 in fp32; on a GPU the small-shape logic tests
# allow tf32 its 10-bit mantissa. Step 06 rounds its operands to 16 bits everywhere: a few
# units of 2**-11 (fp16) or 2**-8 (bf16) on outputs of order 1.
LOGIC_TOL = {v: (1e-3 if (v == "tf32" and not INTERPRET) else 1e-5) for v in VARIANTS}
# The error is judged against max(|ref|, 1) per row: with one hidden unit
# and one output (1x1x1x1) the output is a single rounded product that can nearly cancel b2, so
# a purely relative bound would fail on honest rounding. 8 units of the format's rounding
# (2**-11 fp16, 2**-8 bf16) per row still catch any indexing or masking slip, which is O(1).
LOGIC_TOL.update({"fp16": 2e-4, "bf16": 2e-3})
ROW_TOL_16 = {"fp16": 8 * 2.0**-11, "bf16": 8 * 2.0**-8}
# (M, K, H, N): single elements; K two whole BLOCK_Ks (32 in the interpreter: GEMM1's unmasked
# loop), H past two with a tail (GEMM2's masked loop), N past several BLOCK_N with a tail.
SHAPES = [(1, 1, 1, 1), (17, 64, 65, 130)]


def make_inputs(m: int, k: int, h: int, n: int, seed: int):
    return operands("p45", m, k, h, n, seed=seed, device=DEVICE)


def logits64(x, w1, b1, w2, b2) -> torch.Tensor:
    h = torch.sigmoid(x.double() @ w1.double().T + b1.double())
    return h @ w2.double().T + b2.double()


def run_variant(variant: str, *args) -> torch.Tensor:
    if variant == "fp16x3":
        return k05.linear_sigmoid_linear_lse_fp16x3(*args)
    if variant in k06.PRECISIONS:
        return k06.linear_sigmoid_linear_lse_fp16(*args, precision=variant)
    return k04.linear_sigmoid_linear_lse(*args, precision=variant)


def partial_lse(variant: str, x, w1, b1, w2, b2):
    """(pmax, psum, BLOCK_N) of the variant's GEMM2, h computed by its own GEMM1."""
    if variant == "fp16x3":
        pmax, psum = k05.linear_partial_lse_split(k05.linear_sigmoid_split(x, w1, b1), w2, b2)
        kernel = k05._fp16x3_linear_partial_lse_kernel
    elif variant in k06.PRECISIONS:
        pmax, psum = k06.linear_partial_lse_lowp(k06.linear_sigmoid_lowp(x, w1, b1, variant), w2, b2)
        kernel = k06._linear_partial_lse_lowp_kernel
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


ROUND = {"fp16": to_fp16, "bf16": to_bf16}


def emulated16(precision: str, x, w1, b1, w2, b2) -> torch.Tensor:
    """Step 06 in torch: x, W1, W2 and h rounded to 16 bits, products in float64."""
    r = ROUND[precision]
    h = r(torch.sigmoid(r(x).double() @ r(w1).double().T + b1.double()).float())
    return torch.logsumexp(h.double() @ r(w2).double().T + b2.double(), dim=1)


def own_h_logits(precision: str, x, w1, b1, w2, b2) -> torch.Tensor:
    """Step 06's logits from the h its GEMM1 stored (16 bits), W2 rounded alike, in float64.
    Recomputing h in torch instead, an fp32 sigmoid that lands on the other side of a 16-bit
    rounding boundary moves a logit by a unit of h times W2: seeds 1270106679 and 79293 did."""
    h = k06.linear_sigmoid_lowp(x, w1, b1, precision)
    return h.double() @ ROUND[precision](w2).double().T + b2.double()


# ---------------------------------------------------------------------------------------
# The whole pipeline (interpreter on the CPU, or the GPU when there is one)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_float64_on_odd_sizes(variant, shape):
    seed = SEED + hash(shape) % 1000
    args = make_inputs(*shape, seed=seed)
    k06.clear_weight_cache()
    out = run_variant(variant, *args)
    assert out.shape == (shape[0],) and out.dtype == torch.float32
    assert torch.isfinite(out).all(), f"{variant} {shape} seed {seed}: NaN/inf in out"
    ref = reference64("p45", *args)
    # Per row against max(|ref|, 1), for every variant: at 1x1x1x1 the output is one logit, which
    # can nearly cancel b2, and then fp32's honest rounding is a large relative error (1.2e-5 for
    # fp16x3 at seed 628710).
    err = float(((out.double() - ref).abs() / ref.abs().clamp(min=1.0)).max())
    tol = ROW_TOL_16[variant] if variant in k06.PRECISIONS else LOGIC_TOL[variant]
    assert err < tol, f"{variant} {shape} seed {seed}: rel. error {err:.2e}"
    if variant in k06.PRECISIONS:
        # Against the same rounding done by torch only the fp32 sums and sigmoid remain: an
        # fp16 ulp of h apart at most.
        err = rel_error(out, emulated16(variant, *args))
        assert err < 2e-5, f"{variant} {shape} seed {seed}: {err:.2e} from the torch emulation"


@pytest.mark.parametrize("variant", ["tf32x3", "fp16x3", "fp16"])
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
    err = rel_error(run_variant(variant, x, w1, b1, w2, b2), reference64("p45", *args0))
    assert err < LOGIC_TOL[variant], f"{variant} seed {SEED + 1}: rel. error {err:.2e}"


# ---------------------------------------------------------------------------------------
# The partial logsumexp and the combine
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["tf32x3", "fp16x3", "fp16"])
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
    if variant in k06.PRECISIONS:  # each logit carries its 16-bit rounding: compare like with like
        # (h's own rounding is test_fp16_step_stores_h_in_16_bits')
        ref_max, ref_sum = tiles64(own_h_logits(variant, *args), block_n)
        tol = 2e-5
    else:
        ref_max, ref_sum = tiles64(logits64(*args), block_n)
        tol = LOGIC_TOL[variant]
    assert torch.allclose(pmax.double(), ref_max, rtol=tol, atol=tol), f"seed {SEED + 2}: pmax"
    assert torch.allclose(psum.double(), ref_sum, rtol=tol, atol=tol), f"seed {SEED + 2}: psum"
    tail = n - (t - 1) * block_n  # valid columns of the last tile
    assert ((psum >= 1 - 1e-5) & (psum <= block_n + 1e-3)).all()
    assert (psum[:, -1] <= tail + 1e-3).all(), "the tail tile summed columns past N"


@pytest.mark.parametrize("variant", ["tf32", "fp16x3", "fp16"])
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
    out = run_variant(variant, x, w1, b1, w2, b2)
    assert torch.isfinite(out).all(), f"{variant} {case} seed {SEED + 3}: {out}"
    if variant in k06.PRECISIONS:  # logits of hundreds carry 16-bit rounding: compare like with like
        ref, tol = torch.logsumexp(own_h_logits(variant, x, w1, b1, w2, b2), dim=1), 2e-5
    else:
        ref, tol = reference64("p45", x, w1, b1, w2, b2), LOGIC_TOL[variant]
    err = rel_error(out, ref)
    assert err < tol, f"{variant} {case} seed {SEED + 3}: rel. error {err:.2e}"


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
# Step 06: one 16-bit product per term
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("precision", k06.PRECISIONS)
def test_fp16_step_stores_h_in_16_bits(precision):
    x, w1, b1, _, _ = make_inputs(9, 20, 70, 5, seed=SEED + 301)
    h = k06.linear_sigmoid_lowp(x, w1, b1, precision)
    assert h.dtype == k06.DTYPES[precision] and h.shape == (9, 70) and h.is_contiguous()
    r = ROUND[precision]
    ref = r(torch.sigmoid(r(x).double() @ r(w1).double().T + b1.double()).float())
    # One 16-bit rounding of an fp32 sigmoid: equal, or one ulp apart where fp32 sums land
    # on the other side of a rounding boundary.
    ulp = 2.0**-10 if precision == "fp16" else 2.0**-7
    assert ((h.double() - ref.double()).abs() <= ulp * ref.double().abs() + 1e-7).all(), f"seed {SEED + 301}"
    assert (h >= 0).all() and (h <= 1).all()


def test_fp16_step_casts_x_in_the_kernel_or_in_a_pass_alike():
    args = make_inputs(13, 40, 33, 21, seed=SEED + 302)
    a = k06.linear_sigmoid_linear_lse_fp16(*args)
    b = k06.linear_sigmoid_linear_lse_fp16(*args, cast_x_first=True)
    assert torch.equal(a, b), f"seed {SEED + 302}"


def test_fp16_weight_cast_is_cached_and_follows_in_place_changes():
    k06.clear_weight_cache()
    x, w1, b1, w2, b2 = make_inputs(7, 16, 24, 10, seed=SEED + 303)
    first = k06.cast_weight_cached(w1, "fp16")
    assert k06.cast_weight_cached(w1, "fp16") is first  # unchanged weight: no new cast
    assert k06.cast_weight_cached(w1, "bf16") is not first  # one entry per dtype
    with torch.no_grad():
        w1.mul_(-2.0)  # bumps w1._version: the next call must cast again
    out = run_variant("fp16", x, w1, b1, w2, b2)
    assert k06.cast_weight_cached(w1, "fp16") is not first
    assert rel_error(out, emulated16("fp16", x, w1, b1, w2, b2)) < 2e-5, f"seed {SEED + 303}"
    # Behind the version counter the change is not seen, until the cache is cleared.
    new_w2 = make_inputs(7, 16, 24, 10, seed=SEED + 304)[3]
    w2.data.copy_(new_w2)
    stale = run_variant("fp16", x, w1, b1, w2, b2)
    assert rel_error(stale, emulated16("fp16", x, w1, b1, w2, b2)) > 1e-4
    k06.clear_weight_cache()
    fresh = run_variant("fp16", x, w1, b1, w2, b2)
    assert rel_error(fresh, emulated16("fp16", x, w1, b1, w2, b2)) < 2e-5, f"seed {SEED + 304}"


def test_fp16_weight_that_overflows_is_refused_once():
    x, w1, b1, w2, b2 = make_inputs(4, 6, 7, 5, seed=SEED + 305)
    w2 = w2.clone()
    w2[2, 3] = 1e5  # beyond fp16's 65504, fine in bf16
    k06.clear_weight_cache()
    with pytest.raises(ValueError, match=r"^w2 holds inf or NaN in fp16 \(first in row 2\): fp16 holds "
                                         r"magnitudes up to 65504"):
        run_variant("fp16", x, w1, b1, w2, b2)
    assert torch.isfinite(run_variant("bf16", x, w1, b1, w2, b2)).all()


def test_fp16_step_checks_precision_and_h():
    args = make_inputs(4, 6, 7, 5, seed=SEED + 306)
    with pytest.raises(ValueError, match=r"^precision='tf32': allowed values are \('fp16', 'bf16'\)"):
        k06.linear_sigmoid_linear_lse_fp16(*args, precision="tf32")
    with pytest.raises(TypeError, match=r"^h.dtype=torch.float32: allowed are torch.float16, torch.bfloat16"):
        k06.linear_partial_lse_lowp(torch.rand(4, 7, device=DEVICE), *args[3:])
    with pytest.raises(ValueError, match=r"^w2.shape=\(5, 7\) does not match h.shape=\(4, 6\)"):
        k06.linear_partial_lse_lowp(torch.rand(4, 6, device=DEVICE).half(), *args[3:])


def test_fp16_step_gpu_configs_compile_for_sm90():
    # Every GPU config of both GEMMs, in fp16 and bf16, compiled for sm_90a on this machine (no
    # GPU needed): fits the H200's 227 KB of shared memory, spills no registers, issues wgmma and
    # keeps it pipelined (no C7515).
    rows = triton_sm90("p45/06")
    assert len(rows) == 2 * sum(len(c) for c in k06.GPU_CONFIGS.values())
    for r in rows:
        assert r["smem"] <= 227 * 1024, f"{r}: over the 227 KB of shared memory"
        assert r["spill"] == 0, f"{r}: ptxas spills registers"
        assert r["wgmma"] and not r["c7515"], f"{r}: no pipelined wgmma"


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


@pytest.mark.parametrize("variant", ["tf32", "fp16x3", "fp16"])
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
GPU_TOL = {"ieee": 1e-5, "tf32x3": 1e-5, "tf32": 1e-3, "fp16x3": 1e-5, "fp16": 1e-4, "bf16": 1e-3}
# The tier each variant earns at KernelBench's sizes (as the H200's records have it): one fp16,
# bf16 or tf32 product per term passes KernelBench's 1e-4 check on problem 45.
TIER = {"ieee": "fp32-faithful", "tf32x3": "fp32-faithful", "fp16x3": "fp32-faithful",
        "tf32": "kb-pass", "fp16": "kb-pass", "bf16": "kb-pass"}
DEFAULT = (16384, 2048, 4096, 1024)  # (M, K, H, N): KernelBench's sizes


@gpu_test
@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_error_vs_float64(variant):
    # One element, tails everywhere at scale (K and H not multiples of 4 or 64, N not a
    # multiple of BLOCK_N), a short M with a long hidden size, then KernelBench's sizes; NaN
    # blocks of out's size left in the caching allocator, so an output element (or partial) a
    # kernel forgets to write reads back as NaN; at KernelBench's sizes, its tier.
    for shape in [(1, 1, 1, 1), (1000, 2047, 4095, 1023), (17, 33, 8191, 257), DEFAULT]:
        seed = SEED + 100
        args = make_inputs(*shape, seed=seed)
        poison_allocator(*[(shape[0],)] * 4)
        out = run_variant(variant, *args)
        assert out.shape == (shape[0],)
        assert not torch.isnan(out).any(), f"{variant} {shape} seed {seed}: NaN in out (unwritten?)"
        err = rel_error(out, reference64("p45", *args))
        assert err < GPU_TOL[variant], f"{variant} {shape} seed {seed}: rel. error {err:.2e}"
        if shape == DEFAULT:
            assert tier("p45", out, *args) == TIER[variant], f"{variant} seed {seed}"
        k05.clear_weight_cache()
        k06.clear_weight_cache()
