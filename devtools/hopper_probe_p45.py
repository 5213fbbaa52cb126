"""Probe: do problem 45's Hopper steps (07: both GEMMs on fp16x3 splits; 08: one fp16 product each, on
the same wgmma kernel) build, compute the right thing, and how fast are they beside their Triton twins
(05 for 07, 06 for 08)?  One GPU call, one recorded run:

    python -m devtools.hopper_probe_p45 [--rep-ms 200] [--sizes batch_size=16384,...] [--records FILE]

1. ptxas resources of the steps' kernels (registers, spills, shared memory), for sm_90a;
2. p45's Hopper extension's build (a compile error is printed, the rest still runs);
3. per variant (eager fp32, steps 07 and 08, Triton steps 05 ``triton_fused_lse_fp16x3`` and 06
   ``triton_fused_lse_fp16``): :func:`fusedkit.harness.measure`'s check at small odd sizes (the
   Hopper steps only, check only), then its check and time at the full size, recorded; the
   speed-up over eager in the same run printed;
4. step 07 split into its launches (x split, GEMM1, GEMM2, combine), each timed alone and
   recorded as ``wgmma_fp16x3_lse:<launch>`` (a launch computes a piece: no check judges it).
A failure in one variant is printed on its line and the probe goes on; it is not recorded.
"""

from __future__ import annotations

from fusedkit import build
from devtools.common import Probe, parser, refused, sizes_arg
from devtools.hopper_probe import failed, measure_steps, start
from fusedkit.problems import Sizes
from fusedkit.problems import p45_linear_sigmoid_linear_logsumexp as p45mod

P = p45mod.PROBLEM
# (M, K, H, N): single rows and columns, odd tails of every tile, KernelBench's widths at one row.
SMALL_SIZES = [(1, 1, 1, 1), (3, 5, 7, 33), (67, 1000, 333, 129), (129, 64, 130, 128),
               (300, 520, 257, 1025), (1, 2048, 4096, 1024)]


def _launches(probe: Probe, sizes: Sizes) -> None:
    """Step 07's four launches timed one by one (the same calls its build chains)."""
    from fusedkit.kernels import load_step  # noqa: PLC0415 - imports Triton

    M, K = sizes["batch_size"], sizes["input_size"]
    H, N = sizes["hidden_size"], sizes["output_size"]
    ext = build.load_extension("p45", hopper=True)
    split = load_step("common", "fp16x3_split.py")
    combine = load_step("common", "lse.py").combine_lse
    model = P.make_model(sizes, seed=4, device="cuda")
    (x,) = P.get_inputs(sizes, seed=4, device="cuda")
    w1, b1 = model.linear1.weight.detach(), model.linear1.bias.detach()
    w2, b2 = model.linear2.weight.detach(), model.linear2.bias.detach()
    w1s, w2s = split.split_weight_cached(w1), split.split_weight_cached(w2)
    xs = split.split_fp16x3(x, pad_cols_to=split.K_ALIGN)
    hh, hl = ext.wgmma_fp16x3_sigmoid_split(xs.hi, xs.lo, xs.inv_scale, w1s.hi, w1s.lo,
                                            w1s.inv_scale, b1)
    pmax, psum = ext.wgmma_fp16x3_partial_lse(hh, hl, w2s.hi, w2s.lo, w2s.inv_scale, b2)
    parts = [
        ("x_split", lambda: split.split_fp16x3(x, pad_cols_to=split.K_ALIGN), 0.0),
        ("gemm1_sigmoid_split", lambda: ext.wgmma_fp16x3_sigmoid_split(
            xs.hi, xs.lo, xs.inv_scale, w1s.hi, w1s.lo, w1s.inv_scale, b1), 2.0 * M * H * K),
        ("gemm2_partial_lse", lambda: ext.wgmma_fp16x3_partial_lse(
            hh, hl, w2s.hi, w2s.lo, w2s.inv_scale, b2), 2.0 * M * N * H),
        ("combine", lambda: combine(pmax, psum), 0.0),
    ]
    for name, fn, flop in parts:
        try:
            t = probe.time_launch(P, sizes, f"wgmma_fp16x3_lse:{name}", fn, flop=flop)
            rate = f"{flop / t.median_ms / 1e9:8.1f} TFLOP/s (x3: {3 * flop / t.median_ms / 1e9:.0f})" \
                if flop else ""
            print(f"  {name:28s} {t.median_ms:8.4f} ms  {rate}", flush=True)
        except Exception as e:  # noqa: BLE001 - a broken launch is a finding, not the end
            print(f"  {name:28s} {failed(e)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = parser("hopper_probe_p45", __doc__)
    ap.add_argument("--sizes", type=sizes_arg(P), default=P.defaults,
                    help="the full-size check and timing, as bench takes it (default: KernelBench's)")
    args = ap.parse_args(argv)
    usage = start("hopper_probe_p45", "p45")
    if usage is None:
        return 2
    try:
        probe = Probe("hopper_probe_p45", rep_ms=args.rep_ms, records_path=args.records)
    except (ValueError, OSError) as e:
        return refused("hopper_probe_p45", e)
    small = [P.sizes(batch_size=m, input_size=k, hidden_size=h, output_size=n)
             for m, k, h, n in SMALL_SIZES]
    # Eager is the yardstick and Triton autotunes per size: both at the full size only.
    twins = ("triton_fused_lse_fp16x3", "triton_fused_lse_fp16")   # steps 05 and 06, 07's and 08's
    steps = [P.variants["eager"], *p45mod.HOPPER_VARIANTS, *(P.variants[s] for s in twins)]
    times = measure_steps(probe, P, steps, args.sizes, small, usage, full_only={"eager", *twins})
    if "eager" in times:
        for slug, ms in times.items():
            print(f"  {slug:28s} {times['eager'] / ms:6.2f}x eager (same run)")
    if "wgmma_fp16x3_lse" in times and "triton_fused_lse_fp16x3" in times:
        a, t = times["wgmma_fp16x3_lse"], times["triton_fused_lse_fp16x3"]
        print(f"fp16x3: wgmma (step 07) {a:.4f} ms vs Triton (step 05) {t:.4f} ms: {t / a:.2f}x")
    if "wgmma_fp16_lse" in times and "triton_fused_lse_fp16" in times:
        a, t = times["wgmma_fp16_lse"], times["triton_fused_lse_fp16"]
        print(f"fp16: wgmma (step 08) {a:.4f} ms vs Triton (step 06) {t:.4f} ms: {t / a:.2f}x")
    if "wgmma_fp16x3_lse" in times:
        print("\nstep 07 launch by launch:")
        try:
            _launches(probe, args.sizes)
        except Exception as e:  # noqa: BLE001
            print(f"  {failed(e)}")
    probe.done()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
