"""Probe: can step 10 (persistent + TMA) match eager's cuBLAS TF32 GEMM on problem 12?

At KernelBench's sizes (1024x8192x8192) it times, in one run: eager with TF32 on, step
08 in tf32 (autotuned), then step 10 at every config of its ``PROBE_SPACE`` (the wider
set the autotuner never sees), then at the autotuner's own configs not already timed,
then step 10 autotuned, then eager again (to show drift over the run). Every kernel is
checked against float64 before it is timed: a rel. error of 3e-3 or more (tf32) is
reported FAILED and not timed. After ``--budget-s`` seconds no new config is started.
One line per measurement; the last line names the fastest step 10 config and its ratio
to eager TF32:

    python -m fusedkit.devtools.probe_p12_tf32 [--precision tf32|tf32x3] [--rep-ms 200] [--budget-s 100]

Without a GPU (TRITON_INTERPRET=1, set by fusedkit) it runs every config once in
Triton's interpreter at a small size: a logic check, no timing.
"""

from __future__ import annotations

import argparse
import math
import re
import time
from pathlib import Path
from typing import Any

import pandas as pd

import torch

from fusedkit import bench, problems  # first: settles interpreter mode before Triton loads
from fusedkit.check import rel_error
from fusedkit.kernels import load_step
from fusedkit.problems.baselines import tf32_matmul

# Rel. error vs float64 above which a kernel is reported broken and not timed: tf32 gives
# ~7.5e-4 at these sizes (10-bit mantissas), tf32x3 ~3e-7.
TOL = {"tf32": 3e-3, "tf32x3": 5e-6}
TF32_PEAK_TFLOPS = 494.7  # H200 dense TF32, the floor quoted in the step files


def read_log(path: str | Path) -> dict[str, Any]:
    """What a log of this probe printed: its first line (machine, date,
    commit), the eager TF32 times (``eager``), and every step-10 configuration as a frame
    (``configs``: config, ms (NaN when it failed its check), failed, warp_specialized)."""
    lines = Path(path).read_text().splitlines()
    eager = [float(m.group(1)) for line in lines
             if line.startswith("eager") and (m := re.search(r":\s*([\d.]+) ms", line))]
    rows = []
    for line in lines:
        m = re.match(r"step (?:10|07) (\([^)]*\)): (.*)", line)   # logs before the renumbering: 07
        if not m:
            continue
        fields = [f.strip() for f in m.group(1).strip("()").split(",")]
        t = re.match(r"([\d.]+) ms", m.group(2))
        rows.append({"config": m.group(1), "ms": float(t.group(1)) if t else math.nan,
                     "failed": "FAILED" in m.group(2),
                     "warp_specialized": len(fields) > 6 and fields[6] == "True"})
    return {"title": lines[0].lstrip("# ").strip() if lines else "", "eager": eager,
            "configs": pd.DataFrame(rows, columns=["config", "ms", "failed", "warp_specialized"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", default="tf32", choices=sorted(TOL))
    ap.add_argument("--rep-ms", type=float, default=200.0, help="timing budget per measurement (ms)")
    ap.add_argument("--budget-s", type=float, default=100.0,
                    help="start no new step 10 config after this many seconds of the run")
    args = ap.parse_args()
    if not args.budget_s > 0:
        ap.error(f"--budget-s={args.budget_s}: must be > 0 seconds")
    prec = args.precision
    t_start = time.perf_counter()

    k08 = load_step("p12", "08_triton_fused.py")
    k10 = load_step("p12", "10_triton_persistent_tma.py")
    gpu = torch.cuda.is_available()
    dev = "cuda" if gpu else "cpu"
    p = problems.get("p12")
    s = p.defaults if gpu else p.sizes(batch_size=70, in_features=72, out_features=260)
    model = p.make_model(s, seed=3, device=dev)
    (x,) = p.get_inputs(s, seed=3, device=dev)
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    mult, slope = p.constants["multiplier"], p.constants["negative_slope"]
    m, k = x.shape
    n = w.shape[0]
    gemm_flop = 2.0 * m * n * k
    ref = torch.nn.functional.leaky_relu((x.double() @ w.double().T + b.double()) * mult, slope)
    print(f"# p12 (M, N, K) = ({m}, {n}, {k}), precision {prec}, "
          f"device {torch.cuda.get_device_name() if gpu else 'cpu (interpreter, no timing)'}, "
          f"TMA path: {k10.uses_tma(x, w, prec)}", flush=True)

    eager_ms = float("nan")

    def report(label: str, fn, check_only: bool = False) -> float:
        """Check fn() against float64, then time it; print one line. Returns median ms."""
        nonlocal eager_ms
        try:
            y = fn()
            if gpu:
                torch.cuda.synchronize()
        except Exception as e:  # out of resources, compile errors: report and go on
            print(f"{label}: {type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}", flush=True)
            return float("nan")
        err = rel_error(y, ref)
        if not err < TOL[prec] and not check_only:
            print(f"{label}: FAILED check, rel. error {err:.2e} > {TOL[prec]:.0e}; not timed", flush=True)
            return float("nan")
        if not gpu:
            print(f"{label}: rel. error {err:.2e} (interpreter)", flush=True)
            return float("nan")
        t = bench.time_fn(fn, warmup_ms=25, rep_ms=args.rep_ms)
        tflops = gemm_flop / (t.median_ms * 1e-3) / 1e12
        vs = f", eager/this {eager_ms / t.median_ms:.3f}x" if eager_ms == eager_ms else ""
        print(f"{label}: {t.median_ms:.4f} ms (p10 {t.p10_ms:.4f}, p90 {t.p90_ms:.4f}), "
              f"{tflops:.0f} TFLOP/s = {100 * tflops / TF32_PEAK_TFLOPS:.0f}% of tf32 peak{vs}, "
              f"rel. error {err:.2e}", flush=True)
        return t.median_ms

    if gpu:
        with torch.no_grad():
            def eager() -> torch.Tensor:
                with tf32_matmul(True):
                    return model(x)
            # Eager TF32 fails the 1e-4 tier, never the tf32 tolerance: time it regardless.
            eager_ms = report("eager, TF32 on (cuBLAS + 2 elementwise kernels)", eager, check_only=True)
        report(f"step 08 {prec}, autotuned",
               lambda: k08.linear_leakyrelu(x, w, b, mult, slope, prec))
        best08 = getattr(k08._linear_leakyrelu_kernel, "best_config", None)
        print(f"#   step 08 picked {load_step('common', 'triton_base.py').config_key(best08) if best08 else '?'}", flush=True)

    # Every config on its own (compiles each once): PROBE_SPACE first, in its order (its
    # 2-CTA cluster entries last: a kernel that faults leaves the CUDA context unusable),
    # then the autotuner's configs it lacks, then the autotuner over its list.
    probe_keys = list(k10.PROBE_SPACE.get(prec, []))
    rest = [k for k in map(k10.config_key, k10.GPU_CONFIGS[prec]) if k not in probe_keys]
    print("# step 10 configs (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, SPLIT_N, "
          "WARP_SPECIALIZE, GROUP_M, num_ctas)", flush=True)
    best: tuple[float, tuple | None] = (float("inf"), None)
    skipped: list[tuple] = []
    for group, keys in (("PROBE_SPACE", probe_keys), ("autotuner list, not in PROBE_SPACE", rest)):
        if keys:
            print(f"# {group}: {len(keys)} configs", flush=True)
        for key in keys:
            if time.perf_counter() - t_start > args.budget_s:
                skipped.append(key)  # the time guard: report, do not start
                continue
            cfg = k10.make_config(*key)
            ms = report(f"step 10 {key}",
                        lambda cfg=cfg: k10.linear_leakyrelu_persistent(x, w, b, mult, slope, prec, config=cfg))
            if ms < best[0]:
                best = (ms, key)
    if skipped:
        print(f"# time guard: {time.perf_counter() - t_start:.1f} s > {args.budget_s:g} s, "
              f"{len(skipped)} configs not started: {', '.join(map(str, skipped))}", flush=True)
    if gpu and time.perf_counter() - t_start <= args.budget_s:
        report(f"step 10 {prec}, autotuned",
               lambda: k10.linear_leakyrelu_persistent(x, w, b, mult, slope, prec))
        picked = getattr(k10._persistent_kernel, "best_config", None)
        print(f"#   step 10 autotuner picked {k10.config_key(picked) if picked else '?'}", flush=True)
        with torch.no_grad():
            report("eager, TF32 on, again (drift over the run)", eager, check_only=True)
    elapsed = f"{time.perf_counter() - t_start:.0f} s in all"
    if not gpu:
        print(f"# fastest step 10 config: none timed (interpreter); {elapsed}", flush=True)
    elif best[1] is None:
        print(f"# fastest step 10 config: none passed the check; {elapsed}", flush=True)
    else:
        ratio = eager_ms / best[0]
        print(f"# fastest step 10 config: {best[1]} at {best[0]:.4f} ms; eager TF32 {eager_ms:.4f} ms: "
              f"eager/this {ratio:.3f}x ({'FASTER' if ratio > 1 else 'slower'} than eager); {elapsed}",
              flush=True)


if __name__ == "__main__":
    main()
