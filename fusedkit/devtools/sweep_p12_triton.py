"""Time step 08's Triton kernel at fixed configs, outside the autotuner, on the GPU at hand.

Explores configs beyond the autotuner's small space before they are added to it:
    python -m fusedkit.devtools.sweep_p12_triton --precision tf32 [--out sweep.csv]
Each config is checked against eager fp32 (rel. error) before it is timed.
"""

from __future__ import annotations

import argparse
import itertools

import pandas as pd
import torch
import triton

from fusedkit import bench, problems
from fusedkit.check import rel_error
from fusedkit.kernels import load_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", default="tf32", choices=["ieee", "tf32", "tf32x3"])
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    p = problems.get("p12")
    s = p.defaults
    model = p.make_model(s, seed=11, device="cuda")
    (x,) = p.get_inputs(s, seed=11, device="cuda")
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    with torch.no_grad():
        ref = model.double()(x.double())
    m, k = x.shape
    n = w.shape[0]
    heuristics = load_step("p12", "08_triton_fused.py")._linear_leakyrelu_kernel.fn
    rows = []
    space = itertools.product([(128, 256), (256, 128), (128, 128)], [32, 64], [2, 3, 4], [8], [8])
    for (bm, bn), bk, stages, warps, group in space:
        smem = 4 * (bm + bn) * bk * stages
        if smem > 220 * 1024 or (stages == 2 and bk == 32):
            continue
        y = torch.full((m, n), float("nan"), device="cuda")

        def run() -> None:
            heuristics[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
                x, w, b, y, m, n, k, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                b.stride(0), y.stride(0), y.stride(1), 2.0, 0.1, INPUT_PRECISION=args.precision,
                BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, num_stages=stages, num_warps=warps)
        try:
            run()
            torch.cuda.synchronize()
        except Exception as e:  # out of resources: report and go on
            print(f"{bm}x{bn}x{bk} s{stages} w{warps} g{group}: {type(e).__name__}")
            continue
        err = rel_error(y, ref)
        t = bench.time_fn(run, warmup_ms=25, rep_ms=150)
        rows.append(dict(bm=bm, bn=bn, bk=bk, stages=stages, warps=warps, group=group,
                         smem_kb=smem // 1024, median_ms=t.median_ms, rel_error=err))
        print(rows[-1], flush=True)
    df = pd.DataFrame(rows).sort_values("median_ms")
    print(df.head(12).to_string(index=False))
    if args.out:
        df.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
