"""Problem 12's Hopper steps (11-16 and 18: wgmma fed by TMA) and their build.

CPU part (runs anywhere nvcc 12.x+ is): each step compiles for sm_90a and its PTX shows the
Hopper machinery (wgmma.mma_async, cp.async.bulk.tensor, mbarrier waits, setmaxnreg where the
step says so); ptxas reports no spills, no stack and no warning (a serialised wgmma or an ignored
setmaxnreg is a warning); a plain sm_90 build stops with one clear line; the binding passes the
C++ front end; the variants are well formed and the K padding is exact; step 18's choice of K
splits (its host function, compiled and run here) and a torch model of its dataflow (partials over
whole k-tiles, summed in split order, then step 14's epilogue) at odd sizes.
GPU part (marked ``gpu``; one test per step or per kind of check, looping over the sizes where
it differs): every step against float64 at the error one fp16 product predicts (11-13) or at
fp32's error (14-16, 18, the fp16x3 split: fp32-faithful at KernelBench's size); step 15 against
step 14, its fallback to step 14, and its row-scale pass against the Triton split's; step 18 at
1 to 1024 rows and any number of splits, and step 14 to the bit where it runs one split.
"""

from __future__ import annotations

import re
import secrets
import subprocess
from collections import Counter

import pytest
import torch

from fusedkit import build
from fusedkit.harness import eager32, rel_error
from fusedkit.kernels import load_step
from fusedkit.mode import triton_interprets
from fusedkit.problems import p12_gemm_multiply_leakyrelu as p12mod
from kernel_helpers import entry_body, gpu_test, needs_nvcc, poison_allocator, ptxas_report
from reference import MULT, SLOPE, operands, reference64, tier
from reference import model as reference_model

P12 = p12mod.PROBLEM
HOPPER = build.hopper_sources("p12")
STEP = {p.stem.split("_", 1)[1]: p for p in HOPPER}  # "wgmma_tma" -> .../11_wgmma_tma.cu
# What each step's PTX must show: its wgmma shape, and whether it splits warpgroups by role.
WGMMA_SHAPE = {"wgmma_tma": "m64n128k16", "wgmma_warpspec": "m64n256k16",
               "wgmma_persistent": "m64n256k16", "wgmma_fp16x3": "m64n128k16",
               "wgmma_fp16x3_fused_split": "m64n128k16", "wgmma_fp16x3_multicast": "m64n128k16",
               "wgmma_fp16x3_splitk": "m64n128k16"}
WARP_SPECIALISED = {"wgmma_tma": False, "wgmma_warpspec": True, "wgmma_persistent": True,
                    "wgmma_fp16x3": True, "wgmma_fp16x3_fused_split": True,
                    "wgmma_fp16x3_multicast": True, "wgmma_fp16x3_splitk": True}
STEP_VARIANTS = [v for v in p12mod.HOPPER_VARIANTS if not v.baseline]
FP16_STEPS = [v for v in STEP_VARIANTS if v.precision == "fp16"]      # one fp16 product: 11-13
FP16X3_STEPS = [v for v in STEP_VARIANTS if v.precision == "fp16x3"]  # the split: 14-16, 18


# ----------------------------------------------------------------------------- CPU part


def test_hopper_steps_build_apart_from_the_others():
    assert [p.name for p in HOPPER][:1] == ["11_wgmma_tma.cu"]
    assert set(STEP) <= set(WGMMA_SHAPE)
    assert not set(HOPPER) & set(build.kernel_sources("p12")), "a step in both extensions"
    assert build.extension_sources("p12", hopper=True)[-1].name == "binding_hopper.cpp"
    assert all(build.required_arch(p) == "sm_90a" for p in HOPPER)
    assert all(build.required_arch(p) == "sm_90" for p in build.kernel_sources("p12"))


def test_hopper_extension_plan_targets_sm90a(own_build_dir):
    name, folder, sources, flags = build._extension_plan("p12", (9, 0), "2.11.0+cu130", "13.0",
                                                         hopper=True)
    assert name == "fusedkit_p12_hopper"
    assert "-gencode=arch=compute_90a,code=sm_90a" in flags
    assert sources[-1].name == "binding_hopper.cpp" and set(sources[:-1]) == set(HOPPER)
    _, main_folder, _, main_flags = build._extension_plan("p12", (9, 0), "2.11.0+cu130", "13.0")
    assert folder != main_folder and "-gencode=arch=compute_90,code=sm_90" in main_flags


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_load_hopper_extension_without_gpu_says_what_to_do():
    with pytest.raises(build.CudaUnavailableError, match="needs a CUDA GPU"):
        build.load_extension("p12", hopper=True)


@needs_nvcc
@pytest.mark.parametrize("src", HOPPER, ids=lambda p: p.stem)
def test_ptx_shows_wgmma_tma_and_mbarriers(src):
    text = build.ptx(src)
    assert ".target sm_90a" in text
    step = src.stem.split("_", 1)[1]
    shape = WGMMA_SHAPE[step]
    assert build.ptx_instructions(text, rf"wgmma\.mma_async\.sync\.aligned\.{shape}\.f32\.f16\.f16")
    assert build.ptx_instructions(text, r"wgmma\.(fence|commit_group|wait_group)\.sync\.aligned")
    assert build.ptx_instructions(text, r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global")
    assert build.ptx_instructions(text, r"mbarrier\.try_wait\.parity")
    assert build.ptx_instructions(text, r"mbarrier\.arrive\.expect_tx")
    has_setmaxnreg = bool(build.ptx_instructions(text, r"setmaxnreg\.(inc|dec)"))
    assert has_setmaxnreg == WARP_SPECIALISED[step], "setmaxnreg belongs to the warp-specialised steps"
    assert build.ptx_instructions(text, r"st\.global\.v2\.f32"), "the paired epilogue store"


@needs_nvcc
@pytest.mark.parametrize("src", HOPPER, ids=lambda p: p.stem)
def test_ptxas_no_spills_no_stack_no_warnings(src):
    usage, warnings = ptxas_report(src)
    assert usage, f"no kernel in ptxas output of {src.name}"
    for kernel, stats in usage.items():
        assert stats["spill_stores"] == stats["spill_loads"] == stats["stack_bytes"] == 0, (kernel, stats)
        assert 0 < stats["registers"] <= 255
    # A wgmma the compiler could not keep asynchronous, or a setmaxnreg it dropped, is a warning.
    assert not warnings, "\n".join(warnings)


@needs_nvcc
def test_multicast_step_ptx_shows_the_cluster_machinery():
    """Step 16: W's boxes multicast into both blocks of a cluster; consumers release a stage on
    both blocks' empty barriers (mapa + a remote arrive, CTA-scope release: no cluster-scope
    fence per arrival, no cluster-scope acquire per poll); the cluster meets twice (after
    barrier set-up, before exit)."""
    text = build.ptx(STEP["wgmma_fp16x3_multicast"])
    assert build.ptx_instructions(
        text, r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes"
              r"\.multicast::cluster")
    assert build.ptx_instructions(text, r"mapa\.shared::cluster")
    assert build.ptx_instructions(text, r"mbarrier\.arrive\.shared::cluster\.b64")
    assert not build.ptx_instructions(text, r"mbarrier\.(arrive|try_wait)\S*\.(release|acquire)\.cluster"), \
        "a cluster-scope fence per arrival or poll"
    assert len(build.ptx_instructions(text, r"barrier\.cluster\.arrive")) == 2
    assert len(build.ptx_instructions(text, r"barrier\.cluster\.wait")) == 2
    # Step 14 has no cluster at all: the multicast is this step's one change.
    plain = build.ptx(STEP["wgmma_fp16x3"])
    assert not build.ptx_instructions(plain, r"multicast|mapa|barrier\.cluster")


@needs_nvcc
def test_plain_sm90_build_stops_with_one_clear_line(tmp_path, own_build_dir):
    with pytest.raises(build.BuildError, match="needs the sm_90a target"):
        build.ptx(STEP["wgmma_tma"], arch="sm_90")


def test_every_hopper_step_has_a_variant_and_the_binding_defines_it():
    binding = (build.KERNELS_DIR / "p12" / build.HOPPER_BINDING).read_text()
    by_source = {v.source: v for v in STEP_VARIANTS}
    for src in HOPPER:
        v = by_source.get(f"p12/{src.name}")
        assert v is not None, f"{src.name} has no variant in HOPPER_VARIANTS"
        assert v.precision == ("fp16x3" if "fp16x3" in v.slug else "fp16")
        assert v.needs_gpu and not v.triton and not v.baseline
        assert v.number == int(src.name[:2]) and v.slug == src.stem.split("_", 1)[1]
        assert any(f'{d}("{v.slug}"' in binding for d in ("step_args", "fp16x3_args", "m.def")), \
            f"binding_hopper.cpp does not define {v.slug}"
    assert [v.slug for v in FP16X3_STEPS] == ["wgmma_fp16x3", "wgmma_fp16x3_fused_split",
                                             "wgmma_fp16x3_multicast", "wgmma_fp16x3_splitk"]
    (bar,) = [v for v in p12mod.HOPPER_VARIANTS if v.baseline]
    assert bar.slug == "cublas_fp16_epilogue" and bar.precision == "fp16" and bar.needs_gpu
    # In the ladder, once each, in step order: the bar at step 0, then 11-16 between 10 and 17,
    # 18 between 17 and the by-batch step.
    assert all(P12.variants[v.slug] is v for v in p12mod.HOPPER_VARIANTS)
    order = [v.slug for v in P12.ladder() if v.number in range(10, 20)]
    assert order == ["triton_tf32_persistent", "wgmma_tma", "wgmma_warpspec", "wgmma_persistent",
                     "wgmma_fp16x3", "wgmma_fp16x3_fused_split", "wgmma_fp16x3_multicast",
                     "small_batch_stream", "wgmma_fp16x3_splitk", "faithful_by_batch"]
    numbers = Counter(v.number for v in P12.ladder() if not v.baseline)
    assert {n for n, c in numbers.items() if c > 1} == {4, 8}, "only steps 4 and 8 are families"
    assert sorted(numbers) == list(range(1, 20)) and P12.variants["faithful_by_batch"].number == 19


@needs_nvcc
def test_fused_split_ptx_splits_x_in_shared_memory_before_the_wgmmas():
    """Step 15's design in its PTX: x's fp32 tile read from shared memory, rounded to fp16 (hi and
    lo) and written back, then fence.proxy.async (generic writes made visible to wgmma's async
    proxy) and a 128-thread named barrier per consumer (ids 1 and 2, never the block's 0), all
    before the k-tile's first wgmma; x arrives by two TMA loads a stage."""
    src = STEP["wgmma_fp16x3_fused_split"]
    lines = [ln.strip() for ln in build.ptx(src).splitlines()]

    def first(pattern, start=0):
        rx = re.compile(pattern)
        return next(i for i in range(start, len(lines)) if rx.search(lines[i]))

    # The consumers' k-loop starts at the first full-barrier wait after setmaxnreg.inc.
    loop = first(r"mbarrier\.try_wait\.parity", first(r"setmaxnreg\.inc"))
    mma = first(r"wgmma\.mma_async", loop)
    body = lines[loop:mma]
    assert sum(bool(re.search(r"ld\.shared\.v4\.f32", ln)) for ln in body) == 8  # 32 fp32 a thread
    assert sum(bool(re.search(r"st\.shared\.v4\.(u32|b32)", ln)) for ln in body) == 8  # 4 hi + 4 lo
    assert sum(bool(re.search(r"cvt\.rn\.f16(x2)?\.f32", ln)) for ln in body) >= 32  # 64 values x 2
    assert any(re.search(r"bar\.warp\.sync", ln) for ln in body), "the partner reads before we write"
    last_store = max(i for i, ln in enumerate(body) if re.search(r"st\.shared\.v4", ln))
    fences = [i for i, ln in enumerate(body) if "fence.proxy.async.shared::cta" in ln]
    assert fences and min(fences) > last_store, "the fence must follow the generic-proxy writes"
    bars = [ln for ln in body[min(fences):] if re.match(r"bar\.sync\s", ln)]
    assert {ln.rstrip(";") for ln in bars} == {"bar.sync 1, 128", "bar.sync 2, 128"}, bars
    tma = build.ptx_instructions("\n".join(lines), r"cp\.async\.bulk\.tensor\.2d")
    assert len(tma) == 4, "x as two fp32 boxes, wh and wl"


@needs_nvcc
def test_splitk_ptx_stores_partials_and_reduces_them_in_a_second_kernel():
    """Step 18: the GEMM kernel stores its fp32 partials (pairs; it reads nothing from global
    memory: no bias, no scales) and a second kernel, scalar and float4, adds them with streaming
    loads and applies the epilogue; the copies and barriers are step 14's (the tests above)."""
    src = STEP["wgmma_fp16x3_splitk"]
    text = build.ptx(src)
    gemm = entry_body(text, "p12_wgmma_fp16x3_splitk_kernel")
    assert build.ptx_instructions(gemm, r"st\.global\.v2\.f32") and not build.ptx_instructions(gemm, r"ld\.global")
    assert len(build.ptx_instructions(gemm, r"wgmma\.mma_async")) == 12, "3 products x 4 k16 a k-tile"
    reducers = re.findall(r"\.entry (\w*p12_splitk_reduce_kernel\w*)\(", text)
    assert len(reducers) == 2, reducers
    (vec4,) = [entry_body(text, r) for r in reducers if "ILi4E" in r]
    assert build.ptx_instructions(vec4, r"ld\.global\.cs\.v4\.f32")
    assert build.ptx_instructions(vec4, r"st\.global\.v4\.f32")
    usage, _ = ptxas_report(src)
    assert "p12_wgmma_fp16x3_splitk_kernel" in usage and len(usage) == 3


# What the split count's host function gives (M, N, K, SMs -> splits): as many splits as one wave
# of the SMs holds, at least 4 k-tiles a split, 1 (step 14 itself) where the tiles fill the SMs.
SPLITS = {(16, 8192, 8192, 132): 2, (64, 8192, 8192, 132): 2, (128, 8192, 8192, 132): 2,
          (129, 8192, 8192, 132): 1, (1024, 8192, 8192, 132): 1, (8, 1000, 4160, 132): 16,
          (8, 8192, 128, 132): 1, (8, 8192, 512, 132): 2, (1, 128, 8192, 132): 32,
          (1, 128, 8192, 78): 32, (1, 512, 8192, 78): 19}


@needs_nvcc
def test_splitk_chooses_a_wave_of_blocks_with_whole_k_tiles(tmp_path):
    """p12::wgmma_fp16x3_splitk_splits, compiled with its step by nvcc and run on this CPU (no
    kernel is launched)."""
    src = STEP["wgmma_fp16x3_splitk"]
    calls = "".join(f'    std::printf("%d\\n", p12::wgmma_fp16x3_splitk_splits({m}, {n}, {k}, {sms}));\n'
                    for m, n, k, sms in SPLITS)
    main = tmp_path / "main.cu"
    main.write_text(f'#include <cstdio>\n#include "{src}"\nint main() {{\n{calls}    return 0;\n}}\n')
    exe = tmp_path / "main"
    subprocess.run([build._nvcc_path(), "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17",
                    f"-I{src.parent}", "-o", str(exe), str(main)], check=True, capture_output=True,
                   timeout=600)
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60).stdout.split()
    assert dict(zip(SPLITS, map(int, got))) == SPLITS


def splitk_model(splits: int):
    """Step 18 in torch, given the split operands (call_fp16x3's arguments): per split s of S, its
    k-tiles [k_tiles * s // S, k_tiles * (s + 1) // S), each k-tile's hi*hi from zero (float64
    here, the tensor cores' own error is the GPU tests') added in fp32, the cross products summed
    in fp32, the partial sum + cross / 2048; then the partials added in split order, the scales,
    b, the multiplier and LeakyReLU, in fp32 as the second kernel does."""
    def run(xh, xl, x_inv, wh, wl, w_inv, b, multiplier, slope):
        k_tiles = -(-xh.shape[1] // 64)
        ah, al, bh, bl = (t.double() for t in (xh, xl, wh, wl))
        partials = []
        for s in range(splits):
            acc = torch.zeros(xh.shape[0], wh.shape[0])
            cross = torch.zeros_like(acc)
            for kt in range(k_tiles * s // splits, k_tiles * (s + 1) // splits):
                k = slice(64 * kt, 64 * kt + 64)
                acc += (ah[:, k] @ bh[:, k].T).float()
                cross += (ah[:, k] @ bl[:, k].T + al[:, k] @ bh[:, k].T).float()
            partials.append(acc + cross / 2048)
        total = partials[0]
        for p in partials[1:]:
            total = total + p
        v = total * x_inv[:, None] * w_inv[None, :] + b
        return torch.nn.functional.leaky_relu(v * multiplier, slope)
    return run


@pytest.mark.skipif(not triton_interprets(), reason="splits x with Triton on CPU tensors: the interpreter only")
@pytest.mark.parametrize("m", [1, 8, 17, 64])
@pytest.mark.parametrize("k,splits", [(200, 3), (330, 4), (330, 6), (70, 1)])
def test_torch_model_of_the_splitk_dataflow_is_fp32_faithful(m, k, splits):
    """Splitting K into ranges of whole k-tiles (K not a multiple of S x 64: uneven ranges, the
    last k-tile zero-padded; one k-tile a split at S = k-tiles) and adding the partials in a fixed
    order loses nothing beyond fp32's error: fp32-faithful against float64, about as close as eager
    fp32. x as a misaligned, strided view gives the very same y: the split makes a fresh operand."""
    split = load_step("common", "fp16x3_split.py")
    x, w, b = operands("p12", m, k, 33, seed=SEED)
    out = split.call_fp16x3(splitk_model(splits), x, w, b, MULT, SLOPE)
    ref = reference64("p12", x, w, b)
    err, eager = rel_error(out, ref), rel_error(eager32(reference_model("p12", x, w, b), [x]), ref)
    assert err < 1e-6 and err <= 4 * eager + 1e-7, f"{m}x{k}, S={splits}: {err:.2e} (eager {eager:.2e}); seed={SEED}"
    assert tier("p12", out, x, w, b) == "fp32-faithful", f"{m}x{k}, S={splits}; seed={SEED}"
    buf = torch.empty(2 * m * k + 3)
    x_odd = buf[3:].view(m, 2 * k)[:, ::2]   # 12 bytes off a 16-byte boundary, a column stride of 2
    x_odd.copy_(x)
    assert torch.equal(split.call_fp16x3(splitk_model(splits), x_odd, w, b, MULT, SLOPE), out)


@pytest.mark.skipif(not triton_interprets(), reason="runs Triton on CPU tensors: the interpreter only")
def test_fused_x_feeder_passes_x_as_it_is_or_falls_back_to_step_14(monkeypatch):
    """call_fp16x3_fused_x: fp32 x with its row scales and W's cached split go to the fused
    function; an x the TMA cannot load (here: any CPU tensor) takes step 14's path instead."""
    split = load_step("common", "fp16x3_split.py")
    seen = []

    def fake(tag):
        return lambda *args: seen.append((tag, args)) or torch.zeros(1)

    scales = lambda x: seen.append(("scales", (x,))) or (torch.ones(x.shape[0]), torch.ones(x.shape[0]))  # noqa: E731
    w, b, x = torch.rand(4, 70), torch.rand(4), torch.rand(3, 70)
    assert not split.fused_x_eligible(x)
    split.call_fp16x3_fused_x(scales, fake("fused"), fake("step14"), x, w, b, 2.0, 0.1)
    ((tag, args),) = seen
    assert tag == "step14" and args[0].shape == (3, 128) and args[0].dtype == torch.float16
    seen.clear()
    monkeypatch.setattr(split, "fused_x_eligible", lambda x: True)
    split.call_fp16x3_fused_x(scales, fake("fused"), fake("step14"), x, w, b, 2.0, 0.1)
    (s_tag, (s_x,)), (tag, args) = seen
    assert (s_tag, tag) == ("scales", "fused") and s_x is x and args[0] is x
    ws = split.split_weight_cached(w)
    assert args[3] is ws.hi and args[4] is ws.lo and args[3].shape == (4, 128)
    assert args[-2:] == (2.0, 0.1)
    with pytest.raises(ValueError, match="70 columns"):
        split.call_fp16x3_fused_x(scales, fake("fused"), fake("step14"), torch.rand(3, 69), w, b)


@pytest.mark.parametrize("k,k_padded", [(5, 8), (8, 8), (17, 24)])
def test_fp16_k_padding_is_exact(k, k_padded):
    x = torch.rand(3, k) * 2 - 1
    w = torch.rand(4, k) * 2 - 1
    pad = load_step("common", "fp16_operands.py").fp16_k_padded
    xp, wp = pad(x, k_padded), pad(w, k_padded)
    assert xp.shape == (3, k_padded) and xp.dtype == torch.float16 and xp.is_contiguous()
    assert (xp[:, k:] == 0).all() and torch.equal(xp[:, :k], x.half())
    # The zero columns add nothing: the product equals the unpadded fp16 product.
    torch.testing.assert_close(xp.double() @ wp.double().T, x.half().double() @ w.half().double().T)
    with pytest.raises(ValueError, match="k_padded"):
        pad(x, k - 1)


def test_fp16_operands_cast_x_per_call_and_w_once_per_version():
    ops = load_step("common", "fp16_operands.py")
    seen = []
    fn = lambda *args: seen.append(args) or args[0]  # noqa: E731 - stands in for the kernel
    w, b = torch.rand(4, 13), torch.rand(4)
    x = torch.rand(3, 13)
    ops.call_fp16(fn, x, w, b, 2.0, 0.1)
    ops.call_fp16(fn, x * 2, w, b, 2.0, 0.1)
    (x16, w16, b32, c, slope), second = seen
    assert x16.shape == (3, 16) and w16.shape == (4, 16) and (c, slope) == (2.0, 0.1)
    assert torch.equal(x16[:, :13], x.half()) and b32.dtype == torch.float32
    assert second[1] is w16 and not torch.equal(second[0], x16)   # W cached, x cast again
    with torch.no_grad():
        w.mul_(2)                                                 # a new version: cast again
    ops.call_fp16(fn, x, w, b, 2.0, 0.1)
    assert seen[-1][1] is not w16 and torch.equal(seen[-1][1][:, :13], w.half())
    with pytest.raises(ValueError, match="13 columns"):
        ops.call_fp16(fn, torch.rand(3, 12), w, b, 2.0, 0.1)


# ----------------------------------------------------------------------------- GPU part

# (M, K, N). Odd on every axis: M = 1, N not a multiple of 128 or 256, K % 8 != 0 (padded),
# K not a multiple of 64 (TMA zero-fills the last k-tile), N odd (scalar stores), M and N past
# one tile; then KernelBench's size.
SIZES = [(1, 8, 1), (7, 13, 5), (129, 520, 257), (300, 4104, 1000), (1024, 8192, 8192)]
SEED = secrets.randbits(31)   # fresh inputs every run; quoted in messages


@pytest.fixture(scope="module")
def ext():
    return build.load_extension("p12", hopper=True)


def inputs(M, K, N):
    return operands("p12", M, K, N, seed=SEED, device="cuda")


def built(v, x, w, b):
    """The registered step ``v`` built on the model holding w and b."""
    return v.build(P12.model_with(P12.sizes(batch_size=x.shape[0], in_features=x.shape[1],
                                            out_features=w.shape[0]), w, b, device="cuda"))


@gpu_test
@pytest.mark.parametrize("v", FP16_STEPS, ids=lambda v: v.slug)
def test_step_matches_the_fp16_product(v):
    """Against float64 on the fp16-rounded inputs the only difference is fp32 accumulation
    (~1e-6); against the exact float64 product it is one fp16 rounding of each input: each
    product x*w off by at most 2**-10 of |x*w|, so every output within 2**-10 of
    multiplier * (|x| @ |w|.T) (a relative bound fails where terms cancel: 2.6e-3 at 1x8x1 on
    the H200, seed 521321363), and visibly not fp32 when K is long."""
    for M, K, N in SIZES:
        x, w, b = inputs(M, K, N)
        fn = built(v, x, w, b)
        poison_allocator((M, N))
        out = fn(x)
        assert out.shape == (M, N) and out.dtype == torch.float32
        assert not out.isnan().any(), f"{v.slug} {M}x{K}x{N} left unwritten outputs; seed={SEED}"
        err16 = rel_error(out, reference64("p12", x.half().float(), w.half().float(), b))
        assert err16 < 1e-5, f"{v.slug} {M}x{K}x{N}: {err16:.2e} vs the fp16 product; seed={SEED}"
        ref = reference64("p12", x, w, b)
        bound = 1.01 * 2.0**-10 * MULT * (x.double().abs() @ w.double().abs().T) + 1e-7
        over = ((out.double() - ref).abs() - bound).max().item()
        assert over <= 0, f"{v.slug} {M}x{K}x{N}: {over:.2e} past one fp16 rounding's bound; seed={SEED}"
        if K >= 1000:
            err = rel_error(out, ref)
            assert err > 1e-5, f"{v.slug}: {err:.2e} looks like fp32, not one fp16 product"


@gpu_test
@pytest.mark.parametrize("v", FP16X3_STEPS, ids=lambda v: v.slug)
def test_fp16x3_step_is_fp32_accurate(v):
    """Three fp16 products on the split operands, hi*hi summed outside the tensor cores: the
    error against float64 is fp32's (~2.5e-7 at K = 8192 on the H200 for step 09, the same
    math), far below one fp16 product's ~3e-4, fp32-faithful at KernelBench's size; rows past
    M, columns past N never written."""
    for M, K, N in SIZES:
        x, w, b = inputs(M, K, N)
        out = written_and_fp32_accurate(built(v, x, w, b), x, w, b, f"{v.slug} {M}x{K}x{N}")
    assert tier("p12", out, x, w, b) == "fp32-faithful", f"{v.slug}; seed={SEED}"


def written_and_fp32_accurate(fn, x, w, b, what: str, *poison: tuple[int, ...]) -> torch.Tensor:
    """fn(x) into NaN-poisoned memory (y's shape and ``poison``): every element of y written and
    within fp32's error of float64 (1e-6). Returns y."""
    M, N = x.shape[0], w.shape[0]
    poison_allocator((M, N), *poison)
    out = fn(x)
    assert out.shape == (M, N) and out.dtype == torch.float32
    assert not out.isnan().any(), f"{what} left unwritten outputs; seed={SEED}"
    err = rel_error(out, reference64("p12", x, w, b))
    assert err < 1e-6, f"{what}: {err:.2e} vs float64, not fp32-accurate; seed={SEED}"
    return out


@gpu_test
def test_fp16x3_binding_checks_and_nan_rows(ext):
    """The split operands' shapes are checked; a row of x holding NaN (inv_scale NaN) yields a
    NaN row of y and leaves the other rows exact; misaligned split operands are copied."""
    split = load_step("common", "fp16x3_split.py")
    M, K, N = 130, 200, 136  # K padded to 256 by the split
    x, w, b = inputs(M, K, N)
    xs, ws = split.split_fp16x3(x, pad_cols_to=64), split.split_fp16x3(w, pad_cols_to=64)
    ref = reference64("p12", x, w, b)
    out = ext.wgmma_fp16x3(xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo, ws.inv_scale, b, MULT, SLOPE)
    assert rel_error(out, ref) < 1e-6
    with pytest.raises(ValueError, match="same padded K"):
        ext.wgmma_fp16x3(xs.hi[:, :192], xs.lo[:, :192], xs.inv_scale, ws.hi, ws.lo,
                         ws.inv_scale, b)
    with pytest.raises(ValueError, match="xl must have"):
        ext.wgmma_fp16x3(xs.hi, xs.lo[:-1], xs.inv_scale, ws.hi, ws.lo, ws.inv_scale, b)
    with pytest.raises(ValueError, match="w_inv must have"):
        ext.wgmma_fp16x3(xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo, ws.inv_scale[:-1], b)
    buf = torch.empty(M * 256 + 4, device="cuda", dtype=torch.float16)
    xh_mis = buf[4:].view(M, 256)
    xh_mis.copy_(xs.hi)
    assert xh_mis.data_ptr() % 16 != 0
    out_mis = ext.wgmma_fp16x3(xh_mis, xs.lo, xs.inv_scale, ws.hi, ws.lo, ws.inv_scale, b)
    assert torch.equal(out_mis, out)
    x_nan = x.clone()
    x_nan[7, 3] = float("nan")
    xs_nan = split.split_fp16x3(x_nan, pad_cols_to=64)
    out_nan = ext.wgmma_fp16x3(xs_nan.hi, xs_nan.lo, xs_nan.inv_scale, ws.hi, ws.lo,
                               ws.inv_scale, b)
    assert out_nan[7].isnan().all()
    keep = torch.ones(M, dtype=torch.bool, device="cuda")
    keep[7] = False
    assert torch.equal(out_nan[keep], out[keep])


@gpu_test
def test_multicast_step_equals_step_14_bit_for_bit(ext):
    """Step 16 changes who copies W's boxes, not the arithmetic: the same tiles and the same adds
    per element, so y is step 14's to the bit, a NaN row included; with 1 and 3 row tiles the
    last pair's second block has no rows and must still feed its partner. Three calls in a row:
    a cluster that left early or a barrier left mid-phase would show on the next launch."""
    split = load_step("common", "fp16x3_split.py")
    for M, K, N in [(67, 1000, 333), (300, 4104, 1000), (1024, 8192, 8192)]:
        x, w, b = inputs(M, K, N)
        x[M // 2, 1] = float("nan")
        xs, ws = split.split_fp16x3(x, pad_cols_to=64), split.split_fp16x3(w, pad_cols_to=64)
        args = (xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo, ws.inv_scale, b, MULT, SLOPE)
        poison_allocator((M, N))
        want = ext.wgmma_fp16x3(*args)
        for _ in range(3):
            poison_allocator((M, N))
            got = ext.wgmma_fp16x3_multicast(*args)
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True,
                                       msg=lambda m: f"{M}x{K}x{N}, seed={SEED}: {m}")
        assert got[M // 2].isnan().all() and not got[(M // 2 + 1) % M].isnan().any()


# (M, K, N) for step 18: 1 to 64 rows (one row tile, split K), K and N odd (K not a multiple of
# the splits' 64-column k-tiles, N not of 128), KernelBench's shape at 16 rows, and 1024 rows
# (one split: step 14 itself).
SPLITK_SIZES = [(1, 4104, 1000), (8, 4104, 1001), (16, 8192, 8192), (64, 1000, 8191), (1024, 8192, 8192)]


@gpu_test
@pytest.mark.parametrize("M,K,N", SPLITK_SIZES, ids=lambda d: str(d))
def test_splitk_step_is_fp32_faithful_from_one_row_to_1024(M, K, N):
    """Step 18 as registered (x split per call, W once): fp32-faithful against float64 on fresh
    inputs, every output written (NaN-poisoned output and workspace blocks), the same bits on a
    second call (the partials are added in a fixed order); at 1024 rows, one split: step 14's y."""
    x, w, b = inputs(M, K, N)
    fn = built(P12.variants["wgmma_fp16x3_splitk"], x, w, b)
    out = written_and_fp32_accurate(fn, x, w, b, f"{M}x{K}x{N}", (2, M, N), (16, M, N))
    assert tier("p12", out, x, w, b) == "fp32-faithful", f"{M}x{K}x{N}; seed={SEED}"
    poison_allocator((M, N), (2, M, N), (16, M, N))
    assert torch.equal(fn(x), out), f"{M}x{K}x{N}: not deterministic; seed={SEED}"
    if M == 1024:
        assert torch.equal(out, built(P12.variants["wgmma_fp16x3"], x, w, b)(x))


@gpu_test
def test_splitk_any_split_count_and_a_nan_row(ext):
    """Forced split counts (1, 2, 3 and one k-tile a split): each within fp32's error of float64,
    a NaN row of x a NaN row of y and no other; one split through the workspace is step 14's y to
    the bit (the same adds, the reduction's scale-bias-LeakyReLU in step 14's order); too many
    splits are refused in one line."""
    split = load_step("common", "fp16x3_split.py")
    for M, K, N in [(1, 4104, 1000), (17, 520, 257), (64, 4104, 1001), (130, 1000, 136)]:
        x, w, b = inputs(M, K, N)
        nan_row = M // 2
        x[nan_row, 1] = float("nan")
        keep = torch.ones(M, dtype=torch.bool, device="cuda")
        keep[nan_row] = False
        xs, ws = split.split_fp16x3(x, pad_cols_to=64), split.split_fp16x3(w, pad_cols_to=64)
        args = (xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo, ws.inv_scale, b, MULT, SLOPE)
        ref = reference64("p12", x[keep], w, b)
        want = ext.wgmma_fp16x3(*args)
        k_tiles = xs.hi.shape[1] // 64
        for s in sorted({1, 2, 3, k_tiles}):
            poison_allocator((M, N), (s, M, N))
            got = ext.wgmma_fp16x3_splitk(*args, splits=s)
            at = f"{M}x{K}x{N}, splits={s}, seed={SEED}"
            assert got[nan_row].isnan().all() and not got[keep].isnan().any(), at
            assert rel_error(got[keep], ref) < 1e-6, at
            if s == 1:
                torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{at}: {m}")
        with pytest.raises(ValueError, match="splits"):
            ext.wgmma_fp16x3_splitk(*args, splits=k_tiles + 1)


@gpu_test
def test_fused_split_nan_row_and_binding_checks(ext):
    """Step 15: a row of x holding NaN gives a NaN row of y and leaves the others as they were;
    the binding refuses, in one line, an x the TMA cannot load and a W split of the wrong K."""
    split = load_step("common", "fp16x3_split.py")
    M, K, N = 130, 200, 136
    x, w, b = inputs(M, K, N)
    ws = split.split_fp16x3(w, pad_cols_to=64)
    scale, inv = ext.x_row_scales(x)
    out = ext.wgmma_fp16x3_fused_split(x, scale, inv, ws.hi, ws.lo, ws.inv_scale, b, MULT, SLOPE)
    assert rel_error(out, reference64("p12", x, w, b)) < 1e-6
    x_nan = x.clone()
    x_nan[7, 3] = float("nan")
    s_nan, i_nan = ext.x_row_scales(x_nan)
    out_nan = ext.wgmma_fp16x3_fused_split(x_nan, s_nan, i_nan, ws.hi, ws.lo, ws.inv_scale, b,
                                           MULT, SLOPE)
    assert out_nan[7].isnan().all()
    keep = torch.ones(M, dtype=torch.bool, device="cuda")
    keep[7] = False
    assert torch.equal(out_nan[keep], out[keep])
    with pytest.raises(ValueError, match="multiple of 4"):
        ext.wgmma_fp16x3_fused_split(x[:, :198].contiguous(), scale, inv, ws.hi, ws.lo,
                                     ws.inv_scale, b)
    with pytest.raises(ValueError, match="contiguous and 16-byte aligned"):
        ext.wgmma_fp16x3_fused_split(x[:, :196], scale, inv, ws.hi[:, :192].contiguous(),
                                     ws.lo[:, :192].contiguous(), ws.inv_scale, b)
    with pytest.raises(ValueError, match="rounded up to 64"):
        ext.wgmma_fp16x3_fused_split(x, scale, inv, ws.hi[:, :192], ws.lo[:, :192], ws.inv_scale, b)
    with pytest.raises(ValueError, match="x_scale and x_inv"):
        ext.wgmma_fp16x3_fused_split(x, scale[:-1], inv, ws.hi, ws.lo, ws.inv_scale, b)


@gpu_test
def test_fused_split_matches_step_14_or_falls_back_to_it():
    """Same split (the scale pass and the in-place conversion reproduce the Triton split), same
    wgmmas in the same order: at KernelBench's size step 15's y equals step 14's to
    fp32-faithful level (bit for bit expected; a wrong swizzle slot would be off by O(1)). An x
    the TMA cannot load as it is (K % 4 != 0, strided rows, a start not 16-byte aligned) goes
    through step 14's path: the same y, bit for bit."""
    x, w, b = inputs(1024, 8192, 8192)
    out14 = built(P12.variants["wgmma_fp16x3"], x, w, b)(x)
    out15 = built(P12.variants["wgmma_fp16x3_fused_split"], x, w, b)(x)
    diff = rel_error(out15, out14.double())
    print(f"step 15 vs 14: rel. difference {diff:.2e}, bit-identical {torch.equal(out15, out14)}")
    assert diff < 1e-6, f"step 15 vs step 14: {diff:.2e}; seed={SEED}"
    split = load_step("common", "fp16x3_split.py")
    for case in ["k_mod_4", "non_contiguous", "offset"]:
        M, K, N = 67, 1002 if case == "k_mod_4" else 1000, 333
        x, w, b = inputs(M, K, N)
        if case == "non_contiguous":
            x = torch.cat([x, torch.zeros(M, 8, device="cuda")], dim=1)[:, :K]
        elif case == "offset":
            buf = torch.empty(M * K + 1, device="cuda")
            x = buf[1:].view(M, K).copy_(x)
            assert x.data_ptr() % 16 != 0
        assert not split.fused_x_eligible(x)
        out14 = built(P12.variants["wgmma_fp16x3"], x, w, b)(x)
        out15 = built(P12.variants["wgmma_fp16x3_fused_split"], x, w, b)(x)
        assert torch.equal(out15, out14), f"{case}: seed={SEED}"
        assert rel_error(out15, reference64("p12", x, w, b)) < 1e-6


@gpu_test
def test_row_scales_match_the_triton_split(ext):
    """The scale pass's inv equals split_fp16x3's inv_scale bit for bit (NaN where the row holds
    inf or NaN) and scale * inv == 1 exactly, on rows from tiny to huge, zero, inf and NaN;
    K % 4 != 0 takes the scalar loads."""
    split = load_step("common", "fp16x3_split.py")
    g = torch.Generator(device="cuda").manual_seed(5)
    M = 40
    for K in [8192, 1000, 1003, 1]:
        x = (torch.rand(M, K, device="cuda", generator=g) * 2 - 1)
        x *= torch.logspace(-40, 38, M, base=10.0, device="cuda")[:, None]  # 2**-133 .. 2**126
        x[3] = 0.0
        x[5, K // 2] = float("inf")
        x[6, K - 1] = float("-inf")
        x[7, 0] = float("nan")
        x[8, K // 3] = -65504.0 * 4
        x[9] = 2.0 ** -149  # subnormal
        scale, inv = ext.x_row_scales(x)
        ref = split.split_fp16x3(x, pad_cols_to=64).inv_scale
        nan = ref.isnan()
        assert torch.equal(inv.isnan(), nan) and bool(nan[[5, 6, 7]].all()), f"K={K}"
        assert torch.equal(inv[~nan].view(torch.int32), ref[~nan].view(torch.int32)), f"K={K}"
        assert bool((scale[~nan] * inv[~nan] == 1.0).all()), f"K={K}"


@gpu_test
def test_binding_refuses_unpadded_k_and_copies_misaligned_inputs(ext):
    M, K, N = 130, 264, 136
    x, w, b = inputs(M, K, N)
    x16, w16 = x.half(), w.half()
    with pytest.raises(ValueError, match="multiple of 8"):
        ext.wgmma_tma(x16[:, :260], w16[:, :260], b)
    with pytest.raises(TypeError, match="float16"):
        ext.wgmma_tma(x, w16, b)
    buf = torch.empty(M * K + 4, device="cuda", dtype=torch.float16)
    x_mis = buf[4:].view(M, K)          # 8 bytes past a 16-byte boundary
    x_mis.copy_(x16)
    assert x_mis.data_ptr() % 16 != 0
    ref = reference64("p12", x16.float(), w16.float(), b)
    for name in [v.slug for v in FP16_STEPS]:
        out = getattr(ext, name)(x_mis, w16, b, MULT, SLOPE)
        assert rel_error(out, ref) < 1e-5, name
        out_t = getattr(ext, name)(x16, w16.T.contiguous().T, b, MULT, SLOPE)  # strided w
        assert rel_error(out_t, ref) < 1e-5, name
