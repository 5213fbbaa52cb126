"""Probe: can step 10 (persistent + TMA) match eager's cuBLAS TF32 GEMM on problem 12?

At KernelBench's sizes (1024x8192x8192) it measures, in one recorded run: eager with TF32 on,
step 08 (autotuned), then step 10 at every config of its ``PROBE_SPACE`` (the wider set the
autotuner never sees), then at the autotuner's own configs not already measured, then step 10
autotuned, then eager again (``eager_tf32@again``: drift over the run). Each goes through
:func:`fusedkit.harness.measure` (checked at its declared precision, then timed); a config is
recorded as ``triton_<precision>_persistent@<config>``, its whole config in the notes. After
``--budget-s`` seconds no new config is started. The last line names the fastest step 10
config and its ratio to eager TF32:

    python -m devtools.probe_p12_tf32 [--precision tf32|tf32x3] [--rep-ms 200] [--budget-s 100] [--records FILE]

Without a GPU (TRITON_INTERPRET=1, set by fusedkit) it checks every config in Triton's
interpreter at a small size (one build each): a logic check, neither timed nor recorded.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import torch

from fusedkit import problems  # first: settles interpreter mode before Triton loads
from devtools.common import Probe, parser, refused
from fusedkit.kernels import load_step

P = problems.get("p12")
PRECISIONS = ("tf32", "tf32x3")
FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "stages", "warps", "SPLIT_N", "WARP_SPECIALIZE",
          "GROUP_M", "num_ctas")
"""The fields of a step 10 config key, in order (``config_key``)."""
CPU_SIZES = P.sizes(batch_size=70, in_features=72, out_features=260)
"""Where the interpreter checks the configs: TMA-ready (K and N multiples of 4), a few tiles."""


def _k10():
    return load_step("p12", "10_triton_persistent_tma.py")


def build_step10(key: tuple | None, precision: str, model: torch.nn.Module) -> Callable:
    """Step 10 at one config (``key``, as ``config_key`` gives it; None: autotuned) on the model's
    weights. A shape TMA cannot read (the check's nearby odd one) takes step 10's own fallback,
    which a fixed config refuses."""
    k10 = _k10()
    cfg = k10.make_config(*key) if key else None
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    mult, slope = P.constants["multiplier"], P.constants["negative_slope"]

    def fn(x: torch.Tensor) -> torch.Tensor:
        tma = cfg is not None and k10.uses_tma(x, w, precision)
        return k10.linear_leakyrelu_persistent(x, w, b, mult, slope, precision,
                                               config=cfg if tma else None)
    return fn


def config_name(key: tuple) -> str:
    """A config key as a variant suffix: 128x256x32_s3_w8_n2_ws0_g8_c1."""
    bm, bn, bk, stages, warps, split, ws, group, ctas = key
    return f"{bm}x{bn}x{bk}_s{stages}_w{warps}_n{split}_ws{int(ws)}_g{group}_c{ctas}"


def config_note(key: tuple) -> str:
    return "config " + ", ".join(f"{f}={v}" for f, v in zip(FIELDS, key))


def measure_config(probe: Probe, prec: str, key: tuple | None, sizes, *, time_it: bool = True):
    """Step 10 at ``key`` (None: autotuned) through measure, recorded when timed clean."""
    suffix = config_name(key) if key else "autotuned"
    return probe.measure(P, functools.partial(build_step10, key, prec), sizes, time_it=time_it,
                         name=f"triton_{prec}_persistent@{suffix}", precision=prec, triton=True,
                         notes=[config_note(key)] if key else ["autotuned"])


def main(argv: list[str] | None = None) -> int:
    ap = parser("probe_p12_tf32", __doc__)
    ap.add_argument("--precision", default="tf32", choices=PRECISIONS)
    ap.add_argument("--budget-s", type=float, default=100.0,
                    help="start no new step 10 config after this many seconds of the run")
    args = ap.parse_args(argv)
    if not args.budget_s > 0:
        ap.error(f"--budget-s={args.budget_s}: must be > 0 seconds")
    prec, gpu = args.precision, torch.cuda.is_available()
    t_start = time.perf_counter()
    try:   # on a CPU one build each: the interpreter's logic check
        probe = Probe("probe_p12_tf32", rep_ms=args.rep_ms, records_path=args.records,
                      seeds=3 if gpu else 1)
    except (ValueError, OSError) as e:
        return refused("probe_p12_tf32", e)
    k10 = _k10()
    sizes = P.defaults if gpu else CPU_SIZES
    print(f"# p12 at {problems.fmt_sizes(sizes)}, precision {prec}, device "
          f"{torch.cuda.get_device_name() if gpu else 'cpu (interpreter: checked, not timed)'}",
          flush=True)
    eager = float("nan")
    if gpu:
        m = probe.measure(P, "eager_tf32", sizes)
        eager = m.timing.median_ms if m is not None and m.timed else eager
        probe.measure(P, f"triton_{prec}", sizes)
        best08 = getattr(load_step("p12", "08_triton_fused.py")._linear_leakyrelu_kernel,
                         "best_config", None)
        print(f"#   step 08 picked {load_step('common', 'triton_base.py').config_key(best08) if best08 else '?'}"
              " (in this process; measure may build it elsewhere)", flush=True)

    # Every config on its own (compiles each once): PROBE_SPACE first, in its order (its 2-CTA
    # cluster entries last: a kernel that faults leaves the CUDA context unusable), then the
    # autotuner's configs it lacks, then the autotuner over its list.
    probe_keys = list(k10.PROBE_SPACE.get(prec, []))
    rest = [k for k in map(k10.config_key, k10.GPU_CONFIGS[prec]) if k not in probe_keys]
    print(f"# step 10 configs ({', '.join(FIELDS)})", flush=True)
    best: tuple[float, tuple | None] = (float("inf"), None)
    skipped: list[tuple] = []
    for group, keys in (("PROBE_SPACE", probe_keys), ("autotuner list, not in PROBE_SPACE", rest)):
        if keys:
            print(f"# {group}: {len(keys)} configs", flush=True)
        for key in keys:
            if time.perf_counter() - t_start > args.budget_s:
                skipped.append(key)  # the time guard: report, do not start
                continue
            m = measure_config(probe, prec, key, sizes, time_it=gpu)
            if m is not None and m.timed and m.timing.median_ms < best[0]:
                best = (m.timing.median_ms, key)
    if skipped:
        print(f"# time guard: {time.perf_counter() - t_start:.1f} s > {args.budget_s:g} s, "
              f"{len(skipped)} configs not started: {', '.join(map(str, skipped))}", flush=True)
    if gpu and time.perf_counter() - t_start <= args.budget_s:
        measure_config(probe, prec, None, sizes)
        # The same eager again, under a name of its own: one row per variant and run.
        probe.measure(P, P.variant("eager_tf32").build, sizes, name="eager_tf32@again",
                      precision="tf32", notes=["eager_tf32 again, at the end: drift over the run"])
    elapsed = f"{time.perf_counter() - t_start:.0f} s in all"
    if not gpu:
        print(f"# fastest step 10 config: none timed (interpreter); {elapsed}", flush=True)
    elif best[1] is None:
        print(f"# fastest step 10 config: none passed the check; {elapsed}", flush=True)
    else:
        ratio = eager / best[0]
        print(f"# fastest step 10 config: {best[1]} at {best[0]:.4f} ms; eager TF32 {eager:.4f} ms: "
              f"eager/this {ratio:.3f}x ({'FASTER' if ratio > 1 else 'slower'} than eager); {elapsed}",
              flush=True)
    probe.done()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
