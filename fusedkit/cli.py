"""``fusedkit``: info, report, bench, ceilings, build, export and readme from the command line.

Bad input and faults get one line on stderr naming the option, the value and what is allowed,
and exit status 2 (1 for a failed bench or report), never a traceback (``FUSEDKIT_DEBUG=1``
shows one), before anything is measured; a signal says what was kept (docs/command-line.md).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, NoReturn

import pandas as pd
import torch

from fusedkit import build, ceilings, export, interrupts, problems, readme, records, report, runner, sweep
from fusedkit.device import record_run
from fusedkit.hardware import detect_gpu
from fusedkit.harness import MAX_SEEDS, SEEDS
from fusedkit.mode import detect_mode
from fusedkit.problems import Problem, SizeError, presets

SLOW_S = 120.0   # a bench estimated at more seconds is refused unless --allow-slow is given
QUIET_S = 10.0   # one estimated at more says its estimate first and shows progress


def _info(_: argparse.Namespace) -> int:
    mode, ctx, gpu = detect_mode(), records.RunContext.collect(), detect_gpu()
    print(mode.describe())
    for name, value in (("mode", mode.name), ("device", ctx.device), ("driver", ctx.driver or "-"),
                        ("cuda", f"{ctx.cuda or '-'} (torch built with)"), ("torch", torch.__version__),
                        ("triton", (mode.triton or "not installed")
                         + (" (interpreter)" if mode.triton_interpreter else "")),
                        ("nvcc", mode.nvcc or "not found"), ("python", platform.python_version()),
                        ("commit", ctx.commit), ("roofline gpu", f"{gpu.spec.name}: {gpu.reason}")):
        print(f"{'' if name != 'mode' else chr(10)}{name:<12} {value}")
    return 0


def _report(args: argparse.Namespace) -> int:
    notebooks: list[Path] = []
    for p in map(Path, args.notebooks):
        if p.is_dir():   # a folder: its numbered notebooks, as the default is notebooks/'s
            try:
                notebooks += report.notebook_paths(p)
            except FileNotFoundError:
                raise SizeError(f"notebook={str(p)!r} is a folder without numbered notebooks "
                                "(NN_name.ipynb); allowed: notebook files, or a folder of them") from None
        elif p.is_file():
            notebooks.append(p)
        else:
            raise SizeError(f"notebook={str(p)!r} {'is not a file' if p.exists() else 'does not exist'}; "
                            "allowed: a notebook file or a folder of them (default: every "
                            "notebooks/NN_*.ipynb)")
    sizes: dict[str, dict[str, int]] = {}
    for key, values in args.sizes or []:
        if key in sizes:
            raise SizeError(f"--sizes names {key} twice; allowed: each problem once, e.g. "
                            f"--sizes {key}:batch_size=64,... (one --sizes per problem)")
        sizes[key] = values
    with _option("--out", args.out):   # the reports and the index are written there
        try:
            results = report.build_reports(args.out, notebooks or None, timeout=args.timeout, sizes=sizes)
        except report.ParametersError as e:
            raise report.ParametersError(f"--sizes: {e}") from None
    for r in results:
        status = "ok" if r.ok else f"FAILED: {r.error}"
        sizes_note = f"  {report.sizes_line(r.sizes)}" if r.sizes else ""
        print(f"{r.html}  ({r.seconds:.0f} s)  {status}{sizes_note}")
    print(f"index: {Path(args.out) / 'index.html'}")
    return 0 if all(r.ok for r in results) else 1


def _bench(args: argparse.Namespace) -> int:
    # Everything that can be refused is refused before the first (slow) measurement.
    measuring = False
    try:
        problem = problems.get(args.problem)
        names = args.variants   # a list of distinct names, or None for all (see _variant_names)
        if names:
            problem.ladder(names)   # validate names before any work
        base = problems.parse_sizes(",".join(args.sizes or []))
        sizes = problem.sizes(base)
        points = [sizes]
        if args.sweep:
            axes = sweep.parse_sweep(problem, args.sweep)
            points = sweep.sweep_points(problem, axes, base)
        # A CPU run records to an ignored local file unless told otherwise (data/README.md).
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        path = records.path_for(device, args.records)
        with _option(*_records_given(args)) as given:
            records.preflight(given or path)   # as typed: a trailing "/" names a folder
        if not args.sweep:
            problem.check_runnable(sizes, device)   # a sweep skips the points too big
        # The run's context now (FUSEDKIT_COMMIT checked), so that a stopped bench counts the
        # rows of its own run (another bench may be appending to the same file).
        ctx = records.RunContext.collect()
        slow = _estimate(problem, names, points, device, args)
        run = dict(variants=names, seeds=args.seeds, rep_ms=args.rep_ms, records_path=path,
                   progress=slow or sys.stderr.isatty(), ctx=ctx, budget_s=math.inf)
        measuring = True
        if args.sweep:
            res = sweep.run_sweep(problem, axes, base, **run)
            df, cols = res.rows, ["variant", *axes]
        else:
            df, cols = runner.run_ladder(problem, sizes, clocks_beside=True, **run), ["variant"]
    except KeyboardInterrupt as e:
        # Each row was appended as it was measured, so what finished is on disk: say so.
        how = interrupts.signal_name(e)
        raise interrupts.Interrupted(_kept(path, ctx.run_id, how) if measuring else
                                     f"{interrupts.stopped_by(how)} before the first measurement: "
                                     "nothing was measured or written", how) from None
    cols += ["tier", "median_ms", "p10_ms", "p90_ms", "tflops", "gbps", "pct_of_floor",
             "pct_of_measured", "pct_of_copy", "rel_error", "speedup"]
    timed = df[df["median_ms"].notna()] if "median_ms" in df else df.iloc[0:0]
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(timed[[c for c in cols if c in df]].to_string(index=False) if len(timed) else "no variant ran")
    if args.sweep:
        print(f"series {res.run_id}: {res.points} points run, {len(res.skipped)} skipped, "
              f"{len(timed)} rows recorded")
    caught = df[df["failure"].notna()] if "failure" in df else df.iloc[0:0]
    for _, r in caught.iterrows():   # caught by a check: named, not recorded, exit status 1
        print(f"not recorded: {r['variant']} at {r['sizes']}: {r['failure']}", file=sys.stderr)
    if df.empty:
        print("error: nothing was measured (see the skipped notes above)", file=sys.stderr)
    return 1 if df.empty or not caught.empty else 0


def _estimate(problem: Problem, names: list[str] | None, points: list[dict[str, int]],
              device: object, args: argparse.Namespace) -> bool:
    """Refuse a bench none of whose variants can run here, or estimated at over :data:`SLOW_S`
    without ``--allow-slow``; over :data:`QUIET_S`, say the estimate and return True."""
    chosen = problem.ladder(names)
    each: dict[str, float] = {}
    for sizes in points:
        try:   # every variant, at most once per point: the CLI's own limit below decides
            ps = runner.plans(problem, sizes, [v.slug for v in chosen], device=device, seeds=args.seeds,
                              rep_ms=args.rep_ms, budget_s=math.inf)
        except SizeError:
            continue   # a point too large here: the sweep skips it, a bench was refused before
        if not args.sweep and all(p.refusal for p in ps):
            allowed = ", ".join(v.slug for v in problem.ladder() if not v.refusal(device)) or "none"
            raise ValueError(f"nothing ran: {'; '.join(dict.fromkeys(p.refusal for p in ps))}; "
                             f"allowed here (--variants): {allowed}")
        for p in ps:
            if not p.refusal:
                each[p.variant.slug] = each.get(p.variant.slug, 0.0) + p.estimate_s
    def duration(seconds: float) -> str:
        return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 \
            else f"{seconds / 3600:.0f} h"

    total = sum(each.values())
    if total <= QUIET_S:
        return False
    said = (f"about {duration(total)} on this {'GPU' if device.type == 'cuda' else 'CPU'} by the harness's estimate ("
            + ", ".join(f"{k} {duration(s)}" for k, s in sorted(each.items(), key=lambda kv: -kv[1])[:6])
            + (", ..." if len(each) > 6 else "") + ")")
    if total > SLOW_S and not args.allow_slow:
        raise ValueError(f"this bench would take {said}; allowed: at most {SLOW_S:.0f} s without "
                         "--allow-slow (pass it to run anyway), or smaller --sizes, fewer "
                         "--variants or sweep points")
    print(f"estimate: {said}", file=sys.stderr, flush=True)
    return True


def _ceilings(args: argparse.Namespace) -> int:
    """``ceilings``: the device's own ceilings in a run of their own, recorded; a table after."""
    keys = problems.names()
    if args.problem != "all":
        try:
            keys = [problems.get(args.problem).key]
        except ValueError:
            raise ValueError(f"--problem={args.problem!r} is not known; allowed: "
                             f"{', '.join(problems.names())} or all") from None
    if not torch.cuda.is_available():
        raise ValueError("ceilings are measured on a GPU and no CUDA GPU is visible here; the "
                         "recorded ones are in data/records.csv (fusedkit.ceilings.newest)")
    path = records.path_for(torch.device("cuda"), args.records)
    with _option(*_records_given(args)) as given:
        records.preflight(given or path)
        got = record_run([problems.get(k) for k in keys], path)
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(ceilings.table(got).to_string(index=False))
    return 0


def _build(args: argparse.Namespace) -> int:
    """``build``: every CUDA extension at once, before a cold machine's first measurement."""
    try:
        results = build.build_all(problems.extensions(), jobs=args.jobs)
    except build.CudaUnavailableError as e:
        raise ValueError(f"{e}; allowed: a machine with a CUDA GPU and toolkit") from None
    for (problem, hopper), (seconds, error) in results.items():
        name = f"{problem}{' (Hopper, sm_90a)' if hopper else ''}"
        print(f"{name}: {'built' if not error else 'FAILED'} in {seconds:.0f} s" + (f": {error}" if error else ""))
    return 1 if any(error for _, error in results.values()) else 0


def _export(args: argparse.Namespace) -> int:
    """``export``: one variant as a KernelBench solution file, or every variant of a problem."""
    problem = problems.get(args.problem)
    if (args.variant is None) == (args.all is None):
        raise ValueError("export needs exactly one of --variant NAME (with -o FILE) or --all DIR")
    if args.all is not None:
        if args.output is not None:
            raise ValueError(f"-o={args.output!r} goes with --variant; --all writes one file per "
                             "variant into its folder")
        with _option("--all", args.all):
            written = export.export_all(problem, args.all, force=args.force)
    else:
        if args.output is None:
            raise ValueError(f"--variant={args.variant!r} needs -o FILE, the solution file to write")
        with _option("-o", args.output):
            written = [export.export_variant(problem, args.variant, args.output, force=args.force)]
    print("\n".join(map(str, written)))
    return 0


def _readme(args: argparse.Namespace) -> int:
    """``readme``: the README's measured state from the records (``--check``: exit 1 when stale)."""
    with _option(*_records_given(args)) as given:
        state = readme.measured_state(given or None)   # refuses records that are missing or empty
    with _option("--readme", args.readme):
        if args.check and readme.current_block(readme.text_of(args.readme)) != state:
            print(f"{args.readme}: the measured state is stale; run fusedkit readme", file=sys.stderr)
            return 1
        changed = not args.check and readme.update(args.readme, state=state)
    print(f"{args.readme}: measured state {'updated' if changed else 'current' if args.check else 'already current'}")
    return 0


def _kept(path: Path, run_id: str, signal_name: str) -> str:
    """What a stopped bench says: the rows of its own run (not another bench's) that are kept."""
    how = interrupts.stopped_by(signal_name)
    try:   # appends are atomic, so the file holds whole rows only
        n = int((records.read_records(path)["run_id"] == run_id).sum())
    except (OSError, ValueError):
        return f"{how}: rows measured before the interrupt are kept in {path}"
    return (f"{how}: {n} row{'' if n == 1 else 's'} measured before the interrupt "
            f"{'is' if n == 1 else 'are'} kept in {path}")


def _records_given(args: argparse.Namespace) -> tuple[str | None, str]:
    """Who named the records file, and how: ("--records" or "FUSEDKIT_RECORDS", the text), else (None, "")."""
    if args.records:
        return "--records", args.records
    env = os.path.expanduser(os.environ.get("FUSEDKIT_RECORDS", "").strip())
    return ("FUSEDKIT_RECORDS", env) if env else (None, "")


@contextlib.contextmanager
def _option(option: str | None, value: str | None) -> Iterator[str | None]:
    """An OSError or records fault inside raised again, naming ``option`` and the path ``value``."""
    try:
        yield value
    except (OSError, records.RecordsError) as e:
        if option is None or value is None:
            raise
        text = (f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename and e.strerror
                else _one_line(str(e)))
        raise type(e)(f"{option}: {text if value in text else f'{value}: {text}'}") from None


# --- argument types: each refuses a bad value with one line naming option, value and what is allowed

def _positive(option: str, cast: type = int, maximum: float | None = None) -> Callable[[str], float]:
    """An argparse type: an integer >= 1, or (``cast`` float) a finite number > 0, <= ``maximum``."""
    integer = cast is int
    allowed = (f"an integer from 1 to {maximum}" if maximum else "an integer >= 1") if integer else \
        "a finite number > 0" + (f", at most {maximum:g}" if maximum else "")

    def parse(text: str) -> float:
        try:
            value = cast(text)
        except ValueError:
            what = "an integer" if integer else "a number"
            raise argparse.ArgumentTypeError(f"{option}={text!r} is not {what}; allowed: {allowed}") from None
        if integer and (value < 1 or (maximum and value > maximum)):
            raise argparse.ArgumentTypeError(f"{option}={value} is too {'small' if value < 1 else 'large'}; "
                                             f"allowed: {allowed}")
        if not integer and not (math.isfinite(value) and 0 < value <= (maximum or math.inf)):
            raise argparse.ArgumentTypeError(f"{option}={text.strip()} is out of range; allowed: {allowed}")
        return value
    return parse


def _comma_list(option: str, what: str, allowed: str) -> Callable[[str], list[str]]:
    """An argparse type: comma-separated non-empty items, each once (an empty list is no "all")."""
    def parse(text: str) -> list[str]:
        items = [n.strip() for n in text.split(",")]
        fault = (f"{option} is empty ({text!r} names no {what})" if not any(items) else
                 f"{option}={text!r}: {what} {items.index('') + 1} is empty" if "" in items else
                 next((f"{option}={text!r} names {n} twice" for i, n in enumerate(items) if n in items[:i]), ""))
        if fault:
            raise argparse.ArgumentTypeError(f"{fault}; allowed: {allowed}")
        return items
    return parse


_variant_names = _comma_list("--variants", "name", "comma-separated variant names, each once, e.g. "
                             "eager,compile (omit --variants for all)")
_size_items = _comma_list("--sizes", "size", "comma-separated name=value sizes, each once, e.g. "
                          "batch_size=1024,in_features=8192 (omit --sizes for KernelBench's)")


def _problem_sizes(text: str) -> tuple[str, dict[str, int]]:
    """``report --sizes``: ``PROBLEM:SPEC``, SPEC a preset, NAME=VALUE sizes, or both: (key, sizes)."""
    allowed = (f"PROBLEM:NAME=VALUE,... or PROBLEM:PRESET (presets: {', '.join(presets.names())}), "
               "e.g. p12:batch_size=64,in_features=128 or p45:small")
    option = f"--sizes={text!r}"
    name, sep, spec = text.partition(":")
    items = [i.strip() for i in spec.split(",")]
    if not text.strip():
        raise argparse.ArgumentTypeError(f"--sizes is empty ({text!r} names no problem); allowed: {allowed}")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"{option} names no problem before a colon; allowed: {allowed}")
    try:
        problem = problems.get(name.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{option}: problem {name.strip()!r} is not known; allowed: "
                                         f"{' or '.join(problems.names())} before the colon") from None
    if not any(items) or "" in items:
        what = f"names no sizes for {problem.key}" if not any(items) else f": item {items.index('') + 1} is empty"
        raise argparse.ArgumentTypeError(f"{option}{' ' if not any(items) else ''}{what}; allowed: {allowed}")
    base: dict[str, int] = {}
    if "=" not in items[0] and items[0] not in problem.defaults:   # a bare dim: "has no value"
        try:
            base = presets.sizes(problem, presets.lookup(items[0]))
        except SizeError:
            raise argparse.ArgumentTypeError(
                f"{option}: {items[0]!r} is neither a preset nor NAME=VALUE; allowed: a preset "
                f"({', '.join(presets.names())}) or sizes of {problem.key} "
                f"({', '.join(d.name for d in problem.dims)}) as NAME=VALUE") from None
        items = items[1:]
    try:
        return problem.key, problem.sizes({**base, **problems.parse_sizes(",".join(items))})
    except SizeError as e:
        raise argparse.ArgumentTypeError(f"{option}: {e}") from None


def _path(option: str) -> Callable[[str], str]:
    """An argparse type for a path: not empty (the current folder by accident)."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{option}={text!r} is empty; allowed: a path")
        return text
    return parse


def _one_line(message: str) -> str:
    """A (library's) message as one line, a quoted value of over 200 characters cut to 80."""
    line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    return re.sub(r"(?<=[=(\s])'([^']{80})[^']{120,}'",
                  lambda m: f"'{m[1]}...' ({len(m[0]) - 2} characters)", line)


class _Once(argparse.Action):
    """Store an option's value converted by ``convert``; refuse it given twice (argparse keeps the last)."""

    def __init__(self, option_strings: list[str], dest: str,
                 convert: Callable[[str], object] | None = None, **kwargs: object) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.convert = convert

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        given = namespace.__dict__.setdefault("_given", {})   # the text each option came with
        if self.dest in given:
            raise argparse.ArgumentError(self, f"{'/'.join(self.option_strings)} is given twice "
                                               f"({given[self.dest]!r}, then {values!r}); allowed: it once")
        given[self.dest] = values
        try:
            value = self.convert(values) if self.convert else values   # type: ignore[arg-type]
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentError(self, str(e)) from None
        setattr(namespace, self.dest, value)


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, an option given once, and ``-inf`` a value."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*(e[-+]?\d+)?|\.\d+|inf(inity)?|nan)$", re.I)

    def add_argument(self, *names: str, **kwargs: object) -> argparse.Action:
        if names and names[0].startswith("-") and kwargs.get("action", "store") == "store":
            kwargs["action"], kwargs["convert"] = _Once, kwargs.pop("type", None)
        return super().add_argument(*names, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 - argparse's
        if self._subparsers is not None:   # the top level: only -h/--help may come before the command
            for word in sys.argv[1:] if args is None else list(args):
                if not word.startswith("-") or word == "--":
                    break
                if word not in ("-h", "--help"):
                    self.error(f"unrecognized arguments: {word} (before the command); allowed there: "
                               "-h or --help; a command's options go after it, e.g. bench --problem p12")
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        # argparse prefixes a type's message with "argument -o/--output: "; ours already name the option.
        head, sep, rest = message.partition(": ")
        if sep and head.startswith("argument ") and any(
                rest.startswith(name) for name in head.split()[-1].split("/")):
            message = rest
        self.exit(2, f"error: {_one_line(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="fusedkit", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="device, versions and the mode the workbook runs in").set_defaults(fn=_info)
    r = sub.add_parser("report", help="execute the notebooks and write HTML reports")
    r.add_argument("--out", type=_path("--out"), default="reports",
                   help="output folder, created if missing (default: reports)")
    r.add_argument("--timeout", type=_positive("--timeout"), default=600,
                   help="seconds allowed per cell (>= 1; default 600)")
    r.add_argument("--sizes", type=_problem_sizes, action="append", metavar="PROBLEM:SIZES",
                   help="run the notebooks at these sizes of PROBLEM instead of KernelBench's: "
                        "NAME=VALUE,... (e.g. p12:batch_size=64,in_features=128), a preset "
                        f"({'; '.join(f'{q.name}: {q.label}' for q in presets.PRESETS)}; e.g. "
                        "p12:small), or a preset then overrides (p45:small,batch_size=64); "
                        "repeat for each problem. Each notebook's pickers start there (the sizes "
                        "are injected after its parameters cell) and its report and index line name them")
    r.add_argument("notebooks", nargs="*", help="notebooks to run (default: all)")
    r.set_defaults(fn=_report)
    b = sub.add_parser("bench", help="check and time a problem's ladder; append to data/")
    b.add_argument("--problem", required=True, help="p12 or p45")
    b.add_argument("--sizes", type=_size_items,
                   help="e.g. batch_size=1024,in_features=8192 (default: KernelBench's)")
    b.add_argument("--variants", type=_variant_names,
                   help="comma-separated variant names, each once (default: all)")
    b.add_argument("--seeds", type=_positive("--seeds", int, MAX_SEEDS), default=SEEDS,
                   help=f"builds checked per variant, each on two inputs (1 to {MAX_SEEDS}; default {SEEDS})")
    b.add_argument("--rep-ms", type=_positive("--rep-ms", float, 60000), default=500.0,
                   help="timing budget per variant, ms (> 0, at most 60000; default 500)")
    b.add_argument("--records", type=_path("--records"),
                   help="records CSV (default: data/records.csv on a GPU, the ignored "
                        "data/local/records.csv without one, or $FUSEDKIT_RECORDS)")
    b.add_argument("--sweep", action="append", metavar="DIM=VALUES",
                   help="run the ladder at several sizes as one series, e.g. batch_size=1,16,128 or "
                        "batch_size=64..16384x2 (or lo..hi+step); repeat for a cross product. Rows "
                        "are recorded as each variant finishes; a new run is a new series (no resume)")
    b.add_argument("--allow-slow", action="store_true",
                   help=f"run a bench estimated at more than {SLOW_S:.0f} s (refused without it); "
                        f"the estimate is said first whenever it is over {QUIET_S:.0f} s")
    b.set_defaults(fn=_bench)
    c = sub.add_parser("ceilings", help="measure the GPU's own ceilings (copy, L2 and DRAM reads, "
                       "cuBLAS at each problem's GEMM shapes) and record them")
    c.add_argument("--problem", default="all", help="p12, p45 or all (default): whose GEMM shapes")
    c.add_argument("--records", type=_path("--records"),
                   help="records CSV (default: data/records.csv); the clocks go beside it")
    c.set_defaults(fn=_ceilings)
    d = sub.add_parser("build", help="build every CUDA extension at once, in parallel (a cold GPU "
                       "machine, before its first measurement)")
    d.add_argument("--jobs", type=_positive("--jobs"),
                   help="extensions built at the same time (default: all of them)")
    d.set_defaults(fn=_build)
    e = sub.add_parser("export", help="write a kernel as a self-contained KernelBench solution (ModelNew)")
    e.add_argument("--problem", required=True, help="p12 or p45")
    e.add_argument("--variant", help="the variant to export (one of the problem's kernels, no baseline)")
    e.add_argument("-o", "--output", type=_path("-o"), help="the solution file to write (with --variant)")
    e.add_argument("--all", metavar="DIR", type=_path("--all"),
                   help="write every kernel of the problem into DIR, one file each")
    e.add_argument("--force", action="store_true",
                   help="overwrite existing files (never one marked read-only)")
    e.set_defaults(fn=_export)
    m = sub.add_parser("readme", help="regenerate README.md's measured state from the records")
    m.add_argument("--check", action="store_true",
                   help="only check that the README is current (exit status 1 when stale)")
    m.add_argument("--records", type=_path("--records"),
                   help="records CSV (default: data/records.csv, or $FUSEDKIT_RECORDS)")
    m.add_argument("--readme", type=_path("--readme"), default=str(readme.README),
                   help="the README to update (default: the repository's README.md)")
    m.set_defaults(fn=_readme)
    return p


def _debug() -> bool:
    """``FUSEDKIT_DEBUG`` set to anything but "", 0, false, no or off: tracebacks are shown."""
    return os.environ.get("FUSEDKIT_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")


def main(argv: list[str] | None = None) -> int:
    """Run one command: exit status 0 done, 1 a bench or report failed, 2 refused or interrupted."""
    try:   # the command exits after a signal; a test that calls main gets its handlers back
        with interrupts.raising(keep_ignoring=interrupts.launched_as_command()):
            return _run(argv)
    except KeyboardInterrupt as e:
        if _debug():
            raise
        with contextlib.suppress(OSError):   # after a SIGHUP the terminal may be gone
            print(_one_line(str(e)) or interrupts.stopped_by(interrupts.signal_name(e)), file=sys.stderr)
        return interrupts.EXIT_STATUS


def _run(argv: list[str] | None) -> int:
    """Parse ``argv`` and run its command; a refusal is one ``error:`` line and exit status 2."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:   # --help (0), or a usage error already printed as one line (2)
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    try:
        return args.fn(args)
    except (ValueError, TypeError, OSError, MemoryError, RuntimeError) as e:
        # Our own errors (SizeError, RecordsError, PathError, ...) are one line naming the parameter.
        # A failed allocation is said so: a machine (or a ulimit) may hold less than the budget.
        memory = isinstance(e, MemoryError) or "can't allocate memory" in str(e) or \
            "out of memory" in str(e).lower()
        if _debug() or (isinstance(e, RuntimeError) and not memory and not isinstance(e, OSError)):
            raise
        text = _one_line(str(e)) or type(e).__name__
        print(f"error: out of memory ({text}); allowed: smaller --sizes, or a machine with more free "
              "memory; rows measured before are kept" if memory else f"error: {text}", file=sys.stderr)
        return 2
