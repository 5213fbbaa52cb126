"""Probe: do problem 12's Hopper steps (11-16 and 18, wgmma fed by TMA) build, compute the right
thing, and how close do they come to cuBLAS's fp16 GEMM?  One GPU call, one recorded run:

    python -m devtools.hopper_probe [--rep-ms 200] [--sizes batch_size=1024,...] [--records FILE]

1. ptxas resources of each step (registers, spills, shared memory), compiled here for sm_90a;
2. the Hopper extension's build (a compile error is printed, the cuBLAS bar still runs);
3. per step, :func:`fusedkit.harness.measure`'s check at small odd sizes (check only), then its
   check and time at the full size, recorded (notes: the probe and the step's ptxas resources);
   the Triton fp16x3 step 09 is measured at the full size only, to compare with step 14;
4. each step's % of cuBLAS fp16 (``cublas_fp16_epilogue``) in the same run, step 14 beside
   step 09 and step 15 beside step 14, printed from the measurements;
5. steps 14 and 15 split into their launches (x split + GEMM, x row scales + GEMM), each timed
   alone and recorded as ``<step>:<launch>`` (a launch computes a piece, so no check judges it).
A failure in one step is printed on its line and the probe goes on; a failed step is not
recorded. Needs a CUDA GPU; on another GPU than sm_90 the steps say "needs a Hopper (sm_90) GPU".
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Collection
from pathlib import Path

import torch

from fusedkit import build, records
from fusedkit.harness.terms import one_line
from devtools.common import Probe, parser, refused, sizes_arg
from fusedkit.problems import Problem, Sizes, Variant
from fusedkit.problems import p12_gemm_multiply_leakyrelu as p12mod

P = p12mod.PROBLEM
# (M, K, N): a row, odd tails of every tile, a single column.
SMALL_SIZES = [(1, 8, 1), (7, 13, 5), (129, 520, 257), (67, 1000, 333), (1, 1003, 257)]
BAR = "cublas_fp16_epilogue"


def failed(e: BaseException) -> str:
    """A probe's line for a launch that broke: "FAILED: <the error in one line>", and for an
    error other than a failed check, the file and line it came from."""
    text = " ".join(str(e).split())
    line = f"FAILED: {type(e).__name__}: {text[:600]}"
    if not isinstance(e, AssertionError):
        tb = traceback.extract_tb(e.__traceback__)
        if tb:
            line += f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})"
    return line


def ptxas_usage(problem: str) -> dict[str, dict[str, dict[str, int]] | str]:
    """ptxas's resources of every kernel of the problem's Hopper steps (sm_90a) by file name
    (:func:`fusedkit.build.resource_usage`), or the one-line failure of a file that does not compile."""
    usage: dict[str, dict[str, dict[str, int]] | str] = {}
    for src in build.hopper_sources(problem):
        try:
            usage[src.name] = build.resource_usage(src)
        except Exception as e:  # noqa: BLE001 - report and go on
            usage[src.name] = f"ptxas FAILED: {one_line(e)}"
    return usage


def ptxas_note(usage: dict[str, dict[str, dict[str, int]] | str], v: Variant) -> str:
    """One step's ptxas resources as a records note ("" for a step without a Hopper source)."""
    got = usage.get(Path(v.source).name) if v.source else None
    if got is None:
        return ""
    if isinstance(got, str):
        return got
    return "ptxas " + ", ".join(f"{k}: {s['registers']} regs, spills {s['spill_stores']}/"
                                f"{s['spill_loads']} B, smem {s['shared_bytes']} B"
                                for k, s in got.items())


def start(name: str, problem: str) -> dict[str, dict[str, dict[str, int]] | str] | None:
    """The probes' common opening: the title line (GPU, torch, CUDA, commit, time), ptxas's table,
    then the problem's Hopper extension built, or its failure in one line. Returns ptxas's
    resources (:func:`ptxas_usage`); None, after one line on stderr, when there is no GPU."""
    commit = records.current_commit()  # $FUSEDKIT_COMMIT on the GPU machine, where .git is stale
    if not torch.cuda.is_available():
        import sys  # noqa: PLC0415

        print(f"{name}: needs a CUDA GPU (torch sees none)", file=sys.stderr)
        return None
    cap = torch.cuda.get_device_capability()
    print(f"# {name} on {torch.cuda.get_device_name()} (sm_{cap[0]}{cap[1]}), torch "
          f"{torch.__version__}, CUDA {torch.version.cuda}, commit {commit or '?'}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    usage = ptxas_usage(problem)
    print("ptxas (sm_90a):")
    for file, got in usage.items():
        for kernel, s in (got.items() if isinstance(got, dict) else [("", got)]):
            print(f"  {file:28s} {kernel:40s} " + (str(s) if isinstance(s, str) else
                  f"{s['registers']:3d} regs  spills {s['spill_stores']}/{s['spill_loads']} B  "
                  f"stack {s['stack_bytes']} B  static smem {s['shared_bytes']} B"))
    t0 = time.time()
    try:
        build.load_extension(problem, hopper=True)
        print(f"hopper extension: built/loaded in {time.time() - t0:.1f} s")
    except Exception as e:  # noqa: BLE001 - the probe goes on, each step then says why
        print(f"hopper extension: FAILED after {time.time() - t0:.1f} s: {one_line(e)}")
    return usage


def checked_small(probe: Probe, problem: Problem, v: Variant, small: list[Sizes]) -> bool:
    """measure's check (no timing) at each of ``small``; False, after the failure's line, at the
    first that fails or cannot run."""
    for sizes in small:
        m = probe.measure(problem, v.slug, sizes, time_it=False, quiet=True)
        if m is None or not m.ok:
            return False
    print(f"{v.slug}: checked at {len(small)} small odd sizes", flush=True)
    return True


def measure_steps(probe: Probe, problem: Problem, steps: list[Variant], sizes: Sizes,
                  small: list[Sizes], usage: dict, full_only: Collection[str] = ()) -> dict[str, float]:
    """Each step checked at ``small`` (except those in ``full_only``), then measured and
    recorded at ``sizes``; the median ms of each step timed clean."""
    times = {}
    for v in steps:
        if v.slug not in full_only and not checked_small(probe, problem, v, small):
            continue
        note = ptxas_note(usage, v)
        m = probe.measure(problem, v.slug, sizes, notes=[note] if note else [])
        if m is not None and m.timed:
            times[v.slug] = m.timing.median_ms
    return times


def _launches(probe: Probe, sizes: Sizes) -> None:
    """Steps 14 and 15 launch by launch (the calls their builds chain): the Triton split of x and
    step 14's GEMM, then step 15's row-scale pass and its GEMM, which splits x in shared memory."""
    from fusedkit.kernels import load_step  # noqa: PLC0415 - imports Triton

    M, K, N = sizes["batch_size"], sizes["in_features"], sizes["out_features"]
    mult, slope = P.constants["multiplier"], P.constants["negative_slope"]
    ext = build.load_extension("p12", hopper=True)
    split = load_step("common", "fp16x3_split.py")
    model = P.make_model(sizes, seed=4, device="cuda")
    (x,) = P.get_inputs(sizes, seed=4, device="cuda")
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    ws = split.split_weight_cached(w)
    xs = split.split_fp16x3(x, pad_cols_to=split.K_ALIGN)
    scale, inv = ext.x_row_scales(x)
    gemm = 2.0 * M * N * K
    parts = [
        ("wgmma_fp16x3:x_split", lambda: split.split_fp16x3(x, pad_cols_to=split.K_ALIGN), 0.0),
        ("wgmma_fp16x3:gemm", lambda: ext.wgmma_fp16x3(xs.hi, xs.lo, xs.inv_scale, ws.hi, ws.lo,
                                                       ws.inv_scale, b, mult, slope), gemm),
        ("wgmma_fp16x3_fused_split:x_row_scales", lambda: ext.x_row_scales(x), 0.0),
        ("wgmma_fp16x3_fused_split:gemm", lambda: ext.wgmma_fp16x3_fused_split(
            x, scale, inv, ws.hi, ws.lo, ws.inv_scale, b, mult, slope), gemm),
    ]
    for name, fn, flop in parts:
        try:   # the passes over x alone are rated by the bytes of x they read
            t = probe.time_launch(P, sizes, name, fn, flop=flop, nbytes=0.0 if flop else 4.0 * M * K)
            rate = f"{flop / t.median_ms / 1e9:8.1f} TFLOP/s" if flop else \
                f"{4.0 * M * K / t.median_ms / 1e6:8.1f} GB/s of x read"
            print(f"  {name:40s} {t.median_ms:8.4f} ms  {rate}", flush=True)
        except Exception as e:  # noqa: BLE001 - a broken launch is a finding, not the end
            print(f"  {name:40s} {failed(e)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = parser("hopper_probe", __doc__)
    ap.add_argument("--sizes", type=sizes_arg(P), default=P.defaults,
                    help="the full-size check and timing, as bench takes it (default: KernelBench's)")
    args = ap.parse_args(argv)
    usage = start("hopper_probe", "p12")
    if usage is None:
        return 2
    try:
        probe = Probe("hopper_probe", rep_ms=args.rep_ms, records_path=args.records)
    except (ValueError, OSError) as e:
        return refused("hopper_probe", e)
    small = [P.sizes(batch_size=m, in_features=k, out_features=n) for m, k, n in SMALL_SIZES]
    # The cuBLAS bar comes first; step 09 (Triton fp16x3, autotuned per size) last, full size only.
    steps = [*p12mod.HOPPER_VARIANTS, P.variants["triton_fp16x3"]]
    times = measure_steps(probe, P, steps, args.sizes, small, usage, full_only={"triton_fp16x3"})
    if BAR in times:
        for slug, ms in times.items():
            print(f"  {slug:28s} {100.0 * times[BAR] / ms:6.1f}% of cuBLAS fp16's rate (same run)")
    if "wgmma_fp16x3" in times and "triton_fp16x3" in times:
        a, t = times["wgmma_fp16x3"], times["triton_fp16x3"]
        print(f"fp16x3: wgmma (step 14) {a:.4f} ms vs Triton (step 09) {t:.4f} ms: {t / a:.2f}x")
    if "wgmma_fp16x3" in times and "wgmma_fp16x3_fused_split" in times:
        a, f = times["wgmma_fp16x3"], times["wgmma_fp16x3_fused_split"]
        print(f"fp16x3: split in smem (step 15) {f:.4f} ms vs step 14 {a:.4f} ms: "
              f"{1e3 * (a - f):+.1f} us saved")
    if "wgmma_fp16x3" in times:
        print("\nsteps 14 and 15 launch by launch:")
        try:
            _launches(probe, args.sizes)
        except Exception as e:  # noqa: BLE001
            print(f"  {failed(e)}")
    probe.done()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
