"""Measure step 08's Triton kernel at fixed configs, outside the autotuner, on the GPU at hand.

Explores configs beyond the autotuner's small space before they are added to it:
    python -m devtools.sweep_p12_triton --precision tf32 [--rep-ms 150] [--records FILE]
Each config goes through :func:`fusedkit.harness.measure` (checked at the declared precision,
then timed) and is recorded in one run as ``triton_<precision>@<config>``, its tile, stages,
warps, grouping and shared memory in the notes; the fastest are printed last.
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable, Iterator

import torch

from fusedkit import problems  # first: settles interpreter mode before Triton loads
from devtools.common import Probe, parser, refused
from fusedkit.kernels import load_step

import triton  # noqa: E402 - after fusedkit, which chose the interpreter or not

P = problems.get("p12")
SMEM_LIMIT = 220 * 1024   # bytes of shared memory a block may use on an H200, with headroom


def configs() -> Iterator[tuple[int, int, int, int, int, int]]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, GROUP_M) swept: those whose fp32 tiles of x
    and W, one per stage, fit in shared memory; two stages of 32-wide K slices are left out."""
    space = itertools.product([(128, 256), (256, 128), (128, 128)], [32, 64], [2, 3, 4], [8], [8])
    for (bm, bn), bk, stages, warps, group in space:
        if 4 * (bm + bn) * bk * stages <= SMEM_LIMIT and not (stages == 2 and bk == 32):
            yield bm, bn, bk, stages, warps, group


def build_fixed(prec: str, cfg: tuple, model: torch.nn.Module) -> Callable:
    """Step 08's kernel launched at ``cfg`` (no autotuning) on the model's weights."""
    bm, bn, bk, stages, warps, group = cfg
    kernel = load_step("p12", "08_triton_fused.py")._linear_leakyrelu_kernel.fn
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    mult, slope = P.constants["multiplier"], P.constants["negative_slope"]

    def fn(x: torch.Tensor) -> torch.Tensor:
        m, k = x.shape
        n = w.shape[0]
        y = torch.empty(m, n, device=x.device)
        kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
            x, w, b, y, m, n, k, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
            b.stride(0), y.stride(0), y.stride(1), mult, slope, INPUT_PRECISION=prec,
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, num_stages=stages, num_warps=warps)
        return y
    return fn


def config_name(prec: str, cfg: tuple) -> str:
    bm, bn, bk, stages, warps, group = cfg
    return f"triton_{prec}@{bm}x{bn}x{bk}_s{stages}_w{warps}_g{group}"


def measure_config(probe: Probe, prec: str, cfg: tuple, sizes):
    """One config through measure, recorded when timed clean."""
    bm, bn, bk, stages, warps, group = cfg
    note = (f"config BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, stages={stages}, warps={warps}, "
            f"GROUP_M={group}, smem {4 * (bm + bn) * bk * stages // 1024} KB")
    return probe.measure(P, functools.partial(build_fixed, prec, cfg), sizes, notes=[note],
                         name=config_name(prec, cfg), precision="fp32" if prec == "ieee" else prec,
                         triton=True)


def main(argv: list[str] | None = None) -> int:
    ap = parser("sweep_p12_triton", __doc__)
    ap.add_argument("--precision", default="tf32", choices=["ieee", "tf32", "tf32x3"])
    ap.set_defaults(rep_ms=150.0)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("sweep_p12_triton: needs a CUDA GPU (torch sees none); run it on the GPU machine",
              file=sys.stderr)
        return 2
    try:
        probe = Probe("sweep_p12_triton", rep_ms=args.rep_ms, records_path=args.records)
    except (ValueError, OSError) as e:
        return refused("sweep_p12_triton", e)
    timed = []
    for cfg in configs():
        m = measure_config(probe, args.precision, cfg, P.defaults)
        if m is not None and m.timed:
            timed.append((m.timing.median_ms, m.variant.slug))
    for ms, name in sorted(timed)[:12]:
        print(f"  {name:40s} {ms:8.4f} ms")
    probe.done()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
