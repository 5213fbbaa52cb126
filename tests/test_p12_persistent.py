"""Problem 12, step 10: the persistent, TMA-fed Triton GEMM with the epilogue fused.

Without a GPU the kernel runs in Triton's interpreter on CPU tensors: the tensor descriptors
become masked loads and stores, ``flatten`` and ``warp_specialize`` are ignored and every dot is
fp32, so CPU runs check the tile walk, the descriptors' edges, the split epilogue (one accumulator
split in halves or quarters, or two accumulators), the epilogue math and the fallback to step 08,
not precision or speed. Every GPU config and every ``PROBE_SPACE`` config is compiled for sm_90a
here (no GPU needed); tests marked ``gpu`` check precision on real tensor cores.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from fusedkit.harness import reference64 as model_reference64  # noqa: E402
from fusedkit.harness import rel_error  # noqa: E402
from fusedkit.kernels import load_step  # noqa: E402
from kernel_helpers import gpu_test, poison_allocator, triton_sm90  # noqa: E402
from reference import MULT, SLOPE, model, operands, reference64  # noqa: E402

k10 = load_step("p12", "10_triton_persistent_tma.py")
k08 = k10._step08  # the very module step 10 falls back to

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INTERPRET = k10.INTERPRET
TMA_PRECISIONS = ("tf32", "tf32x3")  # "ieee" is computed by step 08
# The interpreter computes in fp32; on a GPU the small-shape tests allow tf32 its 10 bits.
LOGIC_TOL = {p: (3e-3 if (p == "tf32" and not INTERPRET) else 1e-5) for p in k10.PRECISIONS}


def inputs(m: int, k: int, n: int, seed: int = 0):
    return operands("p12", m, k, n, seed=seed, device=DEVICE)


def ref64(x, w, b):
    return reference64("p12", x, w, b)


@pytest.fixture
def step08_calls(monkeypatch):
    """Counts the calls that reach step 08's wrapper (the fallback), still computing them."""
    calls: list[str] = []
    real = k08.linear_leakyrelu

    def spy(x, w, b, mult, slope, precision="tf32x3"):
        calls.append(precision)
        return real(x, w, b, mult, slope, precision)

    monkeypatch.setattr(k08, "linear_leakyrelu", spy)
    return calls


# ---------------------------------------------------------------------------------------
# The TMA kernel (interpreter on the CPU, or the GPU when there is one)
# ---------------------------------------------------------------------------------------
# (M, K, N), K and N multiples of 4 (TMA's 16-byte rule): one tile, fewer tiles than programs
# and K below one BLOCK_K; then tails in every dim and (under the interpreter, 16x16 tiles over 3
# programs) 5x9 tiles, several per program. A tile the walk skipped would keep whatever
# torch.empty returned: a result equal to the reference shows every tile computed and stored.
@pytest.mark.parametrize("precision", TMA_PRECISIONS)
@pytest.mark.parametrize("shape", [(1, 4, 4), (70, 100, 132)], ids=lambda s: "x".join(map(str, s)))
def test_matches_float64_on_odd_tma_sizes(precision, shape, step08_calls):
    x, w, b = inputs(*shape)
    assert k10.uses_tma(x, w, precision)
    y = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, precision)
    assert y.shape == (shape[0], shape[2]) and y.dtype == torch.float32 and y.is_contiguous()
    err = rel_error(y, ref64(x, w, b))
    assert err < LOGIC_TOL[precision], f"{precision} {shape}: rel. error {err:.2e}"
    assert step08_calls == [], "a TMA-ready call went to step 08"


def test_negative_multiplier_and_other_slope():
    # A negative multiplier flips which outputs take the slope branch; checks both branches.
    x, w, b = inputs(19, 36, 24, seed=5)
    y = k10.linear_leakyrelu_persistent(x, w, b, -1.5, 0.3, "tf32x3")
    m = model("p12", x, w, b)
    m.multiplier, m.leaky_relu.negative_slope = -1.5, 0.3
    ref = model_reference64(m, [x])
    assert (ref < 0).any() and (ref > 0).any()
    assert rel_error(y, ref) < LOGIC_TOL["tf32x3"]


def test_bias_is_read_through_its_stride():
    x, w, b0 = inputs(21, 40, 20, seed=7)
    b = torch.zeros(2 * 20, device=DEVICE)[::2]  # stride 2: TMA does not read b
    b.copy_(b0)
    assert k10.uses_tma(x, w)
    y = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, "tf32x3")
    assert rel_error(y, ref64(x, w, b0)) < LOGIC_TOL["tf32x3"]


def test_aligned_row_stride_views_use_tma():
    # Row strides other than K are fine for TMA when 16-byte aligned: a column slice of a
    # wider matrix whose start stays aligned.
    x0, w0, b = inputs(30, 36, 24, seed=8)
    x = torch.zeros(30, 52, device=DEVICE)[:, :36]  # stride (52, 1): 208 bytes
    x.copy_(x0)
    w = torch.zeros(24, 44, device=DEVICE)[:, 4:40]  # starts 16 bytes in, stride (44, 1)
    w.copy_(w0)
    assert k10.uses_tma(x, w)
    y = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, "tf32x3")
    assert rel_error(y, ref64(x0, w0, b)) < LOGIC_TOL["tf32x3"]


def test_every_gpu_config_computes_the_same():
    # Each GPU config's code path (whole or split epilogue, flattened or warp-specialized loop,
    # its tile sizes) through config=, at a size with 2-3 tiles per dim and K tails. Under the
    # interpreter, which ignores stages, warps and the dot's precision, once per tile and store
    # split: the logic of configs only a GPU could time.
    m, k, n = (260, 72, 300) if INTERPRET else (1000, 1028, 1500)
    x, w, b = inputs(m, k, n, seed=9)
    ref = ref64(x, w, b)
    seen = set()
    for precision in TMA_PRECISIONS:
        for cfg in k10.GPU_CONFIGS[precision]:
            bm, bn, bk, _stages, _warps, *rest = k10.config_key(cfg)
            if INTERPRET and (bm, bn, bk, *rest) in seen:
                continue
            seen.add((bm, bn, bk, *rest))
            y = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, precision, config=cfg)
            err = rel_error(y, ref)
            assert err < LOGIC_TOL[precision], f"{k10.config_key(cfg)}: rel. error {err:.2e}"


@pytest.mark.parametrize("split_n, warp_specialize",
                         [(1, False), (2, False), (4, False), (1, True), (2, True)])
def test_small_configs_walk_many_tiles(split_n, warp_specialize):
    # Whole, halved or quartered epilogue (split by reshape, or two accumulators when
    # warp-specialized): under the interpreter 5x4 tiles of 16x64 over 3 programs; on a GPU
    # 128x64 tiles (warp specialization gives each of its two consumer warp groups 64 rows,
    # wgmma's minimum).
    if INTERPRET:
        cfg = k10.make_config(16, 64, 16, 1, 4, split_n, warp_specialize)
    else:
        cfg = k10.make_config(128, 64, 32, 3, 4, split_n, warp_specialize)
    x, w, b = inputs(70, 52, 232, seed=10)
    y = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, "tf32x3", config=cfg)
    assert rel_error(y, ref64(x, w, b)) < LOGIC_TOL["tf32x3"]


def _probe_picks() -> dict[str, tuple]:
    """One PROBE_SPACE entry per code path it adds to the autotuner's: quarter stores, a
    GROUP_M other than 8, a 2-CTA cluster (the interpreter runs it as one program)."""
    space = k10.PROBE_SPACE["tf32"]
    return {"quarters": next(k for k in space if k[5] == 4),
            "group_m": next(k for k in space if k[7] != 8),
            "cluster": next(k for k in space if k[8] == 2)}


@pytest.mark.parametrize("name", sorted(_probe_picks()))
def test_probe_space_configs_compute_the_same(name):
    # Through config=, at a size with several row- and column-blocks of each tile (5 and
    # 4 of 128x256, so GROUP_M 4 makes two groups), tails in M, N and K. (The probe runs
    # every entry at KernelBench's size on a GPU, checked against float64.)
    key = _probe_picks()[name]
    m, k, n = (600, 40, 776) if INTERPRET else (1000, 1028, 1500)
    x, w, b = inputs(m, k, n, seed=11)
    y = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, "tf32", config=k10.make_config(*key))
    err = rel_error(y, ref64(x, w, b))
    assert err < LOGIC_TOL["tf32"], f"{key}: rel. error {err:.2e}"


# ---------------------------------------------------------------------------------------
# TMA's rules and the fallback to step 08
# ---------------------------------------------------------------------------------------
def _misaligned_x(x):
    """x's values at a start 4 bytes past a 16-byte boundary (row stride still aligned)."""
    buf = torch.zeros(x.shape[0] * x.shape[1] + 4, device=x.device)
    v = buf[1:1 + x.numel()].view(x.shape)
    v.copy_(x)
    return v


def _column_major(t):
    return t.T.contiguous().T


FALLBACK_CASES = [   # (M, K, N)
    ("K not multiple of 4", (6, 9, 12), lambda x, w: (x, w)),
    ("N not multiple of 4", (6, 8, 10), lambda x, w: (x, w)),
    ("K and N odd", (5, 9, 7), lambda x, w: (x, w)),
    ("x misaligned", (6, 8, 12), lambda x, w: (_misaligned_x(x), w)),
    ("x column-major", (6, 8, 12), lambda x, w: (_column_major(x), w)),
    ("weight column-major", (6, 8, 12), lambda x, w: (x, _column_major(w))),
    ("x rows overlap (expanded)", (6, 8, 12), lambda x, w: (x[:1].expand(6, 8), w)),
]


@pytest.mark.parametrize("case", FALLBACK_CASES, ids=[c[0] for c in FALLBACK_CASES])
def test_falls_back_to_step08_when_tma_rules_fail(case, step08_calls):
    _, (m, k, n), mutate = case
    x0, w0, b = inputs(m, k, n, seed=12)
    x, w = mutate(x0, w0)  # same values (the expanded x repeats its first row)
    assert not k10.uses_tma(x, w)
    y = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, "tf32x3")
    assert step08_calls == ["tf32x3"], "the fallback must be step 08, with the same precision"
    assert y.shape == (m, n) and y.is_contiguous()
    assert rel_error(y, ref64(x, w, b)) < LOGIC_TOL["tf32x3"]


def test_ieee_goes_to_step08_unless_a_config_is_given(step08_calls):
    x, w, b = inputs(9, 24, 16, seed=13)
    assert not k10.uses_tma(x, w, "ieee") and k10.uses_tma(x, w, "tf32")
    y = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, "ieee")
    assert step08_calls == ["ieee"]
    assert rel_error(y, ref64(x, w, b)) < LOGIC_TOL["ieee"]
    assert k10.configs_for("ieee") == ([] if not INTERPRET else k10.configs_for("tf32"))
    small = (16, 16, 16, 1) if INTERPRET else (64, 64, 32, 2)  # tile and stages
    cfg = k10.make_config(*small, 4, 1, False)
    y2 = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, "ieee", config=cfg)
    assert step08_calls == ["ieee"], "config= must run this step's kernel"
    assert rel_error(y2, ref64(x, w, b)) < LOGIC_TOL["ieee"]


# ---------------------------------------------------------------------------------------
# The config lists (what a GPU autotunes over)
# ---------------------------------------------------------------------------------------
SMEM_LIMIT = 227 * 1024  # H100/H200 shared memory per block


@pytest.mark.parametrize("precision", TMA_PRECISIONS)
def test_gpu_configs_fit_in_shared_memory(precision):
    cfgs = k10.GPU_CONFIGS[precision]
    assert 2 <= len(cfgs) <= 8 and len({k10.config_key(c) for c in cfgs}) == len(cfgs)
    for c in cfgs:
        bm, bn, bk, stages, warps, split, ws, group_m, num_ctas = k10.config_key(c)
        assert k10.config_key(k10.make_config(*k10.config_key(c))) == k10.config_key(c)
        smem = 4 * (bm + bn) * bk * stages + 4 * bm * bn // split  # pipeline + staging
        assert smem <= SMEM_LIMIT, f"{k10.config_key(c)} needs {smem / 1024:.0f} KB"
        assert c.kwargs["FLATTEN"] is (not ws)
        # The wrapper launches one program per SM for the autotuner: one CTA per program.
        assert num_ctas == 1 and group_m == 8, f"{k10.config_key(c)}"
        if ws:  # Triton 3.6's Hopper pass only splits 4-warp kernels into partitions
            assert warps == 4, f"{k10.config_key(c)}: warp specialization needs num_warps=4"


def test_probe_space_is_wider_and_never_warp_specialized():
    assert set(k10.PROBE_SPACE) == {"tf32"}
    keys = k10.PROBE_SPACE["tf32"]
    assert 12 <= len(keys) <= 20 and len(set(keys)) == len(keys)
    assert keys[0] in set(map(k10.config_key, k10.GPU_CONFIGS["tf32"]))  # the run's reference
    for key in keys:
        assert len(key) == 9 and not key[6], f"{key}: warp-specialized configs gave NaN on the H200"
        assert k10.config_key(k10.make_config(*key)) == key
    # Cluster entries last: a faulting one would spoil the probe's later configs.
    ctas = [key[8] for key in keys]
    assert ctas == sorted(ctas) and 2 in ctas


@pytest.mark.parametrize("args, pattern", [
    ((64, 64, 32, 3, 4, 3, False), r"^split_n=3: must be in \(1, 2, 4\) \(warp_specialize=False\) and divide bn=64"),
    ((64, 64, 32, 3, 4, 4, True), r"^split_n=4: must be in \(1, 2\) \(warp_specialize=True\)"),
    ((64, 32, 32, 3, 4, 4, False, 8, 1), None),  # allowed: 8-column slices
    ((64, 64, 32, 3, 4, 2, False, 0, 1), r"^group_m=0: must be >= 1"),
    ((64, 64, 32, 3, 4, 2, False, 8, 4), r"^num_ctas=4: must be 1 or 2"),
])
def test_make_config_rejects_bad_values(args, pattern):
    if pattern is None:
        assert k10.config_key(k10.make_config(*args)) == args
        return
    with pytest.raises(ValueError, match=pattern):
        k10.make_config(*args)


# ---------------------------------------------------------------------------------------
# Input checks: step 08's, plus this step's own arguments
# ---------------------------------------------------------------------------------------
def _good():
    return inputs(4, 12, 8, seed=41)


BAD_INPUTS = [
    ("x float64", lambda x, w, b: (x.double(), w, b), TypeError, r"^x.dtype=torch.float64"),
    ("bias 2-D", lambda x, w, b: (x, w, b[None]), ValueError, r"^bias has shape \(1, 8\)"),
    ("K mismatch", lambda x, w, b: (x, w[:, :8], b), ValueError, r"^weight.shape=\(8, 8\) does not match x"),
    ("M empty", lambda x, w, b: (x[:0], w, b), ValueError, r"^M = x.shape\[0\] is 0"),
    ("devices differ", lambda x, w, b: (x.to("meta"), w, b), ValueError, r"share one device.*x on meta"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_name_the_parameter(case):
    _, mutate, error, pattern = case
    x, w, b = mutate(*_good())
    with pytest.raises(error, match=pattern):
        k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE)


def test_bad_scalar_precision_and_config_name_the_parameter():
    x, w, b = _good()
    with pytest.raises(TypeError, match=r"^negative_slope=True: must be a Python float or int"):
        k10.linear_leakyrelu_persistent(x, w, b, MULT, True)
    with pytest.raises(ValueError, match=r"precision='fp16': allowed values are \('ieee', 'tf32x3', 'tf32'\)"):
        k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, precision="fp16")
    with pytest.raises(ValueError, match=r"^precision='bf16': allowed values"):
        k10.configs_for("bf16")
    with pytest.raises(TypeError, match=r"^config=\{'BLOCK_M': 16\}: must be a triton.Config"):
        k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, config={"BLOCK_M": 16})


def test_config_with_operands_tma_cannot_read_is_an_error():
    x, w, b = inputs(4, 9, 8, seed=42)  # K = 9: rows are 36 bytes apart
    cfg = k10.configs_for("tf32")[0]
    with pytest.raises(ValueError, match=r"runs the TMA kernel, which needs x.stride\(\)=\(9, 1\)"):
        k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, config=cfg)


# ---------------------------------------------------------------------------------------
# What the compiler makes of every GPU config and every PROBE_SPACE config (sm_90a, compiled on
# this machine: no GPU needed). num_ctas goes to the compiler (a cluster kernel is split per CTA).
# ---------------------------------------------------------------------------------------
def _check_compiled(r: dict) -> None:
    """Fits in shared memory, spills no registers, keeps the wgmmas pipelined (no C7515)."""
    assert r["smem"] <= SMEM_LIMIT, f"{r}: over the 227 KB of shared memory"
    assert r["spill"] == 0, f"{r}: ptxas spills registers"
    assert not r["c7515"], f"{r}: ptxas serializes the wgmmas (C7515)"


def test_gpu_configs_compile_for_sm90_as_documented():
    # Each GPU config: the checks above, and warp-specialized exactly when its config says
    # so (12 warps: producer + 2 consumers).
    rows = [r for r in triton_sm90("p12/10") if r["set"] == "gpu"]
    assert len(rows) == sum(len(c) for c in k10.GPU_CONFIGS.values())
    for r in rows:
        _check_compiled(r)
        ws = r["key"][6]
        assert r["ws"] is ws and r["warps"] == (12 if ws else r["key"][4]), f"{r}: warp specialization"
        assert r["ctas"] == 1


def test_probe_space_compiles_for_sm90():
    # Every PROBE_SPACE config (what the GPU probe will time): the same checks, none
    # warp-specialized, and a 2-CTA cluster kernel exactly when num_ctas says so.
    rows = [r for r in triton_sm90("p12/10") if r["set"] == "probe"]
    assert [tuple(r["key"]) for r in rows] == k10.PROBE_SPACE["tf32"]
    for r in rows:
        _check_compiled(r)
        assert not r["ws"] and r["warps"] == r["key"][4], f"{r}: warps"
        assert r["ctas"] == r["key"][8], f"{r}: cluster size"


# ---------------------------------------------------------------------------------------
# Precision on real tensor cores (GPU only)
# ---------------------------------------------------------------------------------------
GPU_TOL = {"tf32x3": 5e-6, "tf32": 3e-3}
DEFAULT = (1024, 8192, 8192)  # (M, K, N) = (batch, in_features, out_features)


@gpu_test
@pytest.mark.parametrize("precision", TMA_PRECISIONS)
def test_gpu_error_vs_float64(precision):
    # KernelBench's size; tails in M and N with TMA over about two waves of tiles; a fallback
    # shape (K = 8191); every output written (the allocator poisoned).
    for shape in [DEFAULT, (1000, 4100, 8188), (17, 8191, 1000)]:
        x, w, b = inputs(*shape)
        poison_allocator((shape[0], shape[2]))
        y = k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, precision)
        err = rel_error(y, ref64(x, w, b))
        assert err < GPU_TOL[precision], f"{precision} {shape}: rel. error {err:.2e}"


@gpu_test
def test_gpu_tf32_matches_step08_tf32_error():
    # Same tf32 products, different summation order: errors of the same size (~7.5e-4).
    x, w, b = inputs(*DEFAULT, seed=1)
    ref = ref64(x, w, b)
    e10 = rel_error(k10.linear_leakyrelu_persistent(x, w, b, MULT, SLOPE, "tf32"), ref)
    e08 = rel_error(k08.linear_leakyrelu(x, w, b, MULT, SLOPE, "tf32"), ref)
    assert 0.5 * e08 < e10 < 2 * e08, f"step 10 {e10:.2e} vs step 08 {e08:.2e}"
