"""Problem 45's Hopper steps (07: both GEMMs on fp16x3 splits; 08: one fp16 product each, and its
bf16 twin, on the same hand-written wgmma kernel, p45/hopper_lse.cuh) and their build.

CPU part (runs anywhere nvcc 12.x+ is): the steps build apart for sm_90a; each of their kernels
shows the Hopper machinery in PTX (wgmma.mma_async m64n128k16, cp.async.bulk.tensor, mbarriers,
setmaxnreg) and its own epilogue (GEMM1: round-to-nearest fp16 conversions and 4-byte __half2
stores of h's split; GEMM2: butterfly shuffles over the quad and one store per row pair); ptxas
reports no spills, no stack and no warning; the binding passes the C++ front end; the constants
the C++ and Python sides share agree; a torch model of the kernels' dataflow (fixed scale of h,
zero padding, 128-column partial logsumexp, the combine) is fp32-faithful (07) or within fp16's
(bf16's) rounding (08), at odd sizes and for a misaligned, strided x.
GPU part (marked ``gpu``): each GEMM alone against float64, the whole step against float64 at
odd sizes and KernelBench's (fp32-faithful there for 07, kb-pass for 08), bad inputs, a NaN row.
"""

from __future__ import annotations

import re
import secrets

import pytest
import torch

from fusedkit import build, export
from fusedkit.harness import rel_error
from fusedkit.kernels import load_step
from fusedkit.problems import p45_linear_sigmoid_linear_logsumexp as p45mod
from kernel_helpers import entry_body, gpu_test, needs_nvcc, poison_allocator, ptxas_report
from reference import model, operands, reference64, tier

P45 = p45mod.PROBLEM
HOPPER = build.hopper_sources("p45")
SOURCE = build.KERNELS_DIR / "p45" / "07_wgmma_fp16x3_lse.cu"
SOURCE08 = build.KERNELS_DIR / "p45" / "08_wgmma_fp16_lse.cu"
LAUNCHERS = build.KERNELS_DIR / "p45" / "launchers_hopper.h"
BINDING = build.KERNELS_DIR / "p45" / build.HOPPER_BINDING
GEMM1 = "p45_wgmma_fp16x3_sigmoid_split_kernel"
GEMM2 = "p45_wgmma_fp16x3_partial_lse_kernel"
STEP07, STEP08, STEP08_BF16 = p45mod.HOPPER_VARIANTS
H_SCALE = 2.0**14
LSE_TILE = 128
TOL_FP32 = 1e-6  # vs float64: fp32-faithful (step 05 measured ~1e-7 on the H200)
# Step 08 per row against max(|ref|, 1), as test_p45_triton.py holds step 06: 8 units of fp16's
# rounding (one fp16 output of 1x1x1x1 is one rounded product near b2); an indexing slip is O(1).
TOL_FP16 = 8 * 2.0**-11
TOL_BF16 = 8 * 2.0**-8
SEED = secrets.randbits(31)   # fresh inputs every run; quoted in messages


def err_vs(out: torch.Tensor, ref: torch.Tensor) -> float:
    """rel_error with values below 1 counted as 1 in the norm of ref: a logit or logsumexp that
    cancels to near zero (H = 1 or N = 1) is not fp32's yardstick, its inputs' size is."""
    return ((out.double() - ref).norm() / ref.double().abs().clamp_min(1.0).norm()).item()


# ----------------------------------------------------------------------------- CPU part


def test_step_builds_apart_from_the_other_steps():
    assert HOPPER == [SOURCE, SOURCE08]
    assert not set(HOPPER) & set(build.kernel_sources("p45")), "a Hopper step in the main extension"
    assert {build.required_arch(s) for s in HOPPER} == {"sm_90a"}
    assert build.extension_sources("p45", hopper=True) == [SOURCE, SOURCE08, BINDING]
    name, folder, sources, flags = build._extension_plan("p45", (9, 0), "2.11.0+cu130", "13.0",
                                                         hopper=True)
    assert name == "fusedkit_p45_hopper" and sources == [SOURCE, SOURCE08, BINDING]
    assert "-gencode=arch=compute_90a,code=sm_90a" in flags
    assert folder != build._extension_plan("p45", (9, 0), "2.11.0+cu130", "13.0")[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_load_without_gpu_says_what_to_do():
    with pytest.raises(build.CudaUnavailableError, match="needs a CUDA GPU"):
        build.load_extension("p45", hopper=True)


# What each step's PTX holds, per thread of a consumer: its source, its two kernels (GEMM1, GEMM2),
# the wgmmas of one k-tile (07: 4 hi*hi into chunk and 8 cross ones; 08: 4), the round-to-nearest
# adds of hi*hi outside the tensor cores (07 only), the epilogues' loads (07's GEMM1: 2 row scales,
# 32 column scales, 32 biases; GEMM2: 32 + 32; 08: the 32 biases), and GEMM1's fp16x2 conversions
# and 4-byte stores of h (07: hi and lo; 08: h once), all of the step's 16-bit type (ab).
PTX_STEPS = {
    "wgmma_fp16x3_lse": dict(source=SOURCE, kernels=(GEMM1, GEMM2), ab="f16", wgmmas=12,
                             rn_adds=64, loads=(66, 64), h_stores=64),
    **{f"wgmma_{ab}_lse": dict(source=SOURCE08, kernels=(f"p45_wgmma_{ab}_sigmoid_kernel",
                                                          f"p45_wgmma_{ab}_partial_lse_kernel"),
                               ab=ab.replace("fp", "f"), wgmmas=4, rn_adds=0, loads=(32, 32),
                               h_stores=32)
       for ab in ("fp16", "bf16")},
}


@needs_nvcc
@pytest.mark.parametrize("slug", PTX_STEPS)
def test_ptx_shows_the_pipeline_in_both_kernels_and_each_epilogue(slug):
    want = PTX_STEPS[slug]
    text = build.ptx(want["source"])
    assert ".target sm_90a" in text
    for kernel in want["kernels"]:
        body = entry_body(text, kernel)
        # One k-tile's wgmmas in the unrolled loop, 16-bit operands with fp32 accumulation.
        ab = want["ab"]
        assert len(build.ptx_instructions(
            body, rf"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.{ab}\.{ab}")) == want["wgmmas"], kernel
        assert build.ptx_instructions(body, r"wgmma\.wait_group\.sync\.aligned 1;"), kernel
        assert build.ptx_instructions(body, r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global")
        assert build.ptx_instructions(body, r"mbarrier\.try_wait\.parity")
        assert build.ptx_instructions(body, r"mbarrier\.arrive\.expect_tx")
        assert build.ptx_instructions(body, r"setmaxnreg\.dec\.sync\.aligned\.u32 40")
        assert build.ptx_instructions(body, r"setmaxnreg\.inc\.sync\.aligned\.u32 232")
        # 07: hi*hi added outside the tensor cores with round-to-nearest adds; 08 has none.
        adds = len(build.ptx_instructions(body, r"add\.rn\.f32"))
        assert adds >= want["rn_adds"] if want["rn_adds"] else adds == 0, kernel
    g1, g2 = (entry_body(text, k) for k in want["kernels"])
    # GEMM1: 64 values a thread, each a sigmoid (one exp, one SFU reciprocal: no division of any
    # kind), rounded two columns at a time, stored as 4-byte stores; no shuffles.
    assert len(build.ptx_instructions(g1, r"ex2\.approx")) == 64
    assert len(build.ptx_instructions(g1, r"rcp\.approx\.ftz\.f32")) == 64
    assert not build.ptx_instructions(g1, r"div\.(rn|approx|full)\.f32|rcp\.rn\.f32")
    # The epilogue's loads go out before the tile's last wgmma wait, so that their latency hides
    # behind the tensor cores.
    for body, n in zip((g1, g2), want["loads"]):
        wait0 = body.index("wgmma.wait_group.sync.aligned 0;")
        loads = [m.start() for m in re.finditer(r"ld\.global\.nc", body)]
        assert len(loads) == n and max(loads) < wait0
    assert len(build.ptx_instructions(g1, rf"cvt\.rn\.{ab}x2\.f32")) == want["h_stores"]
    assert len(build.ptx_instructions(g1, r"st\.global\.(u|b)32")) == want["h_stores"]
    assert not build.ptx_instructions(g1, r"shfl\.sync")
    # GEMM2: max and sum over the quad for two rows (2 x 2 x 2 butterflies), one exp a value,
    # two pairs (pmax, psum) of fp32 stores per thread, h never stored.
    assert len(build.ptx_instructions(g2, r"shfl\.sync\.bfly\.b32")) == 8
    assert len(build.ptx_instructions(g2, r"ex2\.approx")) == 64
    assert len(build.ptx_instructions(g2, r"st\.global\.f32")) == 4
    assert not build.ptx_instructions(g2, r"cvt\.rn\.f16\.f32")


@needs_nvcc
@pytest.mark.parametrize("slug", PTX_STEPS)
def test_ptxas_no_spills_no_stack_no_warnings(slug):
    usage, warnings = ptxas_report(PTX_STEPS[slug]["source"])
    assert set(usage) == {k for w in PTX_STEPS.values() if w["source"] == PTX_STEPS[slug]["source"]
                          for k in w["kernels"]}, "every kernel of the file is a step's"
    for kernel in PTX_STEPS[slug]["kernels"]:
        stats = usage[kernel]
        assert stats["spill_stores"] == stats["spill_loads"] == stats["stack_bytes"] == 0, (kernel, stats)
        # __launch_bounds__(384, 1): 168 a thread at entry; setmaxnreg moves them to the consumers.
        assert 0 < stats["registers"] <= 168, (kernel, stats)
    # A wgmma the compiler could not keep asynchronous, or a setmaxnreg it dropped, is a warning.
    assert not warnings, "\n".join(warnings)


# (step, number, precision, source, operands module and function, its launches in order)
REGISTERED = [
    (STEP07, 7, "fp16x3", SOURCE, "fp16x3_lse.py", "call_fp16x3_lse",
     ("wgmma_fp16x3_sigmoid_split", "wgmma_fp16x3_partial_lse")),
    (STEP08, 8, "fp16", SOURCE08, "fp16_lse.py", "call_fp16_lse",
     ("wgmma_fp16_sigmoid", "wgmma_fp16_partial_lse")),
    (STEP08_BF16, 8, "bf16", SOURCE08, "fp16_lse.py", "call_bf16_lse",
     ("wgmma_fp16_sigmoid", "wgmma_fp16_partial_lse")),   # the binding's GEMMs take either type
]


@pytest.mark.parametrize("v,number,precision,source,module,operands_fn,launches", REGISTERED,
                         ids=lambda a: getattr(a, "slug", None))
def test_variant_is_well_formed_and_registered_before_the_by_batch_step(
        v, number, precision, source, module, operands_fn, launches):
    assert (v.number, v.precision) == (number, precision)
    assert v.needs_gpu and not v.triton and not v.baseline
    stem = source.stem.split("_", 1)[1]
    assert v.source == f"p45/{source.name}" and v.slug in (stem, stem.replace("fp16", precision))
    assert P45.variants.get(v.slug) is v, "the step is in the ladder"
    assert P45.variants["faithful_by_batch"].number == 1 + max(w.number for w in p45mod.HOPPER_VARIANTS)
    # The by-batch step's last band tries step 07 first and falls back to step 05 off Hopper
    # (the fp32-faithful tier's routes: step 08, kb-pass, is in none).
    (*_, last) = P45.variants["faithful_by_batch"].routes
    assert last.max_rows is None and last.slugs == ("wgmma_fp16x3_lse", "triton_fused_lse_fp16x3")
    binding = BINDING.read_text()
    # Its build hands both GEMMs, in launch order, to its operands module (as the export does).
    call = export.step_call(P45, v.slug)
    assert (call.kind, call.filename, call.operands) == ("hopper", module, operands_fn)
    assert call.function == launches
    for fn in call.function:
        assert f'm.def("{fn}"' in binding


def test_shared_constants_agree():
    """The C++ side's h scale, padding and logsumexp tile are the Python side's."""
    split = load_step("common", "fp16x3_split.py")
    text = LAUNCHERS.read_text()
    const = dict(re.findall(r"constexpr \w+ (kHopper\w+) = ([0-9.]+)f?;", text))
    assert float(const["kHopperHScale"]) == H_SCALE
    assert int(const["kHopperPad"]) == split.K_ALIGN
    assert int(const["kHopperLseTile"]) == LSE_TILE
    k05 = load_step("p45", "05_triton_fp16x3_lse.py")
    assert k05.H_SCALE == H_SCALE, "step 07 stores h split as step 05 does"


# -- a torch model of the two kernels' dataflow (on CPU, float64 products of the fp16 parts) -------


def _split_product(ah, al, ai, bh, bl, bi):
    """The kernel's v * ai[m] * bi[n] in float64 (the tensor cores' errors are the GPU tests')."""
    a, b = ah.double(), bh.double()
    v = a @ b.T + (a @ bl.double().T + al.double() @ b.T) / 2048
    return (v * ai.double()[:, None] * bi.double()[None, :]).float()


def gemm1_model(xh, xl, x_inv, wh, wl, w_inv, b):
    """GEMM1's epilogue as binding_hopper.cpp's wgmma_fp16x3_sigmoid_split defines it: bias, the
    stable sigmoid, the split with the fixed scale, zero columns H.. Hp."""
    z1 = _split_product(xh, xl, x_inv, wh, wl, w_inv) + b
    e = torch.exp(-z1.abs())
    hval = torch.where(z1 >= 0, 1 / (1 + e), e / (1 + e))
    hs = torch.zeros(xh.shape[0], -(-wh.shape[0] // 64) * 64)
    hs[:, :wh.shape[0]] = hval * H_SCALE
    hh = hs.half()
    return hh, ((hs - hh.float()) * 2048).half()


def gemm2_model(hh, hl, wh, wl, w_inv, b, h_inv=1 / H_SCALE):
    """GEMM2's epilogue as wgmma_fp16x3_partial_lse defines it: per row and 128-column tile, the
    max over the valid columns and the sum-exp."""
    m = hh.shape[0]
    z = _split_product(hh, hl, torch.full((m,), h_inv), wh, wl, w_inv) + b
    n = z.shape[1]
    t = -(-n // LSE_TILE)
    zp = torch.full((m, t * LSE_TILE), float("-inf"))
    zp[:, :n] = z
    tiles = zp.view(m, t, LSE_TILE)
    pmax = tiles.max(dim=2).values
    return pmax, torch.exp(tiles - pmax[:, :, None]).sum(dim=2)


def model_of_step07(x, w1, b1, w2, b2):
    """What step 07 computes: its host side (common/fp16x3_lse.py, the variant's very build but
    for the extension) with the two kernels written as their epilogues do it. Returns out and
    GEMM1's (hh, hl)."""
    h_split = []

    def gemm1(*args):
        h_split[:] = gemm1_model(*args)
        return tuple(h_split)

    out = load_step("common", "fp16x3_lse.py").call_fp16x3_lse(gemm1, gemm2_model, x, w1, b1, w2, b2)
    return out, *h_split


def gemm1_model16(x16, w16, b):
    """Step 08's GEMM1 as wgmma_fp16_sigmoid defines it: the 16-bit operands' product (float64
    here), bias, sigmoid, rounded once to their type, zero columns H.. Hp."""
    hval = torch.sigmoid(x16.double() @ w16.double().T + b.double())
    hp = torch.zeros(x16.shape[0], -(-w16.shape[0] // 64) * 64, dtype=torch.float64)
    hp[:, :w16.shape[0]] = hval
    return hp.to(x16.dtype)


def gemm2_model16(h16, w16, b):
    """Step 08's GEMM2 as wgmma_fp16_partial_lse defines it: step 07's pairs of h16 @ w16.T + b."""
    return gemm2_model(h16, torch.zeros_like(h16), w16, torch.zeros_like(w16),
                       torch.ones(w16.shape[0]), b, h_inv=1.0)


def model_of_step08(x, w1, b1, w2, b2, dtype=torch.float16):
    """What step 08 (in ``dtype``) computes: its host side (common/fp16_lse.py) with the kernels'
    models. Returns out and GEMM1's h."""
    h = []

    def gemm1(*args):
        h[:] = [gemm1_model16(*args)]
        return h[0]

    fp16_lse = load_step("common", "fp16_lse.py")
    return fp16_lse.call_fp16_lse(gemm1, gemm2_model16, x, w1, b1, w2, b2, dtype), h[0]


def emulated16(x, w1, b1, w2, b2, dtype):
    """Step 08 in torch: x, W1, W2 and h rounded to ``dtype``, products and sums in float64."""
    h = torch.sigmoid(x.to(dtype).double() @ w1.to(dtype).double().T + b1.double()).to(dtype)
    return torch.logsumexp(h.double() @ w2.to(dtype).double().T + b2.double(), dim=1)


# (step, its model, its tolerance vs float64 per row of max(|ref|, 1))
DATAFLOW = {"wgmma_fp16x3_lse": (model_of_step07, TOL_FP32),
            "wgmma_fp16_lse": (model_of_step08, TOL_FP16),
            "wgmma_bf16_lse": (lambda *a: model_of_step08(*a, torch.bfloat16), TOL_BF16)}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU tests run the kernels themselves")
@pytest.mark.parametrize("slug", DATAFLOW)
@pytest.mark.parametrize("m,k,h,n", [(1, 1, 1, 1), (5, 70, 65, 129), (3, 33, 130, 300)])
def test_torch_model_of_the_dataflow_is_fp32_faithful(slug, m, k, h, n):
    """The kernels' design (07: one scale 2**14 for h; both: zero columns H.. Hp, K padded, -inf past
    N, pairs per 128-column tile, the combine) loses nothing beyond fp32's error (07) or fp16's
    (bf16's) rounding of the operands and h (08, which also matches the same rounding done in torch). x as a
    misaligned, strided view gives the very same out: the cast or split makes a fresh operand."""
    x, w1, b1, w2, b2 = operands("p45", m, k, h, n, seed=SEED)
    run, tol = DATAFLOW[slug]
    out, *hid = run(x, w1, b1, w2, b2)
    assert all((t[:, h:] == 0).all() for t in hid), "h's padding columns are zero"
    err = err_vs(out, reference64("p45", x, w1, b1, w2, b2))
    assert err < tol, f"{slug} {m}x{k}x{h}x{n}: {err:.2e} vs float64; seed={SEED}"
    if slug != "wgmma_fp16x3_lse":
        err = rel_error(out, emulated16(x, w1, b1, w2, b2, hid[0].dtype))
        assert err < 2e-5, f"{m}x{k}x{h}x{n}: {err:.2e} from the torch emulation; seed={SEED}"
    buf = torch.empty(2 * m * k + 3)
    x_odd = buf[3:].view(m, 2 * k)[:, ::2]   # 12 bytes off a 16-byte boundary, a column stride of 2
    x_odd.copy_(x)
    assert torch.equal(run(x_odd, w1, b1, w2, b2)[0], out)


# ----------------------------------------------------------------------------- GPU part

# (M, K, H, N): single elements; K and H not multiples of 64 (padded by the splits) nor 8; H past
# one 128-column tile of GEMM1 by a little (Hp = 192 < 256: padding written by a partial tile);
# N below, at and past one 128-column logsumexp tile; M past one and several 128-row tiles.
SIZES = [(1, 1, 1, 1), (3, 5, 7, 33), (67, 1000, 333, 129), (129, 64, 130, 128),
         (300, 520, 257, 1025)]
DEFAULT = (16384, 2048, 4096, 1024)


@pytest.fixture(scope="module")
def ext():
    return build.load_extension("p45", hopper=True)


@pytest.fixture(scope="module")
def split():
    return load_step("common", "fp16x3_split.py")


def inputs(m, k, h, n):
    return operands("p45", m, k, h, n, seed=SEED, device="cuda")


@gpu_test
def test_gemm1_writes_h_split_and_zero_padding(ext, split):
    """(hh + hl / 2048) / 2**14 is sigmoid(x @ W1.T + b1) to fp32's error; columns H.. are zero,
    and every element is written (poisoned memory would show NaN)."""
    for m, k, h, n in SIZES:
        x, w1, b1, _, _ = inputs(m, k, h, n)
        xs, ws = split.split_fp16x3(x, pad_cols_to=64), split.split_fp16x3(w1, pad_cols_to=64)
        hp = -(-h // 64) * 64
        junk = [torch.full((m, hp), float("nan"), device="cuda", dtype=torch.float16) for _ in range(2)]
        del junk  # the caching allocator hands these NaN blocks to hh and hl
        hh, hl = ext.wgmma_fp16x3_sigmoid_split(xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo, ws.inv_scale, b1)
        assert hh.shape == hl.shape == (m, hp) and hh.dtype == hl.dtype == torch.float16
        assert not hh.isnan().any() and not hl.isnan().any(), f"{m}x{k}x{h}: unwritten elements; seed={SEED}"
        assert (hh[:, h:] == 0).all() and (hl[:, h:] == 0).all(), f"{m}x{k}x{h}: padding not zero; seed={SEED}"
        got = (hh.double() + hl.double() / 2048) / ext.H_SCALE
        ref = torch.sigmoid(x.double() @ w1.double().T + b1.double())
        err = rel_error(got[:, :h], ref)
        assert err < TOL_FP32, f"{m}x{k}x{h}: h {err:.2e} vs float64; seed={SEED}"


@gpu_test
def test_gemm2_pairs_match_float64(ext, split):
    """pmax and psum per 128-column tile of z = h @ W2.T + b2 (h given split with the fixed scale)
    against float64 of the same split h; their combine is the row's logsumexp."""
    for m, k, h, n in SIZES:
        _, _, _, w2, b2 = inputs(m, k, h, n)
        hid = torch.rand(m, h, device="cuda")
        hs = torch.zeros(m, -(-h // 64) * 64, device="cuda")
        hs[:, :h] = hid * H_SCALE
        hh = hs.half()
        hl = ((hs - hh.float()) * 2048).half()
        ws = split.split_fp16x3(w2, pad_cols_to=64)
        t = -(-n // LSE_TILE)
        poison_allocator((m, t), (m, t))
        pmax, psum = ext.wgmma_fp16x3_partial_lse(hh, hl, ws.hi, ws.lo, ws.inv_scale, b2)
        assert pmax.shape == psum.shape == (m, t) and pmax.dtype == torch.float32
        h64 = ((hh.double() + hl.double() / 2048) / H_SCALE)[:, :h]
        z = h64 @ w2.double().T + b2.double()
        zp = torch.full((m, t * LSE_TILE), float("-inf"), device="cuda", dtype=torch.float64)
        zp[:, :n] = z
        tiles = zp.view(m, t, LSE_TILE)
        ref_max = tiles.max(dim=2).values
        ref_sum = torch.exp(tiles - ref_max[:, :, None]).sum(dim=2)
        assert err_vs(pmax, ref_max) < TOL_FP32, f"{m}x{h}x{n}: pmax; seed={SEED}"
        assert rel_error(psum, ref_sum) < 1e-5, f"{m}x{h}x{n}: psum; seed={SEED}"  # exp(z - max): z's abs. error
        out = load_step("common", "lse.py").combine_lse(pmax, psum)
        err = err_vs(out, torch.logsumexp(z, dim=1))
        assert err < TOL_FP32, f"{m}x{h}x{n}: {err:.2e} vs float64; seed={SEED}"


# (step, its tolerance vs float64, its tier at KernelBench's sizes)
GPU_STEPS = {"wgmma_fp16x3_lse": (STEP07, TOL_FP32, "fp32-faithful"),
             "wgmma_fp16_lse": (STEP08, TOL_FP16, "kb-pass"),
             "wgmma_bf16_lse": (STEP08_BF16, TOL_BF16, "kb-pass")}


@gpu_test
@pytest.mark.parametrize("slug", GPU_STEPS)
def test_step_matches_float64_and_earns_its_tier(slug):
    """The whole step through the variant's build against the float64 model; at a single row
    with KernelBench's other sizes, a partial row tile; its tier at KernelBench's sizes (step 08's
    float64 error printed beside its tier: KernelBench flags a speed-up above 10x); several tiles a
    block with one and two k-tiles, fewer than the ring's stages, so that a tile starts at any
    stage of it, in GEMM2 (the first two sizes) and in GEMM1 (the next two)."""
    step, tol, want = GPU_STEPS[slug]
    for m, k, h, n in [*SIZES, (1, 2048, 4096, 1024), (1000, 2048, 4096, 1024),
                       (4096, 64, 60, 2000), (4096, 100, 150, 2000), (8192, 64, 2000, 300),
                       (8192, 100, 2000, 300), DEFAULT]:
        x, w1, b1, w2, b2 = inputs(m, k, h, n)
        fn = step.build(model("p45", x, w1, b1, w2, b2))
        poison_allocator((m,), (m, -(-n // LSE_TILE)), (m, -(-h // 64) * 64))
        out = fn(x)
        assert out.shape == (m,) and out.dtype == torch.float32
        assert not out.isnan().any(), f"{slug} {m}x{k}x{h}x{n}: NaN in out; seed={SEED}"
        err = err_vs(out, reference64("p45", x, w1, b1, w2, b2))
        print(f"{slug} {m}x{k}x{h}x{n}: rel. error {err:.2e} vs float64")
        assert err < tol, f"{slug} {m}x{k}x{h}x{n}: {err:.2e} vs float64; seed={SEED}"
    assert tier("p45", out, x, w1, b1, w2, b2) == want, f"{slug}; seed={SEED}"


@gpu_test
@pytest.mark.parametrize("slug", GPU_STEPS)
def test_large_logits_and_a_nan_row(slug):
    """Logits of size ~100 (weights scaled up) keep every exp in range (out ~ 100, to the step's
    accuracy); a row of x holding NaN gives NaN in that row of out only."""
    step, tol, _ = GPU_STEPS[slug]
    m, k, h, n = 130, 200, 300, 257
    x, w1, b1, w2, b2 = inputs(m, k, h, n)
    w2 = w2 * 400.0
    fn = step.build(model("p45", x, w1, b1, w2, b2))
    out = fn(x)
    ref = reference64("p45", x, w1, b1, w2, b2)
    assert ref.abs().max() > 20, "the logits are meant to be large"
    assert rel_error(out, ref) < tol, f"{slug}; seed={SEED}"
    x_nan = x.clone()
    x_nan[7, 3] = float("nan")
    out_nan = fn(x_nan)
    assert out_nan[7].isnan()
    keep = torch.ones(m, dtype=torch.bool, device="cuda")
    keep[7] = False
    assert torch.equal(out_nan[keep], out[keep])


@gpu_test
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16bit_gemms_match_float64_of_their_16bit_operands(ext, dtype):
    """Step 08's GEMM1 writes h = dtype(sigmoid(x16 @ W16.T + b1)) to within dtype's rounding of
    h, zero past H, every element (poisoned memory would show NaN); GEMM2's pairs are those of
    float64 on the same 16-bit h and W2; a misaligned h is copied and gives the same pairs; bad
    inputs, operands of two types among them, are refused with the parameter's name."""
    half_ulp = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}[dtype]   # of h <= 1
    ops = load_step("common", "fp16_operands.py")
    for m, k, h, n in SIZES:
        x, w1, b1, w2, b2 = inputs(m, k, h, n)
        kp, hp = -(-k // 8) * 8, -(-h // 64) * 64
        x16, w1_16, w2_16 = (ops.fp16_k_padded(t, c, dtype) for t, c in ((x, kp), (w1, kp), (w2, hp)))
        junk = torch.full((m, hp), float("nan"), device="cuda", dtype=dtype)
        del junk  # the caching allocator hands this NaN block to h
        h16 = ext.wgmma_fp16_sigmoid(x16, w1_16, b1)
        assert h16.shape == (m, hp) and h16.dtype == dtype
        assert not h16.isnan().any(), f"{m}x{k}x{h}: unwritten elements; seed={SEED}"
        assert (h16[:, h:] == 0).all(), f"{m}x{k}x{h}: padding not zero; seed={SEED}"
        ref = torch.sigmoid(x16.double() @ w1_16.double().T + b1.double())[:, :h]
        assert (h16[:, :h].double() - ref).abs().max() <= half_ulp, f"{m}x{k}x{h}: h; seed={SEED}"
        t = -(-n // LSE_TILE)
        poison_allocator((m, t), (m, t))
        pmax, psum = ext.wgmma_fp16_partial_lse(h16, w2_16, b2)
        assert pmax.shape == psum.shape == (m, t) and pmax.dtype == torch.float32
        z = h16.double() @ w2_16.double().T + b2.double()
        zp = torch.full((m, t * LSE_TILE), float("-inf"), device="cuda", dtype=torch.float64)
        zp[:, :n] = z
        ref_max = zp.view(m, t, LSE_TILE).max(dim=2).values
        assert err_vs(pmax, ref_max) < TOL_FP32, f"{m}x{h}x{n}: pmax; seed={SEED}"
        out = load_step("common", "lse.py").combine_lse(pmax, psum)
        err = err_vs(out, torch.logsumexp(z, dim=1))
        assert err < TOL_FP32, f"{m}x{h}x{n}: {err:.2e} vs float64; seed={SEED}"
        buf = torch.empty(h16.numel() + 4, device="cuda", dtype=dtype)
        h_mis = buf[4:].view(h16.shape)
        h_mis.copy_(h16)
        assert h_mis.data_ptr() % 16 != 0
        pmax_mis, psum_mis = ext.wgmma_fp16_partial_lse(h_mis, w2_16, b2)
        assert torch.equal(pmax_mis, pmax) and torch.equal(psum_mis, psum)
    with pytest.raises(ValueError, match="same padded K"):
        ext.wgmma_fp16_partial_lse(h16, w2_16[:, :8], b2)
    with pytest.raises(ValueError, match="b must have"):
        ext.wgmma_fp16_sigmoid(x16, w1_16, b1[:-1])
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
    with pytest.raises(TypeError, match=f"w must be {other}"):   # x's type is the GEMM's
        ext.wgmma_fp16_sigmoid(x16.to(other), w1_16, b1)
    with pytest.raises(TypeError, match="float16"):
        ext.wgmma_fp16_sigmoid(x16.float(), w1_16, b1)


@gpu_test
def test_binding_checks_inputs_and_copies_misaligned_ones(ext, split):
    m, k, h, n = 70, 200, 136, 300
    x, w1, b1, w2, b2 = operands("p45", m, k, h, n, seed=5, device="cuda")
    xs, w1s, w2s = (split.split_fp16x3(t, pad_cols_to=64) for t in (x, w1, w2))
    hh, hl = ext.wgmma_fp16x3_sigmoid_split(xs.hi, xs.lo, xs.inv_scale, w1s.hi, w1s.lo,
                                            w1s.inv_scale, b1)
    with pytest.raises(ValueError, match="same padded K"):
        ext.wgmma_fp16x3_sigmoid_split(xs.hi[:, :192], xs.lo[:, :192], xs.inv_scale, w1s.hi,
                                       w1s.lo, w1s.inv_scale, b1)
    with pytest.raises(ValueError, match="xl must have"):
        ext.wgmma_fp16x3_sigmoid_split(xs.hi, xs.lo[:-1], xs.inv_scale, w1s.hi, w1s.lo,
                                       w1s.inv_scale, b1)
    with pytest.raises(ValueError, match="b must have"):
        ext.wgmma_fp16x3_sigmoid_split(xs.hi, xs.lo, xs.inv_scale, w1s.hi, w1s.lo,
                                       w1s.inv_scale, b1[:-1])
    with pytest.raises(TypeError, match="float16"):
        ext.wgmma_fp16x3_partial_lse(hh.float(), hl, w2s.hi, w2s.lo, w2s.inv_scale, b2)
    with pytest.raises(ValueError, match="same padded K"):
        ext.wgmma_fp16x3_partial_lse(hh, hl, w2s.hi[:, :128], w2s.lo[:, :128], w2s.inv_scale, b2)
    pmax, psum = ext.wgmma_fp16x3_partial_lse(hh, hl, w2s.hi, w2s.lo, w2s.inv_scale, b2)
    buf = torch.empty(m * hh.shape[1] + 4, device="cuda", dtype=torch.float16)
    hh_mis = buf[4:].view(hh.shape)
    hh_mis.copy_(hh)
    assert hh_mis.data_ptr() % 16 != 0
    pmax_mis, psum_mis = ext.wgmma_fp16x3_partial_lse(hh_mis, hl, w2s.hi, w2s.lo, w2s.inv_scale, b2)
    assert torch.equal(pmax_mis, pmax) and torch.equal(psum_mis, psum)


