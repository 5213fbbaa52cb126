"""Problem 12, steps 08 (Triton fused, three dot precisions) and 09 (fp16x3 split GEMM): what
the harness's run of every variant at one small size cannot see.

Without a GPU the kernels run in Triton's interpreter on CPU tensors, which ignores
``input_precision`` and computes every dot in fp32 (step 09 adds its chunks with a plain add
instead of inline PTX): CPU runs check the logic (single elements, tails, strides, both slopes, the
split, the weight cache, bad arguments), not precision. Tests marked ``gpu`` check each variant on
real tensor cores, at KernelBench's size and at long odd reductions.
"""

from __future__ import annotations

import gc

import pytest
import torch

pytest.importorskip("triton")

from fusedkit.harness import reference64 as model_reference64  # noqa: E402
from fusedkit.harness import rel_error  # noqa: E402
from fusedkit.kernels import load_step  # noqa: E402
from kernel_helpers import gpu_test, poison_allocator  # noqa: E402
from reference import MULT, SLOPE, model, operands, reference64, tier  # noqa: E402

k09 = load_step("p12", "09_triton_fp16x3.py")
wc = load_step("common", "weight_cache.py")  # the weight cache step 09 keeps its splits in
k08 = load_step("p12", "08_triton_fused.py")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INTERPRET = k08.INTERPRET
VARIANTS = (*k08.PRECISIONS, "fp16x3")
# The interpreter computes every variant in fp32; on a GPU the small-shape tests allow tf32 its
# 10-bit mantissa.
LOGIC_TOL = {v: (3e-3 if (v == "tf32" and not INTERPRET) else 1e-5) for v in VARIANTS}


def inputs(m: int, k: int, n: int, seed: int = 0):
    return operands("p12", m, k, n, seed=seed, device=DEVICE)


def run_variant(variant: str, x, w, b, mult=MULT, slope=SLOPE) -> torch.Tensor:
    if variant == "fp16x3":
        return k09.linear_leakyrelu_fp16x3(x, w, b, mult, slope)
    return k08.linear_leakyrelu(x, w, b, mult, slope, precision=variant)


# ---------------------------------------------------------------------------------------
# Logic (interpreter on the CPU, or the GPU when there is one)
# ---------------------------------------------------------------------------------------
# (M, K, N): one element (K below one BLOCK_K tile); K a whole number of tiles (step 08's
# unmasked loop) with tails in M and N. The odd-K masked loop is the next two tests'.
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", [(1, 1, 1), (70, 64, 130)], ids=lambda s: "x".join(map(str, s)))
def test_matches_float64_on_odd_sizes(variant, shape):
    x, w, b = inputs(*shape)
    y = run_variant(variant, x, w, b)
    assert y.shape == (shape[0], shape[2]) and y.dtype == torch.float32 and y.is_contiguous()
    err = rel_error(y, reference64("p12", x, w, b))
    assert err < LOGIC_TOL[variant], f"{variant} {shape}: rel. error {err:.2e}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_negative_multiplier_and_other_slope(variant):
    # A negative multiplier flips which outputs take the slope branch; checks both branches.
    x, w, b = inputs(19, 37, 23, seed=5)
    y = run_variant(variant, x, w, b, mult=-1.5, slope=0.3)
    m = model("p12", x, w, b)
    m.multiplier, m.leaky_relu.negative_slope = -1.5, 0.3
    ref = model_reference64(m, [x])
    assert (ref < 0).any() and (ref > 0).any()
    assert rel_error(y, ref) < LOGIC_TOL[variant]


@pytest.mark.parametrize("variant", VARIANTS)
def test_non_contiguous_inputs_read_through_strides(variant):
    m, k, n = 21, 40, 18
    x0, w0, b0 = inputs(m, k, n, seed=7)
    x = x0.T.contiguous().T  # column-major x: stride (1, m)
    w = torch.zeros(n, 2 * k, device=DEVICE)[:, ::2]  # every other column: stride (2k, 2)
    w.copy_(w0)
    b = torch.zeros(2 * n, device=DEVICE)[::2]  # stride 2
    b.copy_(b0)
    assert not (x.is_contiguous() or w.is_contiguous() or b.is_contiguous())
    y = run_variant(variant, x, w, b)
    assert rel_error(y, reference64("p12", x0, w0, b0)) < LOGIC_TOL[variant]


# ---------------------------------------------------------------------------------------
# The fp16x3 split
# ---------------------------------------------------------------------------------------
def torch_split_oracle(a: torch.Tensor, inv_scale: torch.Tensor):
    """The split written with torch ops (float->half rounds to nearest even, as the kernel's)."""
    v = a * (1.0 / inv_scale)[:, None]  # exact: 1/inv_scale is a power of two
    hi = v.half()
    lo = ((v - hi.float()) * 2048.0).half()
    return hi, lo


@pytest.mark.parametrize("scale", [1.0, 1e6, 1e-6, 1e30, 1e-30])
def test_split_reconstructs_weight(scale):
    w = inputs(1, 200, 96, seed=3)[1] * scale
    # Rows spanning 2**-20 .. 2**20 of each other: per-row scaling keeps each one accurate.
    w[:8] *= torch.logspace(-20, 20, 8, base=2.0, device=DEVICE)[:, None]
    s = k09.split_fp16x3(w)
    assert s.hi.dtype == s.lo.dtype == torch.float16 and s.inv_scale.dtype == torch.float32
    # Every row's inverse scale is a power of two (mantissa bits zero), so scaling is exact.
    assert ((s.inv_scale.view(torch.int32) & 0x7FFFFF) == 0).all()
    # The largest hi of each row sits in [2**14, 2**15]: far from fp16's overflow at 65504.
    # Rows whose max is below 2**-111 (1e-30 times 2**-20 here) cannot get there: their
    # scale is capped at 2**126 so that it and its inverse stay normal fp32 numbers.
    row_max = s.hi.float().abs().amax(dim=1)
    reachable = w.abs().amax(dim=1) >= 2.0**-111
    assert ((row_max >= 2**14) & (row_max <= 2**15))[reachable].all()
    assert (row_max[~reachable] < 2**14).all() and (s.inv_scale[~reachable] == 2.0**-126).all()
    rec = (s.hi.double() + s.lo.double() / 2048) * s.inv_scale.double()[:, None]
    assert rec.shape == w.shape  # no padding asked for
    w64 = w.double()
    assert (rec - w64).norm() / w64.norm() < 1e-7
    row_rel = (rec - w64).norm(dim=1) / w64.norm(dim=1)
    assert row_rel.max() < 2e-7, "a row lost precision: per-row scaling failed"
    # Bit-for-bit the same as the torch oracle: the kernel's roundings are the expected ones.
    hi, lo = torch_split_oracle(w, s.inv_scale)
    assert torch.equal(s.hi, hi) and torch.equal(s.lo, lo)


def test_split_pads_columns_with_zeros():
    w = inputs(1, 70, 10, seed=4)[1]
    plain, padded = k09.split_fp16x3(w), k09.split_fp16x3(w, pad_cols_to=64)
    assert padded.hi.shape == padded.lo.shape == (10, 128) and padded.hi.is_contiguous()
    assert torch.equal(padded.hi[:, :70], plain.hi) and torch.equal(padded.lo[:, :70], plain.lo)
    assert (padded.hi[:, 70:] == 0).all() and (padded.lo[:, 70:] == 0).all()
    assert torch.equal(padded.inv_scale, plain.inv_scale)
    with pytest.raises(ValueError, match=r"^pad_cols_to=0: must be an int >= 1"):
        k09.split_fp16x3(w, pad_cols_to=0)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf in numpy
def test_split_zero_row_and_non_finite_rows():
    a = torch.rand(4, 33, device=DEVICE) + 0.5
    a[1] = 0.0
    a[2, 5] = float("inf")
    a[3, 7] = float("nan")
    s = k09.split_fp16x3(a)
    assert torch.isfinite(s.inv_scale[:2]).all() and (s.hi[1] == 0).all() and (s.lo[1] == 0).all()
    assert torch.isnan(s.inv_scale[2:]).all()  # flagged for the wrappers to reject


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf in numpy
def test_non_finite_inputs_are_rejected():
    x, w, b = inputs(5, 7, 6, seed=11)
    w_bad = w.clone()
    w_bad[2, 3] = float("nan")
    with pytest.raises(ValueError, match=r"weight contains inf or NaN \(first in row 2\)"):
        k09.linear_leakyrelu_fp16x3(x, w_bad, b, MULT, SLOPE)
    x_bad = x.clone()
    x_bad[4, 0] = float("-inf")
    with pytest.raises(ValueError, match=r"x contains inf or NaN \(first in row 4\)"):
        k09.linear_leakyrelu_fp16x3(x_bad, w, b, MULT, SLOPE, check_finite=True)
    # Unchecked (the default: no host sync), the bad row becomes NaN, every other row stays right.
    y = k09.linear_leakyrelu_fp16x3(x_bad, w, b, MULT, SLOPE)
    assert torch.isnan(y[4]).all()
    assert rel_error(y[:4], reference64("p12", x[:4], w, b)) < 1e-5


# ---------------------------------------------------------------------------------------
# The weight-split cache
# ---------------------------------------------------------------------------------------
def test_weight_cache_hits_and_follows_in_place_changes():
    k09.clear_weight_cache()
    x, w, b = inputs(9, 24, 14, seed=21)
    y1 = k09.linear_leakyrelu_fp16x3(x, w, b, MULT, SLOPE)
    first = k09.split_weight_cached(w)
    assert k09.split_weight_cached(w) is first  # unchanged weight: no new split
    assert rel_error(y1, reference64("p12", x, w, b)) < 1e-5

    with torch.no_grad():
        w.mul_(-3.0)  # in place: bumps w._version, so the next call must re-split
    y2 = k09.linear_leakyrelu_fp16x3(x, w, b, MULT, SLOPE)
    assert rel_error(y2, reference64("p12", x, w, b)) < 1e-5
    assert k09.split_weight_cached(w) is not first

    w[3].add_(1.0)  # through a view: views share the version counter
    y3 = k09.linear_leakyrelu_fp16x3(x, w, b, MULT, SLOPE)
    assert rel_error(y3, reference64("p12", x, w, b)) < 1e-5
    assert wc.size() == 1, "stale versions of the same weight must be dropped"


def test_weight_cache_misses_changes_behind_the_version_counter_until_cleared():
    # Documented limit: w.data has its own version counter, so this change is invisible...
    k09.clear_weight_cache()
    x, w, b = inputs(6, 12, 10, seed=22)
    k09.linear_leakyrelu_fp16x3(x, w, b, MULT, SLOPE)
    w.data.copy_(inputs(6, 12, 10, seed=23)[1])
    stale = k09.linear_leakyrelu_fp16x3(x, w, b, MULT, SLOPE)
    assert rel_error(stale, reference64("p12", x, w, b)) > 1e-2
    # ... until clear_weight_cache(), which the docstring tells users to call.
    k09.clear_weight_cache()
    fresh = k09.linear_leakyrelu_fp16x3(x, w, b, MULT, SLOPE)
    assert rel_error(fresh, reference64("p12", x, w, b)) < 1e-5


def test_fresh_weights_never_hit_a_dead_weights_split():
    # A freed weight's memory is soon handed to the next tensor of its size (CUDA's caching
    # allocator does so at once) with a fresh version counter: same address, same version,
    # same shape. Only the cache's liveness check keeps it from hitting the dead one's split.
    # Simulated deterministically: two views of one buffer, the data swapped through .data
    # so that the version does not move. (The checker draws new weights for every seed.)
    k09.clear_weight_cache()
    x, w_a, b = inputs(8, 32, 16, seed=50)
    w_b = inputs(8, 32, 16, seed=51)[1]
    pool = w_a.clone()
    w1 = pool[:]  # a view: its own Python object, sharing pool's memory and version
    k09.linear_leakyrelu_fp16x3(x, w1, b, MULT, SLOPE)
    key = wc.weight_key(w1)
    del w1
    gc.collect()
    pool.data.copy_(w_b)  # new contents, version unchanged
    w2 = pool[:]
    assert wc.weight_key(w2) == key  # indistinguishable by address, version and shape
    y = k09.linear_leakyrelu_fp16x3(x, w2, b, MULT, SLOPE)
    assert rel_error(y, reference64("p12", x, w_b, b)) < 1e-5, "hit the split of a dead weight"
    assert wc.size() <= wc.CACHE_SIZE


def test_inference_mode_weights_are_split_every_call():
    x, w, b = inputs(4, 16, 8, seed=31)
    with torch.inference_mode():
        wi = w.clone()  # an inference tensor: no version counter to key on
        y = k09.linear_leakyrelu_fp16x3(x, wi, b, MULT, SLOPE)
        wi.mul_(2.0)
        y2 = k09.linear_leakyrelu_fp16x3(x, wi, b, MULT, SLOPE)
    assert rel_error(y, reference64("p12", x, w, b)) < 1e-5
    assert rel_error(y2, reference64("p12", x, w * 2.0, b)) < 1e-5


# ---------------------------------------------------------------------------------------
# Input checks: one clear line naming the parameter
# ---------------------------------------------------------------------------------------
BAD_INPUTS = [
    ("x not a tensor", lambda x, w, b: ([[1.0]], w, b), TypeError, r"^x must be a torch.Tensor"),
    ("x float64", lambda x, w, b: (x.double(), w, b), TypeError, r"^x.dtype=torch.float64"),
    ("weight float16", lambda x, w, b: (x, w.half(), b), TypeError, r"^weight.dtype=torch.float16"),
    ("bias int", lambda x, w, b: (x, w, b.int()), TypeError, r"^bias.dtype=torch.int32"),
    ("x 3-D", lambda x, w, b: (x[None], w, b), ValueError, r"^x has shape \(1, 4, 6\): it must be 2-D"),
    ("weight 1-D", lambda x, w, b: (x, w[0], b), ValueError, r"^weight has shape \(6,\)"),
    ("bias 2-D", lambda x, w, b: (x, w, b[None]), ValueError, r"^bias has shape \(1, 5\)"),
    ("K mismatch", lambda x, w, b: (x, w[:, :5], b), ValueError, r"^weight.shape=\(5, 5\) does not match x"),
    ("N mismatch", lambda x, w, b: (x, w, b[:4]), ValueError, r"^bias.shape=\(4,\)"),
    ("M empty", lambda x, w, b: (x[:0], w, b), ValueError, r"^M = x.shape\[0\] is 0"),
    ("K empty", lambda x, w, b: (x[:, :0], w[:, :0], b), ValueError, r"^K = x.shape\[1\] is 0"),
    ("devices differ", lambda x, w, b: (x.to("meta"), w, b), ValueError, r"share one device.*x on meta"),
]


@pytest.mark.parametrize("variant", ["tf32x3", "fp16x3"])
@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_name_the_parameter(variant, case):
    _, mutate, error, pattern = case
    x, w, b = mutate(*inputs(4, 6, 5, seed=41))
    with pytest.raises(error, match=pattern):
        run_variant(variant, x, w, b)


@pytest.mark.parametrize("name, value", [("multiplier", torch.tensor(2.0)), ("negative_slope", True),
                                         ("multiplier", "2")])
def test_bad_scalars_name_the_parameter(name, value):
    x, w, b = inputs(4, 6, 5, seed=41)
    kwargs = {"multiplier": MULT, "negative_slope": SLOPE, name: value}
    for fn in (k08.linear_leakyrelu, k09.linear_leakyrelu_fp16x3):
        with pytest.raises(TypeError, match=rf"^{name}=.*must be a Python float or int"):
            fn(x, w, b, **kwargs)


def test_bad_precision_lists_the_allowed_values():
    x, w, b = inputs(4, 6, 5, seed=41)
    with pytest.raises(ValueError, match=r"precision='fp16': allowed values are \('ieee', 'tf32x3', 'tf32'\)"):
        k08.linear_leakyrelu(x, w, b, MULT, SLOPE, precision="fp16")


# ---------------------------------------------------------------------------------------
# Autotuning at small batches
# ---------------------------------------------------------------------------------------
def test_small_batches_autotune_only_the_smallest_row_tiles():
    base = load_step("common", "triton_base.py")
    cfgs = [base.make_config(*k) for k in
            [(64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (128, 128, 64, 3, 8), (64, 128, 32, 4, 4),
             (64, 64, 64, 4, 4)]]
    keys = lambda cs: [base.config_key(c) for c in cs]  # noqa: E731
    # 4 rows x 8192 columns on 132 SMs (128 tiles at most): 64-row tiles, then the most tiles.
    assert keys(base.small_batch_configs(cfgs, 4, 8192, 132)) == [(64, 64, 64, 4, 4)]
    assert keys(base.small_batch_configs(cfgs[:4], 64, 8192, 132)) == [(64, 128, 64, 4, 4),
                                                                       (64, 128, 32, 4, 4)]
    # At 256 rows some config gives a tile per SM (512 tiles of 64 x 64): all stay in.
    assert keys(base.small_batch_configs(cfgs, 256, 8192, 132)) == keys(cfgs)
    assert keys(base.small_batch_configs(cfgs, 1024, 8192, 132)) == keys(cfgs)
    assert base.small_batch_configs(cfgs[:1], 1, 1, 132) == cfgs[:1]  # never an empty list


def test_step_09_prunes_its_autotuning_by_tiles_on_a_gpu():
    tuner = k09._fp16x3_linear_leakyrelu_kernel
    if INTERPRET:  # one config under the interpreter: nothing to prune
        assert len(tuner.configs) == 1 and tuner.early_config_prune is None
    else:
        assert tuner.early_config_prune is k09._prune_small_batches


# ---------------------------------------------------------------------------------------
# Precision on real tensor cores (GPU only)
# ---------------------------------------------------------------------------------------
GPU_TOL = {"ieee": 5e-6, "tf32x3": 5e-6, "fp16x3": 5e-6, "tf32": 3e-3}
DEFAULT = (1024, 8192, 8192)  # (M, K, N) = (batch, in_features, out_features)


@gpu_test
@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_error_vs_float64(variant):
    # Long odd reductions and long odd rows with few of the other, every output written (the
    # allocator poisoned), then KernelBench's size: there the fp32 variants are fp32-faithful
    # (allclose(1e-4) to eager fp32, no worse than twice its error) on five fresh weights.
    for shape in [(1000, 17, 8191), (17, 8191, 1000)]:
        x, w, b = inputs(*shape)
        poison_allocator((shape[0], shape[2]))
        y = run_variant(variant, x, w, b)
        err = rel_error(y, reference64("p12", x, w, b))
        assert err < GPU_TOL[variant], f"{variant} {shape}: rel. error {err:.2e}"
    for seed in range(5 if variant != "tf32" else 1):
        x, w, b = inputs(*DEFAULT, seed=seed)
        y = run_variant(variant, x, w, b)
        err = rel_error(y, reference64("p12", x, w, b))
        assert err < GPU_TOL[variant], f"{variant} seed {seed}: rel. error {err:.2e}"
        if variant != "tf32":
            assert tier("p12", y, x, w, b) == "fp32-faithful", f"{variant} seed {seed}"
        k09.clear_weight_cache()  # free the 256 MB split before the next seed's weight


@gpu_test
def test_gpu_weight_cache_follows_in_place_change():
    x, w, b = inputs(256, 1024, 512, seed=9)
    k09.linear_leakyrelu_fp16x3(x, w, b, MULT, SLOPE)
    w.mul_(0.5).add_(0.01)
    y = k09.linear_leakyrelu_fp16x3(x, w, b, MULT, SLOPE)
    assert rel_error(y, reference64("p12", x, w, b)) < 5e-6


@gpu_test
def test_gpu_small_batch_runs_a_64_row_config():
    # 4 rows x 8192 columns: only the 64-row configs are timed, and one of them is chosen.
    x, w, b = inputs(4, 256, 8192)
    y = k09.linear_leakyrelu_fp16x3(x, w, b, MULT, SLOPE)
    assert rel_error(y, reference64("p12", x, w, b)) < GPU_TOL["fp16x3"]
    best = k09._fp16x3_linear_leakyrelu_kernel.best_config
    assert best.kwargs["BLOCK_M"] == 64, best
