"""Probe: does problem 45's Hopper step (07: both fp16x3 GEMMs on the wgmma kernel) build, compute
the right thing, and how fast is it beside the Triton fp16x3 step (05)?  One GPU call prints it all:

    python -m fusedkit.devtools.hopper_probe_p45 [--rep-ms 200] [--sizes 16384,2048,4096,1024]

1. ptxas resources of step 07's two kernels (registers, spills, shared memory), for sm_90a;
2. p45's Hopper extension's build (a compile error is printed, the rest still runs);
3. per variant (eager fp32, step 07, Triton step 05 ``triton_fused_lse_fp16x3``): the relative
   error against float64 at small odd sizes (step 07 only) and at the full size, where fp32-faithful
   means ~1e-7 (TOL_FP32 = 1e-6); then the median time by triton.testing.do_bench, the TFLOP/s of
   the two GEMMs counted once, and the speed-up over eager fp32 measured in the same run;
4. step 07 split into its launches (x split, GEMM1, GEMM2, combine), timed one by one.
A failure in one variant is printed on its line and the table goes on. Sizes are (M, K, H, N).
read_log reads a saved log back (the notebook's step 07 shows the logs in data/logs/).
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fusedkit import build
from fusedkit.devtools import hopper_probe
from fusedkit.devtools.hopper_probe import _one_line, failed, start
from fusedkit.problems import p45_linear_sigmoid_linear_logsumexp as p45mod

SMALL_SIZES = [(1, 1, 1, 1), (3, 5, 7, 33), (67, 1000, 333, 129), (129, 64, 130, 128),
               (300, 520, 257, 1025), (1, 2048, 4096, 1024)]
TOL_FP32 = 1e-6  # vs float64 (values below 1 counted as 1): fp32-faithful


def _err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||max(|ref|, 1)||: relative, except that an output that cancels to near
    zero (N = 1) is measured against 1."""
    return ((out.double() - ref).norm() / ref.abs().clamp_min(1.0).norm()).item()


def _inputs(M: int, K: int, H: int, N: int, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def uniform(*shape, bound):
        return (torch.rand(*shape, generator=g, device="cuda") * 2 - 1) * bound

    x = torch.rand(M, K, device="cuda", generator=g)
    w1, b1 = uniform(H, K, bound=1 / math.sqrt(K)), uniform(H, bound=1 / math.sqrt(K))
    w2, b2 = uniform(N, H, bound=1 / math.sqrt(H)), uniform(N, bound=1 / math.sqrt(H))
    return x, w1, b1, w2, b2


def _ref(x, w1, b1, w2, b2) -> torch.Tensor:
    h = torch.sigmoid(x.double() @ w1.double().T + b1.double())
    return torch.logsumexp(h @ w2.double().T + b2.double(), dim=1)


def _model(M: int, K: int, H: int, N: int, w1, b1, w2, b2):
    P = p45mod.PROBLEM
    return P.model_with(P.sizes(batch_size=M, input_size=K, hidden_size=H, output_size=N),
                        w1, b1, w2, b2, device="cuda")


def check(v, M: int, K: int, H: int, N: int, seed: int = 1) -> float:
    """The variant's error against float64 at (M, K, H, N); raises on a wrong shape or a NaN."""
    x, w1, b1, w2, b2 = _inputs(M, K, H, N, seed)
    fn = v.build(_model(M, K, H, N, w1, b1, w2, b2))
    junk = torch.full((M,), float("nan"), device="cuda")  # an unwritten output shows as NaN
    del junk
    with torch.no_grad():
        out = fn(x)
    torch.cuda.synchronize()
    if out.shape != (M,) or out.dtype != torch.float32:
        raise AssertionError(f"output {tuple(out.shape)} {out.dtype}, expected ({M},) float32")
    if out.isnan().any():
        raise AssertionError(f"{int(out.isnan().sum())} NaN outputs at {M}x{K}x{H}x{N}")
    return _err(out, _ref(x, w1, b1, w2, b2))


def _launches(M: int, K: int, H: int, N: int, rep_ms: float) -> list[str]:
    """Step 07's four launches timed one by one (the same calls its build chains)."""
    import triton.testing  # noqa: PLC0415 - GPU only

    from fusedkit.kernels import load_step  # noqa: PLC0415 - imports Triton

    ext = build.load_extension("p45", hopper=True)
    split = load_step("common", "fp16x3_split.py")
    combine = load_step("common", "lse.py").combine_lse
    x, w1, b1, w2, b2 = _inputs(M, K, H, N, 4)
    w1s, w2s = split.split_weight_cached(w1), split.split_weight_cached(w2)
    xs = split.split_fp16x3(x, pad_cols_to=split.K_ALIGN)
    hh, hl = ext.wgmma_fp16x3_sigmoid_split(xs.hi, xs.lo, xs.inv_scale, w1s.hi, w1s.lo,
                                            w1s.inv_scale, b1)
    pmax, psum = ext.wgmma_fp16x3_partial_lse(hh, hl, w2s.hi, w2s.lo, w2s.inv_scale, b2)
    parts = [
        ("x split", lambda: split.split_fp16x3(x, pad_cols_to=split.K_ALIGN), 0.0),
        ("GEMM1 + sigmoid + h split", lambda: ext.wgmma_fp16x3_sigmoid_split(
            xs.hi, xs.lo, xs.inv_scale, w1s.hi, w1s.lo, w1s.inv_scale, b1), 2.0 * M * H * K),
        ("GEMM2 + partial lse", lambda: ext.wgmma_fp16x3_partial_lse(
            hh, hl, w2s.hi, w2s.lo, w2s.inv_scale, b2), 2.0 * M * N * H),
        ("combine", lambda: combine(pmax, psum), 0.0),
    ]
    rows = []
    for name, fn, flop in parts:
        ms = triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median")
        rate = f"{flop / ms / 1e9:8.1f} TFLOP/s (x3: {3 * flop / ms / 1e9:.0f})" if flop else ""
        rows.append(f"  {name:28s} {ms:8.4f} ms  {rate}")
    return rows


_VARIANT_LINE = re.compile(r"^(\w+)\s+(?:ok (\S+)|-)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+(?:([\d.]+)x|-)$")


def read_log(path: str | Path) -> dict[str, Any]:
    """What a log of this probe printed: its first line (``title``), the ptxas table (``ptxas``,
    as :func:`fusedkit.devtools.hopper_probe.read_log` reads it), the timed variants
    (``variants``: variant, small_err (worst error of the odd-size checks, NaN where none ran),
    err_f64, ms, tflops (the two GEMMs counted once), x_eager (speed-up over eager in the same
    probe)) and step 07's launches timed one by one (``launches``: launch, ms, tflops, NaN for
    the launches that are not a GEMM). A variant whose line says FAILED is left out."""
    lines = Path(path).read_text().splitlines()
    variants, launches, in_launches = [], [], False
    for line in lines:
        if line.startswith("step 07 launch by launch"):
            in_launches = True
        elif in_launches and (m := hopper_probe.LAUNCH_LINE.match(line)):
            launches.append((m.group(1), float(m.group(2)), float(m.group(3) or "nan")))
        elif m := _VARIANT_LINE.match(line.strip()):
            name, small, err, ms, tflops, ratio = m.groups()
            variants.append((name, float(small or "nan"), float(err), float(ms), float(tflops),
                             float(ratio or "nan")))
    return {"title": lines[0].lstrip("# ").strip() if lines else "",
            "ptxas": hopper_probe.read_log(path)["ptxas"],
            "variants": pd.DataFrame(variants, columns=["variant", "small_err", "err_f64", "ms",
                                                        "tflops", "x_eager"]),
            "launches": pd.DataFrame(launches, columns=["launch", "ms", "tflops"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rep-ms", type=float, default=200.0, help="do_bench's rep (ms) per variant")
    ap.add_argument("--sizes", default="16384,2048,4096,1024",
                    help="M,K,H,N of the full-size check and timing")
    args = ap.parse_args(argv)
    M, K, H, N = (int(s) for s in args.sizes.split(","))

    if not start("hopper_probe_p45", "p45"):
        return 2

    import triton.testing  # noqa: PLC0415 - GPU only

    flop = 2.0 * M * H * K + 2.0 * M * N * H  # the two GEMMs, counted once
    results: dict[str, float] = {}
    print(f"\nfull size M,K,H,N = {M},{K},{H},{N}; fp32-faithful: error vs float64 < {TOL_FP32:g} "
          "(small checks: worst error over the odd sizes)")
    print(f"{'variant':26s} {'small checks':>14s} {'err/f64':>9s} {'ms':>8s} {'TFLOP/s':>8s} "
          f"{'x eager':>8s}")
    P = p45mod.PROBLEM
    variants = [P.variants["eager"], *p45mod.HOPPER_VARIANTS, P.variants["triton_fused_lse_fp16x3"]]
    for v in variants:
        line = f"{v.slug:26s} "
        try:
            if v.slug.startswith("wgmma"):
                worst = 0.0
                for (m, k, h, n) in SMALL_SIZES:
                    e = check(v, m, k, h, n)
                    worst = max(worst, e)
                    if e > TOL_FP32:
                        raise AssertionError(f"{m}x{k}x{h}x{n}: error {e:.2e} vs float64")
                line += f"{'ok ' + format(worst, '.1e'):>14s} "
            else:  # eager is the yardstick; Triton autotunes per size: full size only
                line += f"{'-':>14s} "
            e = check(v, M, K, H, N, seed=2)
            line += f"{e:9.2e} "
            if v.precision == "fp16x3" and e > TOL_FP32:
                raise AssertionError(f"full size: error {e:.2e} over {TOL_FP32:g}")
            x, w1, b1, w2, b2 = _inputs(M, K, H, N, 3)
            fn = v.build(_model(M, K, H, N, w1, b1, w2, b2))
            def call(fn=fn, x=x):
                with torch.no_grad():
                    return fn(x)
            ms = triton.testing.do_bench(call, warmup=25, rep=args.rep_ms, return_mode="median")
            results[v.slug] = ms
            eager = results.get("eager")
            ratio = f"{eager / ms:7.2f}x" if eager else f"{'-':>8s}"
            line += f"{ms:8.4f} {flop / ms / 1e9:8.1f} {ratio}"
        except Exception as e:  # noqa: BLE001 - a broken variant is a finding, not the end
            line += failed(e)
        print(line, flush=True)
    if "wgmma_fp16x3_lse" in results and "triton_fused_lse_fp16x3" in results:
        a, t = results["wgmma_fp16x3_lse"], results["triton_fused_lse_fp16x3"]
        print(f"\nfp16x3: wgmma (step 07) {a:.4f} ms vs Triton (step 05) {t:.4f} ms: {t / a:.2f}x")
    if "wgmma_fp16x3_lse" in results:
        print("\nstep 07 launch by launch:")
        try:
            for row in _launches(M, K, H, N, args.rep_ms):
                print(row)
        except Exception as e:  # noqa: BLE001
            print(f"  FAILED: {_one_line(e)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
