"""Check, time and record problem 12's Hopper steps (08-10) and their cuBLAS fp16 bar through
the one measuring path, beside eager and the fp16x3 step, in one run:

    python -m fusedkit.devtools.bench_hopper [--seeds 2] [--batch-size 1024]

The steps are not yet in the registry's ladder (see HOPPER_VARIANTS), so the bench command
cannot name them; this adds them to the problem for this process only and calls the same
``runner.run_ladder`` the bench command calls, so the rows land in the records alike.
"""

from __future__ import annotations

import argparse
import sys

from fusedkit import runner
from fusedkit.problems import p12_gemm_multiply_leakyrelu as p12


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--variants", default="", help="comma-separated slugs (default: eager, every "
                    "Hopper step and its bar, triton_fp16x3)")
    args = ap.parse_args(argv)
    problem = p12.PROBLEM
    for v in p12.HOPPER_VARIANTS:
        if v.slug not in problem.variants:
            problem.add_variant(v)
    names = (args.variants.split(",") if args.variants
             else ["eager", *(v.slug for v in p12.HOPPER_VARIANTS), "triton_fp16x3"])
    df = runner.run_ladder(problem, {"batch_size": args.batch_size}, variants=names, seeds=args.seeds,
                           components=[])
    cols = [c for c in ("variant", "tier", "median_ms", "tflops", "pct_of_floor", "rel_error", "speedup",
                        "failure") if c in df]
    print(df[cols].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
