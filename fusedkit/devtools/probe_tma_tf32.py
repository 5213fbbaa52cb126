"""Probe: does feeding step 08's tf32 GEMM through Hopper's bulk-copy engine (TMA tensor
descriptors) close the gap to cuBLAS's TF32 GEMM?  Prints one line per config.

    python -m fusedkit.devtools.probe_tma_tf32          (GPU; TRITON_INTERPRET=1 checks the logic on CPU)
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from fusedkit import bench, problems
from fusedkit.check import rel_error
from fusedkit.problems.baselines import tf32_matmul


@triton.jit
def _tma_kernel(x_desc, w_desc, b_ptr, y_desc, M, N, K, multiplier, negative_slope,
                PREC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    off_m, off_n = pid_m * BLOCK_M, pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = x_desc.load([off_m, k * BLOCK_K])          # (BM, BK); TMA zero-fills past the edges
        w = w_desc.load([off_n, k * BLOCK_K])          # (BN, BK), K-major as wgmma wants
        acc = tl.dot(a, w.T, acc, input_precision=PREC)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
    v = (acc + bias[None, :]) * multiplier
    v = tl.where(v > 0, v, v * negative_slope)
    y_desc.store([off_m, off_n], v)                    # TMA clips the store at the edges


def run(x, w, b, prec, bm, bn, bk, stages, warps, group=8):
    m, k = x.shape
    n = w.shape[0]
    y = torch.empty(m, n, device=x.device)
    xd = TensorDescriptor.from_tensor(x, [bm, bk])
    wd = TensorDescriptor.from_tensor(w, [bn, bk])
    yd = TensorDescriptor.from_tensor(y, [bm, bn])
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _tma_kernel[grid](xd, wd, b, yd, m, n, k, 2.0, 0.1, PREC=prec, BLOCK_M=bm, BLOCK_N=bn,
                      BLOCK_K=bk, GROUP_M=group, num_stages=stages, num_warps=warps)
    return y


def main() -> None:
    gpu = torch.cuda.is_available()
    p = problems.get("p12")
    s = p.defaults if gpu else p.sizes(batch_size=40, in_features=72, out_features=48)
    dev = "cuda" if gpu else "cpu"
    model = p.make_model(s, seed=3, device=dev)
    (x,) = p.get_inputs(s, seed=3, device=dev)
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    with torch.no_grad():
        ref = model.double()(x.double())
        model.float()
    if gpu:
        with tf32_matmul(True), torch.no_grad():
            t = bench.time_fn(lambda: model(x), warmup_ms=25, rep_ms=200)
        print(f"eager tf32: {t.median_ms:.4f} ms", flush=True)
    configs = [(128, 256, 32, 3, 8), (128, 256, 32, 4, 8), (128, 128, 32, 4, 4), (128, 128, 32, 5, 8),
               (128, 256, 64, 2, 8), (256, 128, 32, 3, 8), (128, 128, 64, 3, 8)] if gpu else [(32, 32, 32, 1, 4)]
    for prec in (["tf32", "tf32x3"] if gpu else ["tf32"]):
        for cfg in configs:
            try:
                y = run(x, w, b, prec, *cfg)
                err = rel_error(y, ref)
                ms = bench.time_fn(lambda: run(x, w, b, prec, *cfg), warmup_ms=25, rep_ms=150).median_ms \
                    if gpu else float("nan")
                print(f"{prec} {cfg}: {ms:.4f} ms, rel. error {err:.2e}", flush=True)
            except Exception as e:  # resources exceeded etc.: report and go on
                print(f"{prec} {cfg}: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)


if __name__ == "__main__":
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    main()
