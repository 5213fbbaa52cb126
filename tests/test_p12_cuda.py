"""Problem 12's CUDA C++ steps and the build helper.

CPU part (runs anywhere nvcc is): every step compiles to PTX, the vectorized epilogue
really issues 16-byte accesses, the SIMT steps' loads per FMA fall as the ladder climbs
(step 02 is step 01's loop with another address, 05 reads two shared floats per FMA, 06 nine
per eight FMAs, 07 one 16-byte read per 16), ptxas reports no spills and no stack, compiler
errors are readable.
GPU part (marked ``gpu``, skipped without a CUDA GPU; one test per step or per kind of check,
looping over the sizes where it differs): every step against the float64 model on fresh
random inputs at tails of every tile and at KernelBench's size (fp32-faithful there), poisoned
outputs, misaligned and strided tensors, bad arguments; steps 02, 05 and 06 against step 01
bit for bit (the same sequential sum).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time

import pytest
import torch

from fusedkit import build
from fusedkit.harness import rel_error
from kernel_helpers import LD_V4, ST_V4, SENTINEL, gpu_test, guarded_view, needs_nvcc, poison_allocator
from reference import MULT, SLOPE, operands, reference64, tier

P12_SOURCES = build.kernel_sources("p12")
STEP = {p.stem.split("_", 1)[1]: p for p in P12_SOURCES}  # "naive" -> .../01_naive.cu



# ----------------------------------------------------------------------------- CPU part


def test_ladder_files_are_discovered_in_step_order():
    assert [p.name for p in P12_SOURCES] == [
        "01_naive.cu", "02_coalesced.cu", "03_cublas_epilogue.cu", "04_cublas_epilogue_vec4.cu",
        "05_smem_tiles.cu", "06_register_tiles.cu", "07_tiled.cu",
        "17_small_batch_stream.cu"]  # 11-16 need sm_90a: the Hopper extension builds them
    assert build.extension_sources("p12")[-1].name == "binding.cpp"





@needs_nvcc
def test_vec4_epilogue_uses_16_byte_accesses_and_scalar_does_not():
    vec4 = build.ptx(STEP["cublas_epilogue_vec4"])
    scalar = build.ptx(STEP["cublas_epilogue"])
    assert build.ptx_instructions(vec4, LD_V4), "vec4 step has no ld.global.v4.f32"
    assert build.ptx_instructions(vec4, ST_V4), "vec4 step has no st.global.v4.f32"
    assert not build.ptx_instructions(scalar, LD_V4)
    assert not build.ptx_instructions(scalar, ST_V4)
    assert build.ptx_instructions(scalar, r"ld\.global\.f32")
    assert build.ptx_instructions(scalar, r"st\.global\.f32")


@needs_nvcc
def test_vec4_epilogue_issues_its_loads_before_its_stores():
    """Each thread loads its 4 rows of y (and b through the read-only path) before the first
    store, so 4 loads per thread are in flight at once, not one load then one store."""
    text = build.ptx(STEP["cublas_epilogue_vec4"])
    body = text[text.index(".entry p12_epilogue_vec4_kernel"):]
    accesses = build.ptx_instructions(body, r"^\s*(ld|st)\.global")
    first_store = next(i for i, a in enumerate(accesses) if a.startswith("st."))
    loads = [a for a in accesses[:first_store] if re.match(LD_V4, a)]
    assert len(loads) == 5, accesses  # 4 rows of y + 1 bias float4
    assert sum(a.startswith("ld.global.nc.v4.f32") for a in loads) == 1, "b via ld.global.nc"
    assert not any(a.startswith("ld.") for a in accesses[first_store:]), accesses


@needs_nvcc
def test_tiled_step_stages_tiles_in_shared_memory_with_16_byte_reads():
    text = build.ptx(STEP["tiled"])
    assert build.ptx_instructions(text, r"ld\.shared\.v4\.f32")
    assert build.ptx_instructions(text, r"bar\.sync|barrier\.sync")
    assert build.ptx_instructions(text, LD_V4)  # aligned fast path of the tile loads


def _counts(step: str) -> dict[str, int]:
    """Instructions of a step's PTX that tell its data movement: global and shared loads, FMAs."""
    text = build.ptx(STEP[step])
    return {"ld.global": len(build.ptx_instructions(text, r"^\s*ld\.global")),
            "ld.shared": len(build.ptx_instructions(text, r"^\s*ld\.shared")),
            "ld.shared.v4": len(build.ptx_instructions(text, r"^\s*ld\.shared\.v4")),
            "fma": len(build.ptx_instructions(text, r"^\s*fma\.rn\.f32")),
            "bar": len(build.ptx_instructions(text, r"^\s*(bar|barrier)\.sync"))}


@needs_nvcc
def test_coalesced_step_is_the_naive_loop_with_another_address():
    """Step 02 changes where W is read (Wt[k, n], lanes along n: one line per warp load), not the
    loop: the same loads and FMAs as step 01, no shared memory, no barrier."""
    naive, coalesced = _counts("naive"), _counts("coalesced")
    assert naive == coalesced, (naive, coalesced)
    assert coalesced["ld.shared"] == coalesced["bar"] == 0
    text = build.ptx(STEP["coalesced"])
    assert ".entry p12_coalesced_kernel" in text and "mul.wide" in text  # k * N in 64 bits


@needs_nvcc
def test_fma_per_shared_load_climbs_along_the_simt_tiles():
    """The teaching point of steps 05-07, read off the PTX of their inner loops (the only code
    that reads shared memory or issues FMAs): 05 loads two 4-byte floats per FMA, 06 keeps W's
    value in a register for 8 FMAs (9 loads per 8), 07 feeds 16 FMAs per 16-byte load."""
    smem, reg, tiled = _counts("smem_tiles"), _counts("register_tiles"), _counts("tiled")
    assert smem["fma"] == 32 and smem["ld.shared"] == 2 * smem["fma"] and smem["ld.shared.v4"] == 0
    assert reg["fma"] == 64 and 8 * reg["ld.shared"] == 9 * reg["fma"] and reg["ld.shared.v4"] == 0
    assert tiled["ld.shared"] == tiled["ld.shared.v4"] and tiled["fma"] == 16 * tiled["ld.shared"]
    for c in (smem, reg, tiled):
        assert c["bar"] == 2, c   # the tile is complete before reads, read before overwritten
    # Global loads: one float of x and one of W per thread per k-slice (plus the bias), fewer
    # than in step 01's loop, which loads both operands per FMA.
    assert smem["ld.global"] == reg["ld.global"] == 3


@needs_nvcc
@pytest.mark.parametrize("src", P12_SOURCES, ids=lambda p: p.stem)
def test_resource_usage_reports_registers_and_no_spills(src):
    usage = build.resource_usage(src)
    assert usage, f"no kernel found in ptxas output of {src.name}"
    for kernel, stats in usage.items():
        assert set(stats) == {"registers", "shared_bytes", "spill_stores", "spill_loads", "stack_bytes"}
        assert 0 < stats["registers"] <= 255, (kernel, stats)
        assert stats["spill_stores"] == stats["spill_loads"] == 0, (kernel, stats)
    tiles = {STEP["tiled"]: (128, 2 * 8 * 132 * 4), STEP["register_tiles"]: (32, 64 * 8 * 4 + 64 * 9 * 4),
             STEP["smem_tiles"]: (64, 32 * 32 * 4 + 32 * 33 * 4)}
    if src in tiles:   # (register cap from __launch_bounds__, shared bytes of the two tiles)
        (stats,) = usage.values()
        cap, smem = tiles[src]
        assert stats["shared_bytes"] == smem, stats
        assert stats["registers"] <= cap and stats["stack_bytes"] == 0, stats
    else:
        assert all(s["shared_bytes"] == 0 for s in usage.values())


@needs_nvcc
def test_compiler_errors_are_readable(tmp_path, own_build_dir):
    bad = tmp_path / "broken.cu"
    bad.write_text("__global__ void k(float* y) {\n  y[0] = undefined_thing;\n}\n")
    with pytest.raises(build.BuildError) as info:
        build.ptx(bad)
    msg = str(info.value)
    assert 'identifier "undefined_thing" is undefined' in msg
    assert "broken.cu(2): error" in msg
    assert len(msg.splitlines()) < 15, msg
    assert "undefined_thing" in info.value.log


@needs_nvcc
def test_ptx_cache_follows_the_source(tmp_path, own_build_dir):
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float* y) { y[0] = 1.5f; }\n')
    first = build.ptx(src)
    assert build.ptx(src) == first
    assert len(list((own_build_dir / "ptx").glob("k-sm_90-*.ptx"))) == 1
    src.write_text('extern "C" __global__ void k(float* y) { y[0] = 2.5f; }\n')
    assert build.ptx(src) != first, "a changed source must not be served from the cache"


def test_argument_errors_name_the_parameter(tmp_path):
    with pytest.raises(ValueError, match="arch"):
        build.ptx(STEP["naive"], arch="90")
    with pytest.raises(ValueError, match="source_path"):
        build.ptx(tmp_path / "x.cpp")
    with pytest.raises(FileNotFoundError, match="source_path"):
        build.ptx(tmp_path / "missing.cu")
    with pytest.raises(ValueError, match="problem='p999'"):
        build.load_extension("p999")


def test_ptx_instructions_filters_lines():
    text = "\tld.global.f32 \t%f1, [%rd1];\n\tld.global.nc.v4.f32 \t{%f2}, [%rd2];\n// ld.global.v4.f32 comment"
    assert build.ptx_instructions(text, LD_V4) == ["ld.global.nc.v4.f32 \t{%f2}, [%rd2];",
                                                  "// ld.global.v4.f32 comment"]
    assert build.ptx_instructions(text, re.compile(r"ld\.global\.f32")) == ["ld.global.f32 \t%f1, [%rd1];"]


def test_stale_lock_is_removed_fresh_lock_is_kept(tmp_path):
    lock = tmp_path / "lock"
    lock.write_text("")
    assert not build._remove_stale_lock(tmp_path, max_age_s=60)
    assert lock.exists()
    old = time.time() - 600
    os.utime(lock, (old, old))
    assert build._remove_stale_lock(tmp_path, max_age_s=60)
    assert not lock.exists()
    assert not build._remove_stale_lock(tmp_path, max_age_s=60)  # nothing left to remove


def test_extension_folder_separates_devices_versions_and_sources(own_build_dir):
    name, gpu_dir, sources, flags = build._extension_plan("p12", (9, 0), "2.11.0+cu130", "13.0")
    assert name == "fusedkit_p12"
    assert "-gencode=arch=compute_90,code=sm_90" in flags
    assert "--use_fast_math" not in flags
    assert gpu_dir.parent == own_build_dir / "ext"
    assert re.fullmatch(r"fusedkit_p12-cp\d+-2\.11\.0\+cu130-cu130-[0-9a-f]{12}", gpu_dir.name)
    _, cpu_dir, _, _ = build._extension_plan("p12", (9, 0), "2.11.0+cpu", None)
    assert "-cpu-" in cpu_dir.name and cpu_dir != gpu_dir
    _, h100_dir, _, _ = build._extension_plan("p12", (8, 0), "2.11.0+cu130", "13.0")
    assert h100_dir != gpu_dir, "another arch is another build"


needs_cxx_readelf = pytest.mark.skipif(
    not (shutil.which("c++") and shutil.which("readelf")), reason="needs c++ and readelf (binutils)")


@needs_cxx_readelf
def test_a_compiler_that_links_libstdcxx_statically_is_replaced(tmp_path, monkeypatch):
    """Such a compiler (a GPU image's CXX was one) builds extensions that segfault when they
    format a number; _pick_cxx must detect it and fall back to one from PATH."""
    assert build._cxx_links_libstdcxx_shared(shutil.which("c++")) is True
    static_cxx = tmp_path / "static-c++"
    static_cxx.write_text('#!/bin/sh\nexec c++ -static-libstdc++ "$@"\n')
    static_cxx.chmod(0o755)
    assert build._cxx_links_libstdcxx_shared(str(static_cxx)) is False
    monkeypatch.setenv("CXX", str(static_cxx))
    picked = build._pick_cxx()
    assert picked != str(static_cxx) and build._cxx_links_libstdcxx_shared(picked)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_load_extension_returns_a_loaded_module_without_any_work(monkeypatch, tmp_path):
    """A second load of unchanged sources must come from the per-process cache before
    torch, the compiler probe or the hashing run (each call cost ~24 s on the H200); an
    edited source must miss it."""
    sentinel = object()
    key = build._source_stamp("p12", build.extension_sources("p12"))
    monkeypatch.setitem(build._LOADED_FAST, key, sentinel)
    monkeypatch.setattr(build, "_pick_cxx", lambda: pytest.fail("the fast path ran _pick_cxx"))
    assert build.load_extension("p12") is sentinel
    src = tmp_path / "01_a.cu"
    src.write_text("// one\n")
    before = build._source_stamp("p12", [src])
    src.write_text("// two, longer\n")
    assert build._source_stamp("p12", [src]) != before


def test_load_extension_without_gpu_says_what_to_do():
    with pytest.raises(build.CudaUnavailableError, match="needs a CUDA GPU.*ptx\\(\\)"):
        build.load_extension("p12")


# ----------------------------------------------------------------------------- GPU part


# (M, K, N): batch, in_features, out_features. One element; step 17's 4-row kernel with its W
# ring's tail at K / 4 = 4 and 250; a ragged tile on every axis of steps 05-07's 32, 64 and 128
# rows and columns and 32 or 8 k (and step 17's 16-row kernel); KernelBench's size.
SIZES = [(1, 1, 1), (2, 16, 7), (4, 1000, 33), (257, 67, 129), (1024, 8192, 8192)]
DEFAULT = SIZES[-1]
STEPS = ["naive", "coalesced", "cublas_epilogue", "cublas_epilogue_vec4", "smem_tiles",
         "register_tiles", "tiled", "small_batch"]
W_TRANSPOSED = {"coalesced"}  # the steps that take W as wt (K, N), made once per weight version
SEED = secrets.randbits(31)   # fresh inputs every run; quoted in messages


@pytest.fixture(scope="module")
def ext():
    return build.load_extension("p12")


def inputs(m: int, k: int, n: int, seed: int = SEED):
    return operands("p12", m, k, n, seed=seed, device="cuda")


def call(ext, step, x, w, b, mult=MULT, slope=SLOPE):
    """One step of the extension on nn.Linear's w (N, K); a step that reads W transposed gets
    w.T made contiguous, as its registered variant hands it (kernels/common/transposed_weight.py)."""
    return getattr(ext, step)(x, w.t().contiguous() if step in W_TRANSPOSED else w, b, mult, slope)


@gpu_test
@pytest.mark.parametrize("step", STEPS)
def test_step_matches_float64_reference(ext, step):
    for M, K, N in SIZES:
        x, w, b = inputs(M, K, N)
        ref = reference64("p12", x, w, b)
        poison_allocator((M, N))
        out = call(ext, step, x, w, b)
        assert out.shape == (M, N) and out.dtype == torch.float32
        assert not out.isnan().any(), f"{step} {M}x{K}x{N} left NaN (unwritten) outputs; seed={SEED}"
        err = rel_error(out, ref)
        assert err < 1e-5, f"{step} {M}x{K}x{N}: rel. error {err:.2e}; seed={SEED}"
    assert tier("p12", out, x, w, b) == "fp32-faithful", f"{step} at KernelBench's size; seed={SEED}"


@gpu_test
@pytest.mark.parametrize("step", ["coalesced", "smem_tiles", "register_tiles"])
def test_simt_steps_equal_step_01_bit_for_bit(ext, step):
    """Steps 02, 05 and 06 change where the operands come from (W's layout, shared memory, a
    register), not the arithmetic: every output is the same fmaf chain over k = 0, 1, ... as
    step 01's (the zeros past K in a ragged tile add nothing), so y is step 01's to the bit."""
    for M, K, N in [(1, 1, 1), (17, 65, 33), (257, 67, 129), (64, 8192, 512)]:
        x, w, b = inputs(M, K, N)
        naive = ext.naive(x, w, b, MULT, SLOPE)
        poison_allocator((M, N))
        out = call(ext, step, x, w, b)
        assert not out.isnan().any(), f"{step} left NaN (unwritten) outputs; seed={SEED}"
        assert torch.equal(out, naive), (f"{step} {M}x{K}x{N}: max diff {(out - naive).abs().max():.2e} "
                                         f"from step 01; seed={SEED}")


@gpu_test
def test_coalesced_step_transposes_w_once_per_weight_version():
    """The registered step's transposed W is made on the first call and reused while the weight
    is unchanged; an in-place change of the weight (a new version) gives a new one."""
    from fusedkit import problems
    from fusedkit.kernels import load_step

    cache = load_step("common", "weight_cache.py")
    cache.clear()
    p12 = problems.get("p12")
    sizes = p12.sizes(batch_size=5, in_features=40, out_features=24)
    model = p12.make_model(sizes, device="cuda")
    (x,) = p12.get_inputs(sizes, device="cuda")
    fn = p12.variant("coalesced").build(model)
    y1 = fn(x)
    assert cache.size() == 1
    fn(x)
    assert cache.size() == 1, "an unchanged weight was transposed again"
    with torch.no_grad():
        model.gemm.weight.mul_(-1.0)
    y2 = fn(x)
    ref = reference64("p12", x, model.gemm.weight, model.gemm.bias)
    assert rel_error(y2, ref) < 1e-5 and not torch.equal(y1, y2), "a changed weight must be re-transposed"
    assert cache.size() == 1, "the stale transpose is freed"


@gpu_test
def test_cublas_tf32_step_within_tf32_error(ext):
    """TF32 rounds inputs to 10-bit mantissas: error ~1e-4..1e-3, far above fp32, below 3e-3;
    and the same call must leave PyTorch's handle in the math mode it found."""
    for M, K, N in [(1, 1, 1), (257, 67, 129), (1000, 8191, 17), DEFAULT]:
        x, w, b = inputs(M, K, N)
        ref = reference64("p12", x, w, b)
        poison_allocator((M, N))
        before = torch.backends.cuda.matmul.allow_tf32
        out = ext.cublas_tf32_epilogue_vec4(x, w, b, MULT, SLOPE)
        assert not out.isnan().any(), f"unwritten outputs; seed={SEED}"
        err = rel_error(out, ref)
        assert err < 3e-3, f"{M}x{K}x{N}: rel. error {err:.2e}; seed={SEED}"
        if K >= 1000:  # long reductions: TF32 rounding must show, or the mode was not applied
            assert err > 1e-5, f"{M}x{K}x{N}: rel. error {err:.2e} looks like fp32, not TF32"
        assert torch.backends.cuda.matmul.allow_tf32 == before
        fp32 = ext.cublas_epilogue_vec4(x, w, b, MULT, SLOPE)  # the handle is back in fp32 math
        assert rel_error(fp32, ref) < 1e-5


# (M, N, offset of y in its buffer, expected float4 fast path)
EPILOGUE_CASES = [
    (64, 1024, 0, True),     # aligned, N % 4 == 0: the float4 path
    (64, 1023, 0, False),    # N % 4 != 0: scalar fallback
    (64, 1024, 1, False),    # y starts 4 bytes past a 16-byte boundary: scalar fallback
    (7, 13, 3, False),
    (1, 1, 0, False),
    (7, 1028, 0, True),      # float4 path, M % 4 == 3 (a partial 4-row tile), N / 4 = 257 (a
                             # second column block with one active thread)
    (1, 4, 0, True),         # float4 path, a single float4
]


@gpu_test
@pytest.mark.parametrize("vec4", [False, True])
def test_epilogue_only_in_place(ext, vec4):
    """In place, nothing written outside y (sentinels around it), the float4 path exactly where
    alignment allows it; a bias 4 bytes past a 16-byte boundary takes the scalar fallback; a NaN
    in y comes out NaN (no max or clamp that hides it)."""
    g = torch.Generator(device="cuda").manual_seed(SEED)
    for M, N, offset, fast in EPILOGUE_CASES:
        y0 = torch.randn(M, N, device="cuda", generator=g)  # stands in for x @ W.T: both signs
        b = torch.randn(N, device="cuda", generator=g)
        buf, y = guarded_view(M, N, offset, y0)
        assert ext.vec4_fast_path(y, b) == fast
        out = ext.epilogue_only(y, b, MULT, SLOPE, vec4)
        assert out.data_ptr() == y.data_ptr(), "epilogue_only works in place and returns y"
        ref = torch.nn.functional.leaky_relu((y0.double() + b.double()) * MULT, SLOPE)
        err = rel_error(y, ref)
        assert err < 1e-6, f"vec4={vec4} {M}x{N}+{offset}: rel. error {err:.2e}; seed={SEED}"
        guard = torch.cat([buf[:offset], buf[offset + M * N:]])
        assert (guard == SENTINEL).all(), "epilogue wrote outside y"
    y0 = torch.randn(9, 64, device="cuda")
    b = torch.randn(65, device="cuda")[1:]
    assert b.data_ptr() % 16 != 0 and b.is_contiguous()
    y = y0.clone()
    assert not ext.vec4_fast_path(y, b)
    ext.epilogue_only(y, b, MULT, SLOPE, vec4)
    assert rel_error(y, torch.nn.functional.leaky_relu((y0.double() + b.double()) * MULT, SLOPE)) < 1e-6
    y = torch.randn(8, 16, device="cuda")
    y[3, 5] = float("nan")
    out = ext.epilogue_only(y, torch.randn(16, device="cuda"), MULT, SLOPE, vec4)
    assert out.isnan().sum().item() == 1 and out[3, 5].isnan()


@gpu_test
def test_misaligned_and_strided_inputs(ext):
    """x starting 4 bytes past a 16-byte boundary (K % 4 == 0, so only the pointer forbids
    float4 loads), and a transposed (non-contiguous) w that the binding copies (for step 02,
    whose wt is (K, N), the view w.T: strides (1, K))."""
    M, K, N = 130, 260, 132
    x, w, b = inputs(M, K, N)
    buf = torch.empty(M * K + 1, device="cuda")
    x_mis = buf[1:].view(M, K)
    x_mis.copy_(x)
    assert x_mis.data_ptr() % 16 != 0 and x_mis.is_contiguous()
    ref = reference64("p12", x, w, b)
    for step in ["naive", "coalesced", "smem_tiles", "register_tiles", "tiled"]:
        w_t = w.T if step in W_TRANSPOSED else w.T.contiguous().T  # same values, strided
        assert not w_t.is_contiguous()
        err = rel_error(getattr(ext, step)(x_mis, w_t, b, MULT, SLOPE), ref)
        assert err < 1e-5, f"{step}: rel. error {err:.2e}; seed={SEED}"


@gpu_test
def test_sgemm_rowmajor_mapping(ext):
    for M, K, N in [(3, 5, 7), (17, 1000, 33), (256, 4096, 512)]:
        x, w, _ = inputs(M, K, N)
        out = ext.sgemm_rowmajor(x, w)
        assert out.shape == (M, N)
        err = rel_error(out, x.double() @ w.double().T)
        assert err < 1e-5, f"{M}x{K}x{N}: rel. error {err:.2e}; seed={SEED}"


@gpu_test
def test_cublas_steps_stay_fp32_when_torch_allows_tf32(ext):
    """TF32 would give ~3e-4 at K = 4096; our calls force CUBLAS_DEFAULT_MATH."""
    x, w, b = inputs(256, 4096, 512)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        tf32_err = rel_error(x @ w.T, x.double() @ w.double().T)
        err = rel_error(ext.sgemm_rowmajor(x, w), x.double() @ w.double().T)
        err_step = rel_error(ext.cublas_epilogue_vec4(x, w, b, MULT, SLOPE), reference64("p12", x, w, b))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    assert err < 1e-5 and err_step < 1e-5, f"{err:.2e} {err_step:.2e} (TF32: {tf32_err:.2e}); seed={SEED}"


@gpu_test
def test_steps_run_on_the_current_stream(ext):
    x, w, b = inputs(512, 2048, 1024)
    ref = reference64("p12", x, w, b)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    wt = w.t().contiguous()  # made before: the side stream must not read it half written
    with torch.cuda.stream(side):
        outs = {s: getattr(ext, s)(x, wt if s in W_TRANSPOSED else w, b, MULT, SLOPE) for s in STEPS}
    side.synchronize()  # only the side stream: work left on another stream would be unfinished
    for s, out in outs.items():
        assert rel_error(out, ref) < 1e-5, f"{s} on a side stream; seed={SEED}"


@gpu_test
def test_empty_batch_returns_empty(ext):
    x, w, b = inputs(1, 8, 4)
    for s in STEPS:
        assert call(ext, s, x[:0], w, b).shape == (0, 4)


@gpu_test
def test_bad_inputs_name_the_parameter(ext):
    x, w, b = inputs(4, 8, 6)
    for s in (s for s in STEPS if s not in W_TRANSPOSED):
        fn = getattr(ext, s)
        with pytest.raises(TypeError, match=r"x must be torch\.float32.*Double"):
            fn(x.double(), w, b, MULT, SLOPE)
        with pytest.raises(ValueError, match=r"x must be a CUDA tensor.*cpu"):
            fn(x.cpu(), w, b, MULT, SLOPE)
        with pytest.raises(ValueError, match=r"w\.size\(1\) must equal x\.size\(1\)"):
            fn(x, w[:, :5], b, MULT, SLOPE)
        with pytest.raises(ValueError, match=r"b must have w\.size\(0\) = 6"):
            fn(x, w, b[:5], MULT, SLOPE)
        with pytest.raises(ValueError, match=r"x must be 2-D, got 3-D"):
            fn(x[None], w, b, MULT, SLOPE)
    with pytest.raises(ValueError, match=r"w must be a CUDA tensor"):
        ext.sgemm_rowmajor(x, w.cpu())
    with pytest.raises(ValueError, match=r"y must be contiguous"):
        ext.epilogue_only(torch.randn(6, 4, device="cuda").T, b[:6], MULT, SLOPE, True)
    with pytest.raises(ValueError, match=r"b must have y\.size\(1\) = 6"):
        ext.epilogue_only(torch.randn(4, 6, device="cuda"), b[:5], MULT, SLOPE, False)
    # Step 02 takes W transposed, (K, N), and names it so.
    wt = w.t().contiguous()   # (K, N) = (8, 6)
    with pytest.raises(ValueError, match=r"wt\.size\(0\) must equal x\.size\(1\) \(K = 8\).*transposed, \(K, N\)"):
        ext.coalesced(x, w, b, MULT, SLOPE)            # w (N, K) given where wt (K, N) is taken
    with pytest.raises(ValueError, match=r"b must have wt\.size\(1\) = 6"):
        ext.coalesced(x, wt, b[:5], MULT, SLOPE)
    with pytest.raises(ValueError, match=r"wt must be a CUDA tensor"):
        ext.coalesced(x, wt.cpu(), b, MULT, SLOPE)


@gpu_test
def test_row_tiles_past_the_grid_limit_are_refused_in_one_line(ext):
    """gridDim.y holds at most 65535 row tiles; one more row is refused before any launch."""
    w, b = torch.rand(1, 1, device="cuda"), torch.rand(1, device="cuda")
    for step, rows in [("smem_tiles", 32), ("register_tiles", 64), ("tiled", 128)]:
        M = 65535 * rows + 1
        with pytest.raises(ValueError, match=rf"x\.size\(0\) \(M\) = {M} is too large for the {step} kernel"):
            getattr(ext, step)(torch.empty(M, 1, device="cuda"), w, b, MULT, SLOPE)
