"""Probe: at a few rows, is a faithful step waiting on the host or on the GPU?

    python -m devtools.small_batch_probe [--problem p12] [--rows 1,4,16,64] [--calls 200] [--records FILE]
                                         [--also wgmma_fp16x3_splitk]

Sweeps recorded problem 12's Triton step 9 at 4 rows either at 0.116 ms or spread over
0.14-0.25 ms, run to run, while 16 and 64 rows stayed at 0.116-0.119 ms with the same GPU work
(one 64-row tile of MMAs per column block). This probe tells the two kinds of time apart, per
step the by-batch step routes to (9, 17, 14), the by-batch step itself (19) and eager fp32, at
each row count, with the inputs and weights the harness would use. ``--problem p45`` probes
problem 45's by-batch step and the steps it routes to (3, 7, 5) the same way; ``--also`` times
other steps beside them (a candidate no route names yet, e.g. p12's split-K step 18):

- ``host_ms``: the Python call alone, wall time without a sync (launches queued, not run);
- ``gpu_b2b_ms``: CUDA events around ``--calls`` calls queued back to back, per call: the GPU's
  own time when it never waits for the host;
- ``isolated_ms``: events around one call after a sync, median: what a caller that waits for
  each result sees (the launch latency included);
- ``harness_ms`` (p10-p90): :func:`fusedkit.harness.measure`'s time (checked first), an L2
  flush before each call;
- ``config``: for step 9, the tile the autotuner chose at this size.

Each (step, rows) is recorded, one run for the whole probe, from measure's row; the other three
times and the config go in its notes (``host_ms=...``), taken on a build of the probe's own
after measure's check passed. A step with ``host_ms`` above ``gpu_b2b_ms`` is host-bound: its
harness time then follows the host, and jitters with it. Needs a CUDA GPU: without one it says
so in one line (exit 2).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Sequence

import pandas as pd
import torch

from fusedkit import problems
from devtools.common import Probe, parser, positive, refused


def steps(problem: problems.Problem, also: Sequence[str] = ()) -> list[str]:
    """Eager, every step the by-batch step routes to (from its routes), the steps ``also`` names,
    then the by-batch step; each once."""
    byb = next(v for v in problem.ladder() if v.routes)
    return list(dict.fromkeys(["eager", *(s for r in byb.routes for s in r.slugs), *also, byb.slug]))


def _rows(text: str) -> list[int]:
    try:
        rows = [int(r) for r in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rows={text!r}: expected row counts like 1,4,16,64") from None
    if not rows or min(rows) < 1:
        raise argparse.ArgumentTypeError(f"--rows={text!r}: row counts must be integers >= 1")
    return rows


def own_times(problem: problems.Problem, slug: str, sizes: problems.Sizes, calls: int,
              device: torch.device) -> dict[str, float]:
    """host_ms, gpu_b2b_ms and isolated_ms of one step at ``sizes``, on a build of its own."""
    model = problem.make_model(sizes, seed=0, device=device)
    (x,) = problem.get_inputs(sizes, seed=1, device=device)
    fn = problem.variant(slug).build(model)
    with torch.no_grad():
        for _ in range(10):  # builds, autotunes, fills the weight caches
            fn(x)
        torch.cuda.synchronize(device)
        host = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn(x)
            host.append((time.perf_counter() - t0) * 1e3)
            if len(host) % 20 == 0:
                torch.cuda.synchronize(device)  # keep the launch queue short: time the host, not a full queue
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(x)
        end.record()
        torch.cuda.synchronize(device)
        b2b = start.elapsed_time(end) / calls
        isolated = []
        for _ in range(min(calls, 50)):
            torch.cuda.synchronize(device)
            start.record()
            fn(x)
            end.record()
            torch.cuda.synchronize(device)
            isolated.append(start.elapsed_time(end))
    return {"host_ms": statistics.median(host), "gpu_b2b_ms": b2b,
            "isolated_ms": statistics.median(isolated)}


def step9_config(problem: problems.Problem, slug: str) -> str:
    """The tile step 9's autotuner chose in this process ("" for another step)."""
    if problem.key != "p12" or slug != "triton_fp16x3":
        return ""
    from fusedkit.kernels import load_step  # noqa: PLC0415 - the step's module, already loaded

    best = getattr(load_step("p12", "09_triton_fp16x3.py")._fp16x3_linear_leakyrelu_kernel,
                   "best_config", None)
    return "" if best is None else "x".join(str(best.kwargs[k]) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))


def probe_one(probe: Probe, problem: problems.Problem, slug: str, rows: int,
              calls: int) -> dict[str, object]:
    """The four times of one step at ``rows`` rows (the problem's other sizes at defaults):
    its own three, then measure's check and time, recorded with the three in its notes (a step
    that fails the check is not recorded, and its own times are not shown)."""
    sizes = problem.sizes({**problem.defaults, "batch_size": rows})
    own = own_times(problem, slug, sizes, calls, probe.device)
    config = step9_config(problem, slug)
    notes = [", ".join(f"{k}={v:.4f}" for k, v in own.items()) + f" over {calls} calls"]
    m = probe.measure(problem, slug, sizes, notes=notes + ([f"config {config}"] if config else []),
                      quiet=True)
    if m is None or not m.timed:
        why = m.failure if m is not None else "cannot run here"
        return {"rows": rows, "step": slug, "config": f"FAILED: {why}"[:200]}
    return {"rows": rows, "step": slug, **own, "harness_ms": m.timing.median_ms,
            "harness_p10": m.timing.p10_ms, "harness_p90": m.timing.p90_ms, "config": config}


def main(argv: list[str] | None = None) -> int:
    ap = parser("small_batch_probe", __doc__)
    ap.add_argument("--problem", choices=problems.names(), default="p12",
                    help="the problem whose by-batch step and its routed steps are probed")
    ap.add_argument("--rows", type=_rows, default=[1, 4, 16, 64], help="row counts, e.g. 1,4,16,64")
    ap.add_argument("--calls", type=positive(int, "--calls"), default=200, help="calls per own timing")
    ap.add_argument("--also", default="", help="more steps to time beside them, e.g. wgmma_fp16x3_splitk")
    args = ap.parse_args(argv)
    problem = problems.get(args.problem)
    also = [s for s in args.also.split(",") if s]
    if unknown := [s for s in also if s not in problem.variants]:
        ap.error(f"--also={args.also!r}: {problem.key} has no step {', '.join(unknown)}")
    if not torch.cuda.is_available():
        print("small_batch_probe: needs a CUDA GPU (torch sees none); run it on the GPU machine",
              file=sys.stderr)
        return 2
    try:
        probe = Probe("small_batch_probe", rep_ms=args.rep_ms, records_path=args.records)
    except (ValueError, OSError) as e:
        return refused("small_batch_probe", e)
    out = []
    for rows in args.rows:
        for slug in steps(problem, also):
            try:
                out.append(probe_one(probe, problem, slug, rows, args.calls))
            except Exception as e:  # noqa: BLE001 - one step's failure is one line of the table
                out.append({"rows": rows, "step": slug, "config": f"FAILED: {type(e).__name__}: {e}"[:200]})
            print(pd.DataFrame(out[-1:]).to_string(index=False, header=len(out) == 1,
                                                     float_format=lambda v: f"{v:.4f}"), flush=True)
    table = pd.DataFrame(out)
    if {"host_ms", "gpu_b2b_ms"} <= set(table.columns):
        table["host_bound"] = table["host_ms"] > table["gpu_b2b_ms"]
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    probe.done()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
