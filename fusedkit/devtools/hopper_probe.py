"""Probe: do problem 12's Hopper steps (11-16, wgmma fed by TMA) build, compute the right
thing, and how close do they come to cuBLAS's fp16 GEMM?  One GPU call prints everything:

    python -m fusedkit.devtools.hopper_probe [--rep-ms 200] [--sizes 1024,8192,8192]

1. ptxas resources of each step (registers, spills, shared memory), compiled here for sm_90a;
2. the Hopper extension's build (a compile error is printed, the cuBLAS bar still runs);
3. per step, checks against float64 at small odd sizes and at the full size: the relative
   error against the product of the fp16-rounded inputs (should be ~1e-6: fp32 accumulation
   only) and against the exact product (one fp16 rounding, ~3e-4), and the max abs error;
   the fp16x3 steps (14-16, and step 09 in Triton for comparison, full size only) are checked
   against float64 alone, at fp32's error (~2.5e-7 relative at K = 8192);
4. per step that passed, the median time by triton.testing.do_bench, TFLOP/s and % of
   cuBLAS fp16 (``cublas_fp16_epilogue``, same x cast per call); step 14's time beside step 09's
   and step 15's beside step 14's;
5. steps 14 and 15 split into their launches (x split + GEMM, x row scales + GEMM), timed one by one.
A failure in one step is printed on its line and the table goes on. Needs a CUDA GPU; on another
GPU than sm_90 the steps report "needs a Hopper (sm_90) GPU".
"""

from __future__ import annotations

import argparse
import math
import re
import time
import traceback
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fusedkit import build, records
from fusedkit.problems import p12_gemm_multiply_leakyrelu as p12mod

MULT, SLOPE = 2.0, 0.1
SMALL_SIZES = [(1, 8, 1), (7, 13, 5), (129, 520, 257), (67, 1000, 333), (1, 1003, 257)]
TOL_FP16_PRODUCT = 1e-5   # vs float64 of the fp16-rounded inputs: fp32 accumulation only
TOL_EXACT = 2e-3          # vs the exact float64 product: one fp16 rounding of x and W
TOL_FP32 = 1e-6           # fp16x3 steps vs float64: fp32-faithful (~2.5e-7 at K = 8192)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:600]}"


def failed(e: BaseException) -> str:
    """A probe table's cell for a step that broke: "FAILED: <the error in one line>", and for an
    error other than a failed check, the file and line it came from."""
    line = f"FAILED: {_one_line(e)}"
    if not isinstance(e, AssertionError):
        tb = traceback.extract_tb(e.__traceback__)
        if tb:
            line += f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})"
    return line


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def _inputs(M: int, K: int, N: int, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    bound = 1.0 / math.sqrt(K)
    x = torch.rand(M, K, device="cuda", generator=g)
    w = (torch.rand(N, K, device="cuda", generator=g) * 2 - 1) * bound
    b = (torch.rand(N, device="cuda", generator=g) * 2 - 1) * bound
    return x, w, b


def _ref(x, w, b):
    return torch.nn.functional.leaky_relu((x.double() @ w.double().T + b.double()) * MULT, SLOPE)


def _model(M: int, K: int, N: int, w, b):
    P = p12mod.PROBLEM
    return P.model_with(P.sizes(batch_size=M, in_features=K, out_features=N), w, b, device="cuda")


def check(v, M: int, K: int, N: int, seed: int = 1) -> tuple[float, float, float]:
    """(rel. error vs the fp16 product, rel. error vs float64, max abs error vs float64)."""
    x, w, b = _inputs(M, K, N, seed)
    fn = v.build(_model(M, K, N, w, b))
    junk = torch.full((M, N), float("nan"), device="cuda")  # an unwritten output shows as NaN
    del junk
    out = fn(x)
    torch.cuda.synchronize()
    if out.shape != (M, N) or out.dtype != torch.float32:
        raise AssertionError(f"output {tuple(out.shape)} {out.dtype}, expected ({M}, {N}) float32")
    ref16 = _ref(x.half(), w.half(), b)
    ref = _ref(x, w, b)
    nan = int(out.isnan().sum())
    if nan:
        raise AssertionError(f"{nan} NaN outputs (unwritten?) at {M}x{K}x{N}")
    return _rel(out, ref16), _rel(out, ref), (out.double() - ref).abs().max().item()


def ptxas_rows(problem: str) -> list[str]:
    """ptxas's resources of every kernel of the problem's Hopper steps (sm_90a), a line each as
    read_log reads them back; a step that does not compile is a line saying so."""
    rows = []
    for src in build.hopper_sources(problem):
        try:
            for kernel, s in build.resource_usage(src).items():
                rows.append(f"  {src.name:28s} {kernel:40s} {s['registers']:3d} regs  "
                            f"spills {s['spill_stores']}/{s['spill_loads']} B  stack {s['stack_bytes']} B  "
                            f"static smem {s['shared_bytes']} B")
        except Exception as e:  # noqa: BLE001 - report and go on
            rows.append(f"  {src.name:28s} ptxas FAILED: {_one_line(e)}")
    return rows


def _launches(M: int, K: int, N: int, rep_ms: float) -> list[str]:
    """Steps 14 and 15 launch by launch (the calls their builds chain): the Triton split of x and
    step 14's GEMM, then step 15's row-scale pass and its GEMM, which splits x in shared memory."""
    import triton.testing  # noqa: PLC0415 - GPU only

    from fusedkit.kernels import load_step  # noqa: PLC0415 - imports Triton

    ext = build.load_extension("p12", hopper=True)
    split = load_step("common", "fp16x3_split.py")
    x, w, b = _inputs(M, K, N, 4)
    ws = split.split_weight_cached(w)
    xs = split.split_fp16x3(x, pad_cols_to=split.K_ALIGN)
    scale, inv = ext.x_row_scales(x)
    parts = [
        ("12: x split (Triton)", lambda: split.split_fp16x3(x, pad_cols_to=split.K_ALIGN), 0.0),
        ("12: GEMM", lambda: ext.wgmma_fp16x3(xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo,
                                              ws.inv_scale, b, MULT, SLOPE), 2.0 * M * N * K),
        ("13: x row scales", lambda: ext.x_row_scales(x), 0.0),
        ("13: GEMM, split in smem", lambda: ext.wgmma_fp16x3_fused_split(
            x, scale, inv, ws.hi, ws.lo, ws.inv_scale, b, MULT, SLOPE), 2.0 * M * N * K),
    ]
    rows = []
    for name, fn, flop in parts:
        ms = triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median")
        rate = f"{flop / ms / 1e9:8.1f} TFLOP/s" if flop else f"{4.0 * M * K / ms / 1e6:8.1f} GB/s of x read"
        rows.append(f"  {name:28s} {ms:8.4f} ms  {rate}")
    return rows


_PTXAS_LINE = re.compile(r"^\s+(\S+\.cu)\s+(\w+)\s+(\d+) regs\s+spills (\d+)/(\d+) B\s+stack (\d+) B"
                         r"\s+static smem (\d+) B")
# A launch timed on its own: "  12: GEMM    0.6439 ms   213.5 TFLOP/s" (p45's probe prints these too).
LAUNCH_LINE = re.compile(r"^\s+(\S.*?)\s+([\d.]+) ms(?:\s+([\d.]+) TFLOP/s)?")
_STEP_LINE = re.compile(r"^(\w+)\s+(?:ok \S+|-)\s+(\S+)\s+(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%$")


def read_log(path: str | Path) -> dict[str, Any]:
    """What a log of this probe printed: its first line (``title``: machine, commit, date), the
    ptxas table (``ptxas``: file, kernel, registers, spill_stores, spill_loads, stack_bytes,
    smem_bytes) and the timed steps (``steps``: step, err_fp16, err_f64, max_abs, ms, tflops,
    pct_cublas: % of the cuBLAS fp16 bar's rate in the same probe) and the launches of steps 14
    and 13 timed one by one (``launches``: launch, ms, tflops, NaN for a launch that is not a
    GEMM; empty in logs older than step 15). A step whose line says FAILED is left out."""
    lines = Path(path).read_text().splitlines()
    ptxas = [m.groups() for line in lines if (m := _PTXAS_LINE.match(line))]
    steps = [m.groups() for line in lines if (m := _STEP_LINE.match(line.strip()))]
    ptxas_df = pd.DataFrame(ptxas, columns=["file", "kernel", "registers", "spill_stores",
                                            "spill_loads", "stack_bytes", "smem_bytes"])
    for c in ptxas_df.columns[2:]:
        ptxas_df[c] = ptxas_df[c].astype(int)
    steps_df = pd.DataFrame(steps, columns=["step", "err_fp16", "err_f64", "max_abs", "ms", "tflops",
                                            "pct_cublas"])
    for c in steps_df.columns[1:]:
        steps_df[c] = steps_df[c].astype(float)
    after = next((i for i, line in enumerate(lines) if line.endswith("launch by launch:")), len(lines))
    launches = [(m.group(1), float(m.group(2)), float(m.group(3) or "nan"))
                for line in lines[after + 1:] if (m := LAUNCH_LINE.match(line))]
    return {"title": lines[0].lstrip("# ").strip() if lines else "", "ptxas": ptxas_df,
            "steps": steps_df, "launches": pd.DataFrame(launches, columns=["launch", "ms", "tflops"])}


def start(name: str, problem: str) -> bool:
    """The probes' common opening: the title line (GPU, torch, CUDA, commit, time), ptxas's table
    (:func:`ptxas_rows`), then the problem's Hopper extension built, or its failure in one line.
    False, after one line, when there is no GPU."""
    commit = records.current_commit()  # $FUSEDKIT_COMMIT on the GPU machine, where .git is stale
    if not torch.cuda.is_available():
        print(f"{name}: needs a CUDA GPU (torch sees none)")
        return False
    cap = torch.cuda.get_device_capability()
    print(f"# {name} on {torch.cuda.get_device_name()} (sm_{cap[0]}{cap[1]}), torch "
          f"{torch.__version__}, CUDA {torch.version.cuda}, commit {commit or '?'}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    print("ptxas (sm_90a):")
    for row in ptxas_rows(problem):
        print(row)
    t0 = time.time()
    try:
        build.load_extension(problem, hopper=True)
        print(f"hopper extension: built/loaded in {time.time() - t0:.1f} s")
    except Exception as e:  # noqa: BLE001 - the table goes on, each step then says why
        print(f"hopper extension: FAILED after {time.time() - t0:.1f} s: {_one_line(e)}")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rep-ms", type=float, default=200.0, help="do_bench's rep (ms) per step")
    ap.add_argument("--sizes", default="1024,8192,8192", help="M,K,N of the full-size check and timing")
    args = ap.parse_args(argv)
    M, K, N = (int(s) for s in args.sizes.split(","))

    if not start("hopper_probe", "p12"):
        return 2

    import triton.testing  # noqa: PLC0415 - GPU only

    flop = 2.0 * M * N * K
    results: dict[str, float] = {}
    header = (f"{'step':24s} {'small checks':>14s} {'err/fp16':>9s} {'err/f64':>9s} {'maxabs':>9s} "
              f"{'ms':>8s} {'TFLOP/s':>8s} {'%cuBLAS':>8s}")
    print(f"\nfull size M,K,N = {M},{K},{N}; tolerances: {TOL_FP16_PRODUCT:g} vs the fp16 product, "
          f"{TOL_EXACT:g} vs float64; fp16x3 steps {TOL_FP32:g} vs float64 (small checks: worst "
          f"err/fp16, or err/f64 for fp16x3)")
    print(header)
    # The cuBLAS bar comes first; step 09 (Triton fp16x3) last, to compare with step 14.
    variants = [*p12mod.HOPPER_VARIANTS, p12mod.PROBLEM.variants["triton_fp16x3"]]
    for v in variants:
        line = f"{v.slug:24s} "
        split = v.precision == "fp16x3"  # fp32-faithful: judged against float64 only

        def over(e16: float, e64: float, split: bool = split) -> bool:
            return e64 > TOL_FP32 if split else (e16 > TOL_FP16_PRODUCT or e64 > TOL_EXACT)
        try:
            if v.triton:  # step 09 autotunes per size: full size only, to keep the probe short
                line += f"{'-':>14s} "
            else:
                worst = 0.0
                for (m, k, n) in SMALL_SIZES:
                    e16, e64, _ = check(v, m, k, n)
                    worst = max(worst, e64 if split else e16)
                    if over(e16, e64):
                        raise AssertionError(f"{m}x{k}x{n}: rel. error {e16:.2e} vs fp16 product, "
                                             f"{e64:.2e} vs float64")
                line += f"{'ok ' + format(worst, '.1e'):>14s} "
            e16, e64, mx = check(v, M, K, N, seed=2)
            line += f"{e16:9.2e} {e64:9.2e} {mx:9.2e} "
            if over(e16, e64):
                raise AssertionError(f"full size: rel. error {e16:.2e} / {e64:.2e} over tolerance")
            x, w, b = _inputs(M, K, N, 3)
            fn = v.build(_model(M, K, N, w, b))
            ms = triton.testing.do_bench(lambda: fn(x), warmup=25, rep=args.rep_ms,
                                         return_mode="median")
            results[v.slug] = ms
            bar = results.get("cublas_fp16_epilogue")
            pct = f"{100.0 * bar / ms:7.1f}%" if bar else f"{'-':>8s}"
            line += f"{ms:8.4f} {flop / ms / 1e9:8.1f} {pct}"
        except Exception as e:  # noqa: BLE001 - a broken step is a finding, not the end
            line += failed(e)
        print(line, flush=True)
    if "wgmma_fp16x3" in results and "triton_fp16x3" in results:
        a, t = results["wgmma_fp16x3"], results["triton_fp16x3"]
        print(f"\nfp16x3: wgmma (step 14) {a:.4f} ms vs Triton (step 09) {t:.4f} ms: {t / a:.2f}x")
    if "wgmma_fp16x3" in results and "wgmma_fp16x3_fused_split" in results:
        a, f = results["wgmma_fp16x3"], results["wgmma_fp16x3_fused_split"]
        print(f"fp16x3: split in smem (step 15) {f:.4f} ms vs step 14 {a:.4f} ms: "
              f"{1e3 * (a - f):+.1f} us saved")
    if "wgmma_fp16x3" in results:
        print("\nsteps 14 and 15 launch by launch:")
        try:
            for row in _launches(M, K, N, args.rep_ms):
                print(row)
        except Exception as e:  # noqa: BLE001
            print(f"  FAILED: {_one_line(e)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
