"""``python -m fusedkit``: info, report and bench from the command line.

Bad input gets one line naming the parameter and what is allowed, and exit status 2;
never a traceback from deep inside a kernel (set FUSEDKIT_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fusedkit.problems import Problem, SizeError


def _info(_: argparse.Namespace) -> int:
    import platform  # noqa: PLC0415

    import torch  # noqa: PLC0415

    from fusedkit.hardware import detect_gpu  # noqa: PLC0415
    from fusedkit.mode import detect_mode  # noqa: PLC0415
    from fusedkit.records import RunContext  # noqa: PLC0415

    mode, ctx, gpu = detect_mode(), RunContext.collect(), detect_gpu()
    print(mode.describe())
    print(f"\nmode         {mode.name}")
    print(f"device       {ctx.device}")
    print(f"driver       {ctx.driver or '-'}")
    print(f"cuda         {ctx.cuda or '-'} (torch built with)")
    print(f"torch        {torch.__version__}")
    print(f"triton       {mode.triton or 'not installed'}"
          f"{' (interpreter)' if mode.triton_interpreter else ''}")
    print(f"nvcc         {mode.nvcc or 'not found'}")
    print(f"python       {platform.python_version()}")
    print(f"commit       {ctx.commit}")
    print(f"roofline gpu {gpu.spec.name}: {gpu.reason}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from fusedkit.report import build_reports  # noqa: PLC0415

    notebooks = [Path(p) for p in args.notebooks] or None
    for p in notebooks or []:
        if not p.is_file():
            raise SizeError(f"notebook={str(p)!r} does not exist")
    results = build_reports(args.out, notebooks, timeout=args.timeout)
    for r in results:
        status = "ok" if r.ok else f"FAILED: {r.error}"
        print(f"{r.html}  ({r.seconds:.0f} s)  {status}")
    print(f"index: {Path(args.out) / 'index.html'}")
    return 0 if all(r.ok for r in results) else 1


def _bench(args: argparse.Namespace) -> int:
    import pandas as pd  # noqa: PLC0415

    from fusedkit import problems  # noqa: PLC0415
    from fusedkit.runner import run_ladder  # noqa: PLC0415

    problem = problems.get(args.problem)
    names = [n.strip() for n in args.variants.split(",")] if args.variants else None
    if names:
        problem.ladder(names)   # validate names before any work
    if args.sweep:
        return _sweep(args, problem, names)
    sizes = problem.sizes(problems.parse_sizes(args.sizes or ""))
    df = run_ladder(problem, sizes, variants=names, seeds=args.seeds, rep_ms=args.rep_ms,
                    records_path=Path(args.records) if args.records else None)
    cols = [c for c in ("variant", "tier", "median_ms", "p10_ms", "p90_ms", "tflops",
                        "gbps", "pct_of_floor", "pct_of_copy", "rel_error", "speedup") if c in df]
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(df[cols].to_string(index=False) if not df.empty else "no variant ran")
    return 0


def _sweep(args: argparse.Namespace, problem: Problem, names: list[str] | None) -> int:
    """``bench --sweep``: the ladder at every size point, recorded as one series."""
    import pandas as pd  # noqa: PLC0415

    from fusedkit import problems  # noqa: PLC0415
    from fusedkit.sweep import parse_sweep, run_sweep  # noqa: PLC0415

    axes = parse_sweep(problem, args.sweep)
    base = problems.parse_sizes(args.sizes or "")
    problem.sizes(base)   # validate the fixed sizes before any work
    res = run_sweep(problem, axes, base, variants=names, seeds=args.seeds, rep_ms=args.rep_ms,
                    records_path=Path(args.records) if args.records else None)
    cols = [c for c in ("variant", *axes, "tier", "median_ms", "tflops", "gbps", "pct_of_floor",
                        "rel_error", "speedup") if c in res.rows]
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(res.rows[cols].to_string(index=False) if not res.rows.empty else "no variant ran")
    print(f"series {res.run_id}: {res.points} points run, {len(res.skipped)} skipped, "
          f"{len(res.rows)} rows recorded")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fusedkit", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="device, versions and the mode the workbook runs in").set_defaults(fn=_info)
    r = sub.add_parser("report", help="execute the notebooks and write HTML reports")
    r.add_argument("--out", default="reports", help="output folder (default: reports)")
    r.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell")
    r.add_argument("notebooks", nargs="*", help="notebooks to run (default: all)")
    r.set_defaults(fn=_report)
    b = sub.add_parser("bench", help="check and time a problem's ladder; append to data/")
    b.add_argument("--problem", required=True, help="p12 or p45")
    b.add_argument("--sizes", help="e.g. batch_size=1024,in_features=8192 (default: KernelBench's)")
    b.add_argument("--variants", help="comma-separated variant names (default: all)")
    b.add_argument("--seeds", type=int, default=5, help="fresh seeds for the check")
    b.add_argument("--rep-ms", type=float, default=500.0, help="timing budget per variant, ms")
    b.add_argument("--records", help="records CSV (default: data/records.csv)")
    b.add_argument("--sweep", action="append", metavar="DIM=VALUES",
                   help="run the ladder at several sizes as one series, e.g. batch_size=1,16,128 or "
                        "batch_size=64..16384x2 (or lo..hi+step); repeat for a cross product. Rows "
                        "are recorded as each variant finishes; a new run is a new series (no resume)")
    b.set_defaults(fn=_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, TypeError, FileNotFoundError) as e:
        # Our own errors are one line naming the parameter; print just that, unless asked.
        if os.environ.get("FUSEDKIT_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
