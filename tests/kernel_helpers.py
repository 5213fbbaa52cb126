"""What the kernel tests of every problem share: marks, PTX patterns and reports, poisoned
allocations and sentinel-guarded views on a GPU, and the sm_90a compile of the Triton steps' GPU
configs (one subprocess per test run)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fusedkit import build

LD_V4 = r"ld\.global(\.nc)?\.v4\.f32"
ST_V4 = r"st\.global\.v4\.f32"
SENTINEL = -12345.0

needs_nvcc = pytest.mark.skipif(not build.nvcc_available(),
                                reason="nvcc (CUDA toolkit) not found; PTX checks need it, not a GPU")
_GPU_MARKS = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA GPU (torch sees none); these run on a GPU machine, "
                                        "select them with -m gpu")]


def gpu_test(fn):
    """Mark a test `gpu` and skip it cleanly where torch sees no CUDA GPU."""
    for mark in _GPU_MARKS:
        fn = mark(fn)
    return fn


def entry_body(ptx_text: str, kernel: str) -> str:
    """The PTX of one kernel: from its .entry line to the next .entry (or the end)."""
    start = ptx_text.index(f".entry {kernel}(")
    nxt = ptx_text.find(".entry ", start + 1)
    return ptx_text[start:nxt if nxt != -1 else len(ptx_text)]


@functools.cache
def ptxas_report(src: Path) -> tuple[dict[str, dict[str, int]], list[str]]:
    """(build.resource_usage's per-kernel table, ptxas's warning lines) of one ``.cu`` file at its
    required arch: a wgmma that ptxas serialises or a setmaxnreg it drops is only a warning."""
    return build.ptxas(src, build.required_arch(src))


def poison_allocator(*shapes: tuple[int, ...]) -> None:
    """Fill blocks of the given sizes (the output's, the intermediates') with NaN and free them:
    PyTorch's caching allocator tends to hand those blocks out next, so an element a kernel
    forgets to write is NaN and shows in the result."""
    junk = [torch.full(s, float("nan"), device="cuda") for s in shapes]
    del junk


def guarded_view(M: int, N: int, offset: int, fill: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A (M, N) contiguous view that starts `offset` floats into a buffer whose other elements
    hold SENTINEL, so that a write outside the view is seen afterwards. Returns (buffer, view)."""
    buf = torch.full((M * N + offset + 8,), SENTINEL, device="cuda")
    t = buf[offset:offset + M * N].view(M, N)
    t.copy_(fill)
    return buf, t


# What Triton makes of the GPU configs of step p12/10 or p45/06 (the argument) for sm_90a,
# compiled on this machine (no GPU needed) in a process of its own, where Triton compiles instead
# of interpreting. One JSON line per config: its step and key, Triton's shared memory and warps,
# whether it is warp-specialised and issues wgmma, and from the very ptxas run that made its
# cubin the registers, spilled bytes and whether ptxas serialised the wgmmas (warning C7515).
_COMPILE_SM90 = r"""
import contextlib, io, json, multiprocessing, os, re, sys
os.environ["TRITON_INTERPRET"] = "0"
import triton
import triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from fusedkit.kernels import load_step

knobs.nvidia.dump_ptxas_log = True       # Triton prints its ptxas -v log: no second ptxas run,
knobs.compilation.always_compile = True  # and runs ptxas even where its cache holds the kernel
jobs = []   # (what the row says of the config, the jit function, signature, constants, aligned args, config)

if sys.argv[1] == "p12/10":
    # KernelBench's sizes (all multiples of 16); the tile walk's stride is one program per SM, or
    # per 2-CTA cluster, as the wrapper launches it.
    k10 = load_step("p12", "10_triton_persistent_tma.py")
    ints = ["M", "N", "K", "stride_xm", "stride_wn"]
    sig = {"x_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32", "y_ptr": "*fp32",
           **{a: "i32" for a in ints}, "multiplier": "fp32", "negative_slope": "fp32"}
    todo = [("gpu", p, cfg) for p, cfgs in k10.GPU_CONFIGS.items() for cfg in cfgs]
    todo += [("probe", p, k10.make_config(*key)) for p, keys in k10.PROBE_SPACE.items() for key in keys]
    jobs += [({"step": "p12/10", "set": which, "prec": prec, "key": list(k10.config_key(cfg))},
              k10._persistent_kernel.fn, sig,
              {"stride_b": 1, "INPUT_PRECISION": prec, "NUM_SMS": 132 // cfg.num_ctas, **cfg.kwargs},
              ["x_ptr", "w_ptr", "b_ptr", "y_ptr", *ints], cfg) for which, prec, cfg in todo]

if sys.argv[1] == "p45/06":
    # Both GEMMs in fp16 and bf16: contiguous operands (unit strides along K), every size a
    # multiple of 16.
    k06 = load_step("p45", "06_triton_fp16_lse.py")
    unit = {"stride_xk", "stride_wk", "stride_b", "stride_hn", "stride_hk", "stride_pt", "stride_st"}
    kernels = {"gemm1": (k06._linear_sigmoid_lowp_kernel, {"x_ptr": "*fp32", "w_ptr": "*DT", "b_ptr": "*fp32",
                                                            "h_ptr": "*DT"}),
               "gemm2": (k06._linear_partial_lse_lowp_kernel, {"h_ptr": "*DT", "w_ptr": "*DT", "b_ptr": "*fp32",
                                                                "pmax_ptr": "*fp32", "psum_ptr": "*fp32"})}
    for gemm, (kernel, ptrs) in kernels.items():
        jit = kernel.fn.fn  # autotune -> heuristics -> jit
        for dt, tl_dt in [("fp16", tl.float16), ("bf16", tl.bfloat16)]:
            for cfg in k06.GPU_CONFIGS[gemm]:
                kw = cfg.kwargs
                consts = {"DTYPE": tl_dt, "EMULATE": False, "EVEN_K": True, **kw,
                          **{a: 1 for a in jit.arg_names if a in unit}}
                sig = {**{a: "i32" for a in jit.arg_names}, **{a: t.replace("DT", dt) for a, t in ptrs.items()}}
                key = [kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], cfg.num_stages, cfg.num_warps]
                jobs.append(({"step": "p45/06", "gemm": gemm, "dtype": dt, "key": key}, jit, sig, consts,
                             [a for a in jit.arg_names if a not in consts], cfg))

# A config listed twice (the probe's first entry is a GPU config) is compiled once.
same = [(j[0]["step"], str(j[0]["key"]), str(sorted(j[3].items()))) for j in jobs]
unique = sorted(set(same), key=same.index)


def compile_one(i):
    _, jit, sig, consts, aligned, cfg = jobs[same.index(unique[i])]
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        ck = triton.compile(ASTSource(jit, {**sig, **{c: "constexpr" for c in consts}}, constexprs=consts,
                                      attrs={(jit.arg_names.index(a),): [["tt.divisibility", 16]] for a in aligned}),
                            target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages,
                                     "num_ctas": cfg.num_ctas})
    text = log.getvalue()
    return {"smem": ck.metadata.shared, "warps": ck.metadata.num_warps, "ctas": ck.metadata.num_ctas,
            "ws": "ttg.warp_specialize" in ck.asm["ttgir"], "wgmma": "wgmma.mma_async" in ck.asm["ptx"],
            "regs": max(map(int, re.findall(r"Used (\d+) registers", text))),
            "spill": sum(map(int, re.findall(r"(\d+) bytes spill stores", text))),
            "c7515": "C7515" in text}


with multiprocessing.get_context("fork").Pool(min(8, os.cpu_count() or 1)) as pool:   # a process a core
    rows = pool.map(compile_one, range(len(unique)), chunksize=1)
for job, s in zip(jobs, same):
    print(json.dumps({**job[0], **rows[unique.index(s)]}))
"""


@functools.cache
def triton_sm90(step: str) -> tuple[dict, ...]:
    """Every GPU config of ``step``, "p12/10" (and its PROBE_SPACE) or "p45/06", compiled for
    sm_90a with Triton's own ptxas: one dict per config (see _COMPILE_SM90)."""
    nvidia = pytest.importorskip("triton.backends.nvidia.compiler")
    if not os.path.isfile(nvidia.get_ptxas(90).path):
        pytest.skip("Triton's ptxas is not installed")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-c", _COMPILE_SM90, step], capture_output=True, text=True,
                          cwd=root, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tuple(json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))
