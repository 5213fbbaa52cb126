"""Problem 45's CUDA C++ steps (fusedkit/kernels/p45/) and the binding helpers it shares with p12.

CPU part (runs anywhere nvcc is): every step compiles to PTX, the vectorized epilogues really
issue 16-byte accesses, the logsumexp kernels combine lanes with warp shuffles, ptxas reports no
spills, and the extension's build key covers the shared header kernels/common/*.h.
GPU part (marked ``gpu``, skipped without a CUDA GPU; one test per step or per kind of check,
looping over the sizes where it differs): every step against the float64 model on fresh random
inputs at irregular sizes and KernelBench's (its tier there), the epilogues alone at misaligned
offsets with sentinels around them, infinities and NaN in the logsumexp, TF32 applied and
restored, bad arguments.
"""

from __future__ import annotations

import re
import secrets
import shutil

import pytest
import torch

from fusedkit import build
from fusedkit.harness import rel_error
from kernel_helpers import (LD_V4, SENTINEL, ST_V4, entry_body, gpu_test, guarded_view, needs_nvcc,
                            poison_allocator)
from reference import operands, reference64, tier

P45_SOURCES = build.kernel_sources("p45")
STEP = {p.stem.split("_", 1)[1]: p for p in P45_SOURCES}  # "naive" -> .../01_naive.cu


# ----------------------------------------------------------------------------- CPU part


def test_ladder_files_are_discovered_in_step_order():
    assert [p.name for p in P45_SOURCES] == [
        "01_naive.cu", "02_cublas_epilogues.cu", "03_cublas_epilogues_vec4.cu"]
    assert build.extension_sources("p45")[-1].name == "binding.cpp"





@needs_nvcc
def test_vec4_epilogues_use_16_byte_accesses_and_scalar_ones_do_not():
    vec4 = build.ptx(STEP["cublas_epilogues_vec4"])
    scalar = build.ptx(STEP["cublas_epilogues"])
    assert build.ptx_instructions(entry_body(vec4, "p45_lse_vec4_kernel"), LD_V4)
    sig = entry_body(vec4, "p45_sigmoid_vec4_kernel")
    assert build.ptx_instructions(sig, LD_V4) and build.ptx_instructions(sig, ST_V4)
    assert not build.ptx_instructions(scalar, LD_V4)
    assert not build.ptx_instructions(scalar, ST_V4)
    assert build.ptx_instructions(scalar, r"ld\.global(\.nc)?\.f32")
    assert build.ptx_instructions(scalar, r"st\.global\.f32")


@needs_nvcc
@pytest.mark.parametrize("step,kernel", [("cublas_epilogues", "p45_lse_scalar_kernel"),
                                         ("cublas_epilogues_vec4", "p45_lse_vec4_kernel")])
def test_logsumexp_kernels_combine_lanes_with_shuffles(step, kernel):
    body = entry_body(build.ptx(STEP[step]), kernel)
    # 5 butterfly steps, each moving the (max, sum) pair: 10 shuffles, no shared memory.
    assert len(build.ptx_instructions(body, r"shfl\.sync\.bfly\.b32")) == 10, body[:2000]
    assert not build.ptx_instructions(body, r"(ld|st)\.shared")


@needs_nvcc
def test_the_three_float4_reductions_show_what_each_version_changed():
    """v1 computes expf per value (ex2.approx appears only in v2 and v3, ~one per value); v1 and v2
    load each chunk and then reduce, on 02's grid; all three combine lanes with 10 shuffles."""
    ptx = build.ptx(STEP["cublas_epilogues_vec4"])
    bodies = {v: entry_body(ptx, k) for v, k in ((1, "p45_lse_vec4_v1_kernel"), (2, "p45_lse_vec4_v2_kernel"),
                                                 (3, "p45_lse_vec4_kernel"))}
    exps = {v: len(build.ptx_instructions(b, r"ex2\.approx")) for v, b in bodies.items()}
    assert exps[2] >= 32 and exps[3] >= 32 and exps[1] < exps[2], exps
    for v, body in bodies.items():
        assert len(build.ptx_instructions(body, r"shfl\.sync\.bfly\.b32")) == 10, v
        assert build.ptx_instructions(body, LD_V4), v


@needs_nvcc
def test_vec4_logsumexp_issues_its_loads_before_reducing():
    """Software pipelining, read from the PTX: 8 float4 loads of the first chunk before the loop;
    in the loop, the next chunk's 8 loads of z and this chunk's 8 of b2 before the first exp, and
    no load after it (so the next chunk is in flight while this one is reduced)."""
    body = entry_body(build.ptx(STEP["cublas_epilogues_vec4"]), "p45_lse_vec4_kernel")
    lines = build.ptx_instructions(body, r"^\s*(ld\.global|ex2|shfl|\$L__BB)")
    first_label = next(i for i, a in enumerate(lines) if a.startswith("$L"))
    first_math = next(i for i, a in enumerate(lines) if a.startswith(("ex2", "shfl")))
    assert len([a for a in lines[:first_label] if re.match(LD_V4, a)]) == 8, lines[:30]
    assert len([a for a in lines[first_label:first_math] if re.match(LD_V4, a)]) == 16, lines[:30]
    assert not any(a.startswith("ld.") for a in lines[first_math:]), lines


@needs_nvcc
def test_vec4_sigmoid_issues_its_loads_before_its_stores():
    body = entry_body(build.ptx(STEP["cublas_epilogues_vec4"]), "p45_sigmoid_vec4_kernel")
    accesses = build.ptx_instructions(body, r"^\s*(ld|st)\.global")
    first_store = next(i for i, a in enumerate(accesses) if a.startswith("st."))
    loads = [a for a in accesses[:first_store] if re.match(LD_V4, a)]
    assert len(loads) == 5, accesses  # 4 rows of h + 1 bias float4
    assert not any(a.startswith("ld.") for a in accesses[first_store:]), accesses


@needs_nvcc
@pytest.mark.parametrize("src", P45_SOURCES, ids=lambda p: p.stem)
def test_resource_usage_reports_registers_and_no_spills(src):
    usage = build.resource_usage(src)
    assert usage, f"no kernel found in ptxas output of {src.name}"
    for kernel, stats in usage.items():
        assert 0 < stats["registers"] <= 255, (kernel, stats)
        assert stats["spill_stores"] == stats["spill_loads"] == 0, (kernel, stats)
        assert stats["stack_bytes"] == 0, (kernel, stats)
        assert stats["shared_bytes"] == 0, (kernel, stats)
    if src == STEP["cublas_epilogues_vec4"]:
        assert usage["p45_sigmoid_vec4_kernel"]["registers"] <= 32, "__launch_bounds__(256, 8)"
        # Two chunks per lane (64 registers) and the rest: <= 96 keeps 2 blocks of 256 threads
        # per SM, 16 warps with a 4 KiB chunk each in flight while they reduce the previous one.
        assert usage["p45_lse_vec4_kernel"]["registers"] <= 96, usage


def _copy_kernels(tmp_path, monkeypatch):
    """A copy of fusedkit/kernels that build.py is pointed at, to edit without touching the repo."""
    root = tmp_path / "kernels"
    shutil.copytree(build.KERNELS_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(build, "KERNELS_DIR", root)
    return root


@pytest.mark.parametrize("problem", ["p12", "p45"])
def test_extension_key_covers_the_shared_header(problem, tmp_path, monkeypatch, own_build_dir):
    """An edit to kernels/common/torch_cuda.h must rebuild every problem: both the hash in the
    build folder's name and the per-process stamp change."""
    root = _copy_kernels(tmp_path, monkeypatch)
    header = root / "common" / "torch_cuda.h"
    assert header.is_file()
    plan = lambda: build._extension_plan(problem, (9, 0), "2.11.0+cu130", "13.0")[1]  # noqa: E731
    stamp = lambda: build._source_stamp(problem, build.extension_sources(problem))  # noqa: E731
    before_dir, before_stamp = plan(), stamp()
    assert plan() == before_dir, "the key must be stable for unchanged files"
    header.write_text(header.read_text() + "// an edit\n")
    assert plan() != before_dir
    assert stamp() != before_stamp


# ----------------------------------------------------------------------------- GPU part

# (M, K, H, N): batch, input, hidden, output sizes. Irregular on every axis (N = 1, N < 32,
# N % 4 != 0, H % 4 != 0, N just past a 256-float4 chunk), then KernelBench's.
SIZES = [(1, 1, 1, 1), (3, 5, 7, 33), (17, 1000, 33, 3), (1000, 17, 129, 1025)]
DEFAULT = (16384, 2048, 4096, 1024)
CUBLAS_STEPS = ["cublas_epilogues", "cublas_epilogues_vec4"]
STEPS = ["naive", *CUBLAS_STEPS]
SEED = secrets.randbits(31)   # fresh inputs every run; quoted in messages


@pytest.fixture(scope="module")
def ext():
    return build.load_extension("p45")


def inputs(m: int, k: int, h: int, n: int):
    """(x, w1, b1, w2, b2) on the GPU."""
    return operands("p45", m, k, h, n, seed=SEED, device="cuda")


@gpu_test
@pytest.mark.parametrize("step", STEPS)
def test_step_matches_float64_reference(ext, step):
    # The untiled step at KernelBench's sizes is a benchmark, not a test (~1 s): the others are
    # fp32-faithful there.
    for M, K, H, N in SIZES if step == "naive" else [*SIZES, DEFAULT]:
        args = inputs(M, K, H, N)
        ref = reference64("p45", *args)
        poison_allocator((M, H), (M, N), (M,))
        out = getattr(ext, step)(*args)
        assert out.shape == (M,) and out.dtype == torch.float32
        assert not out.isnan().any(), f"{step} {M}x{K}x{H}x{N} left NaN (unwritten) outputs; seed={SEED}"
        err = rel_error(out, ref)
        assert err < 1e-5, f"{step} {M}x{K}x{H}x{N}: rel. error {err:.2e}; seed={SEED}"
    if step != "naive":
        assert tier("p45", out, *args) == "fp32-faithful", f"{step} at KernelBench's sizes; seed={SEED}"


@gpu_test
def test_cublas_tf32_step_within_tf32_error(ext):
    """TF32 rounds both GEMMs' inputs to 10-bit mantissas: error far above fp32, below 3e-3 (and
    KernelBench's check passes at its sizes); the call must leave allow_tf32 and PyTorch's handle
    as it found them, so the fp32 step right after is fp32 again (its error at least 4x smaller
    on long reductions: the logsumexp averages TF32's error down to ~3e-7, only ~10x the fp32
    steps' 3e-8 on the H200, so 4x leaves room)."""
    for M, K, H, N in [*SIZES, DEFAULT]:
        args = inputs(M, K, H, N)
        ref = reference64("p45", *args)
        poison_allocator((M, H), (M, N), (M,))
        before = torch.backends.cuda.matmul.allow_tf32
        out = ext.cublas_tf32_epilogues_vec4(*args)
        assert not out.isnan().any(), f"unwritten outputs; seed={SEED}"
        err = rel_error(out, ref)
        assert err < 3e-3, f"{M}x{K}x{H}x{N}: rel. error {err:.2e}; seed={SEED}"
        assert torch.backends.cuda.matmul.allow_tf32 == before
        fp32_err = rel_error(ext.cublas_epilogues_vec4(*args), ref)
        assert fp32_err < 1e-5, f"fp32 step after the TF32 one: {fp32_err:.2e}; seed={SEED}"
        if K >= 1000:  # long reductions: TF32 rounding must show, or the mode was not applied
            assert err > 4 * fp32_err, (f"{M}x{K}x{H}x{N}: TF32 {err:.2e} vs fp32 {fp32_err:.2e}: "
                                        f"looks like fp32, not TF32; seed={SEED}")
    assert tier("p45", out, *args) == "kb-pass", f"seed={SEED}"


@gpu_test
def test_cublas_steps_stay_fp32_when_torch_allows_tf32(ext):
    """PyTorch's handle is in TF32 math under allow_tf32=True; our fp32 steps force
    CUBLAS_DEFAULT_MATH, so their error stays at least 4x below the TF32 step's (see above)."""
    args = inputs(256, 2048, 1024, 512)
    ref = reference64("p45", *args)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        torch.matmul(args[0], args[1].T)  # PyTorch sets its handle's math mode for this call
        errs = {s: rel_error(getattr(ext, s)(*args), ref) for s in CUBLAS_STEPS}
        tf32_err = rel_error(ext.cublas_tf32_epilogues_vec4(*args), ref)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    for s, err in errs.items():
        assert err < 1e-5 and 4 * err < tf32_err, f"{s}: {err:.2e} (TF32: {tf32_err:.2e}); seed={SEED}"


def outside(buf: torch.Tensor, offset: int, numel: int) -> torch.Tensor:
    return torch.cat([buf[:offset], buf[offset + numel:]])


# (M, N, offset of the tensor in its buffer, expected vec4 fast path)
EPILOGUE_CASES = [
    (64, 1024, 0, True),      # aligned, N % 4 == 0: the float4 path, one 256-float4 chunk
    (64, 1023, 0, False),     # N % 4 != 0: scalar fallback
    (64, 1024, 1, False),     # starts 4 bytes past a 16-byte boundary: scalar fallback
    (7, 13, 3, False),
    (1, 1, 0, False),         # N = 1: one active lane
    (5, 4, 0, True),          # float4 path with a single float4 per row (31 idle lanes)
    (3, 36, 0, True),         # float4 path, N / 4 = 9 < 32
    (9, 1028, 0, True),       # float4 path, second chunk with one float4 (257 per row)
    (2, 2056, 0, True),       # float4 path, 514 float4s: three chunks
    (20001, 12, 0, True),     # more rows than the grid's warps: rows grid-stride (vec4: ~10 per warp)
    (5000, 2056, 0, True),    # vec4: several rows per warp, 3 chunks each, the last ragged: the
                              # prefetch crosses chunk ends and row ends
    (20001, 7, 2, False),     # the same for the scalar kernels
]


@gpu_test
@pytest.mark.parametrize("vec4", [False, True])
def test_lse_only_matches_torch(ext, vec4):
    g = torch.Generator(device="cuda").manual_seed(SEED)
    for M, N, offset, fast in EPILOGUE_CASES:
        z0 = torch.randn(M, N, device="cuda", generator=g) * 4  # logits of both signs, spread
        b = torch.randn(N, device="cuda", generator=g)
        buf, z = guarded_view(M, N, offset, z0)
        assert ext.vec4_fast_path(z, b) == fast
        poison_allocator((M,))
        out = ext.lse_only(z, b, vec4)
        assert out.shape == (M,) and not out.isnan().any(), f"{M}x{N}+{offset}: unwritten outputs; seed={SEED}"
        ref = torch.logsumexp(z0.double() + b.double(), dim=1)
        err = rel_error(out, ref)
        assert err < 1e-6, f"vec4={vec4} {M}x{N}+{offset}: rel. error {err:.2e}; seed={SEED}"
        assert torch.equal(z, z0), "lse_only must only read z"
        assert (outside(buf, offset, M * N) == SENTINEL).all(), "lse_only wrote outside z"


@gpu_test
@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_float4_reduction_version_matches_torch(ext, version):
    g = torch.Generator(device="cuda").manual_seed(SEED)
    for M, N in [(1, 4), (37, 1024), (16384, 1024), (5, 2052)]:
        z = torch.randn(M, N, device="cuda", generator=g) * 4
        b = torch.randn(N, device="cuda", generator=g)
        poison_allocator((M,))
        out = ext.lse_only(z, b, True, version)
        ref = torch.logsumexp(z.double() + b.double(), dim=1)
        err = rel_error(out, ref)
        assert err < 1e-6, f"version {version} {M}x{N}: rel. error {err:.2e}; seed={SEED}"
    with pytest.raises(ValueError, match="version must be 1, 2 or 3"):
        ext.lse_only(z, b, True, 4)


@gpu_test
@pytest.mark.parametrize("vec4", [False, True])
def test_lse_only_infinities_nan_and_huge_values(ext, vec4):
    """Max-subtracted and as torch.logsumexp at the edges: a +inf gives +inf, a row of only
    -inf gives -inf, a NaN gives NaN, +-1e30 neither overflows nor loses the max. Repeated
    3000 times (27000 rows), each warp reduces several of these rows one after the other: no
    state may leak from one row into the next."""
    g = torch.Generator(device="cuda").manual_seed(SEED)
    inf, nan = float("inf"), float("nan")
    for N in [1, 8, 13, 40, 1028]:
        rows = torch.randn(9, N, device="cuda", generator=g) * 3
        rows[0] = -inf                                   # only -inf
        rows[1, N // 2] = inf                            # one +inf
        rows[2, N - 1] = nan                             # one NaN
        rows[3] = torch.randn(N, device="cuda", generator=g) * 1e30  # huge, both signs
        rows[4, ::2] = -inf                              # -inf mixed with finite values
        rows[5] = -inf
        rows[5, N - 1] = 7.0                             # one finite value among -inf, last
        rows[6] = inf                                    # only +inf
        rows[7] = -inf
        rows[7, 0] = nan                                 # NaN among -inf
        rows[8] = -1e30                                  # huge negative, all equal
        b = torch.randn(N, device="cuda", generator=g)
        for repeats in (1, 3000):
            z = rows.repeat(repeats, 1)
            out = ext.lse_only(z, b, vec4)
            ref = torch.logsumexp(z.double() + b.double(), dim=1).float()
            torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6, equal_nan=True,
                                       msg=lambda m: f"vec4={vec4} N={N} x{repeats}; seed={SEED}\n{m}")


@gpu_test
@pytest.mark.parametrize("vec4", [False, True])
def test_sigmoid_only_in_place(ext, vec4):
    """In place, nothing written outside h, the float4 path exactly where alignment allows it; a
    bias 4 bytes past a 16-byte boundary takes the scalar fallback in both epilogues; NaN and
    infinities come through as sigmoid has them."""
    g = torch.Generator(device="cuda").manual_seed(SEED)
    for M, N, offset, fast in EPILOGUE_CASES:
        h0 = torch.randn(M, N, device="cuda", generator=g) * 4  # stands in for x @ W1.T
        b = torch.randn(N, device="cuda", generator=g)
        buf, h = guarded_view(M, N, offset, h0)
        assert ext.vec4_fast_path(h, b) == fast
        out = ext.sigmoid_only(h, b, vec4)
        assert out.data_ptr() == h.data_ptr(), "sigmoid_only works in place and returns h"
        err = rel_error(h, torch.sigmoid(h0.double() + b.double()))
        assert err < 1e-6, f"vec4={vec4} {M}x{N}+{offset}: rel. error {err:.2e}; seed={SEED}"
        assert (outside(buf, offset, M * N) == SENTINEL).all(), "sigmoid_only wrote outside h"
    t0 = torch.randn(9, 64, device="cuda") * 4
    b = torch.randn(65, device="cuda")[1:]
    assert b.data_ptr() % 16 != 0 and b.is_contiguous()
    t = t0.clone()
    assert not ext.vec4_fast_path(t, b)
    assert rel_error(ext.lse_only(t, b, vec4), torch.logsumexp(t0.double() + b.double(), dim=1)) < 1e-6
    ext.sigmoid_only(t, b, vec4)
    assert rel_error(t, torch.sigmoid(t0.double() + b.double())) < 1e-6
    h = torch.randn(8, 16, device="cuda")
    h[3, 5], h[1, 2], h[2, 7] = float("nan"), float("inf"), -float("inf")
    out = ext.sigmoid_only(h, torch.randn(16, device="cuda"), vec4)
    assert out.isnan().sum().item() == 1 and out[3, 5].isnan()
    assert abs(out[1, 2].item() - 1.0) <= 1e-7 and out[2, 7].item() == 0.0


@gpu_test
def test_misaligned_and_strided_inputs(ext):
    """x starting 4 bytes past a 16-byte boundary, transposed (non-contiguous) weights and a
    strided bias: the binding copies what is not contiguous, the result is unchanged."""
    M, K, H, N = 130, 260, 132, 68
    x, w1, b1, w2, b2 = inputs(M, K, H, N)
    buf = torch.empty(M * K + 1, device="cuda")
    x_mis = buf[1:].view(M, K)
    x_mis.copy_(x)
    assert x_mis.data_ptr() % 16 != 0 and x_mis.is_contiguous()
    w1_t, w2_t = w1.T.contiguous().T, w2.T.contiguous().T  # same values, column-major strides
    b2_s = torch.stack([b2, b2], dim=1)[:, 0]
    assert not (w1_t.is_contiguous() or w2_t.is_contiguous() or b2_s.is_contiguous())
    ref = reference64("p45", x, w1, b1, w2, b2)
    for step in STEPS:
        err = rel_error(getattr(ext, step)(x_mis, w1_t, b1, w2_t, b2_s), ref)
        assert err < 1e-5, f"{step}: rel. error {err:.2e}; seed={SEED}"


@gpu_test
def test_steps_run_on_the_current_stream(ext):
    args = inputs(512, 1024, 768, 1024)
    ref = reference64("p45", *args)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        outs = {s: getattr(ext, s)(*args) for s in STEPS}
        z = torch.randn(512, 1024, device="cuda")
        b = torch.randn(1024, device="cuda")
        lse = ext.lse_only(z, b, True)
    side.synchronize()  # only the side stream: work left on another stream would be unfinished
    for s, out in outs.items():
        assert rel_error(out, ref) < 1e-5, f"{s} on a side stream; seed={SEED}"
    assert rel_error(lse, torch.logsumexp(z.double() + b.double(), dim=1)) < 1e-6


@gpu_test
def test_empty_batch_returns_empty(ext):
    x, w1, b1, w2, b2 = inputs(1, 8, 6, 4)
    for s in [*STEPS, "cublas_tf32_epilogues_vec4"]:
        assert getattr(ext, s)(x[:0], w1, b1, w2, b2).shape == (0,)
    assert ext.lse_only(torch.randn(0, 4, device="cuda"), b2, True).shape == (0,)


@gpu_test
def test_bad_inputs_name_the_parameter(ext):
    x, w1, b1, w2, b2 = inputs(4, 8, 6, 5)
    for s in [*STEPS, "cublas_tf32_epilogues_vec4"]:
        fn = getattr(ext, s)
        with pytest.raises(TypeError, match=r"x must be torch\.float32.*Double"):
            fn(x.double(), w1, b1, w2, b2)
        with pytest.raises(TypeError, match=r"w2 must be torch\.float32"):
            fn(x, w1, b1, w2.half(), b2)
        with pytest.raises(ValueError, match=r"x must be a CUDA tensor.*cpu"):
            fn(x.cpu(), w1, b1, w2, b2)
        with pytest.raises(ValueError, match=r"b1 must be a CUDA tensor"):
            fn(x, w1, b1.cpu(), w2, b2)
        with pytest.raises(ValueError, match=r"w1\.size\(1\) must equal x\.size\(1\)"):
            fn(x, w1[:, :5], b1, w2, b2)
        with pytest.raises(ValueError, match=r"b1 must have w1\.size\(0\) = 6"):
            fn(x, w1, b1[:5], w2, b2)
        with pytest.raises(ValueError, match=r"w2\.size\(1\) must equal w1\.size\(0\) \(H = 6\)"):
            fn(x, w1, b1, w2[:, :4], b2)
        with pytest.raises(ValueError, match=r"b2 must have w2\.size\(0\) = 5"):
            fn(x, w1, b1, w2, b2[:4])
        with pytest.raises(ValueError, match=r"x must be 2-D, got 3-D"):
            fn(x[None], w1, b1, w2, b2)
        with pytest.raises(ValueError, match=r"w2\.size\(0\) \(N\) must be >= 1"):
            fn(x, w1, b1, w2[:0], b2[:0])
    h = torch.randn(4, 6, device="cuda")
    with pytest.raises(ValueError, match=r"h must be contiguous"):
        ext.sigmoid_only(torch.randn(6, 4, device="cuda").T, b1, True)
    with pytest.raises(ValueError, match=r"b1 must have h\.size\(1\) = 6"):
        ext.sigmoid_only(h, b1[:5], False)
    with pytest.raises(ValueError, match=r"b2 must have z\.size\(1\) = 6"):
        ext.lse_only(h, b2, False)
    with pytest.raises(TypeError, match=r"z must be torch\.float32"):
        ext.lse_only(h.double(), b1, True)
    with pytest.raises(ValueError, match=r"z\.size\(1\) \(N\) must be >= 1"):
        ext.lse_only(h[:, :0], b1[:0], True)
    with pytest.raises(ValueError, match=r"t must be contiguous"):
        ext.vec4_fast_path(torch.randn(6, 4, device="cuda").T, b1)
