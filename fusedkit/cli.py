"""``python -m fusedkit``: info, report, bench, ceilings, export and readme from the command line.

Bad input and faults (an unwritable or corrupt records file, Ctrl-C, SIGTERM, SIGHUP) get one line
on stderr naming the option, the value and what is allowed, and exit status 2; never a
traceback from deep inside a kernel (set FUSEDKIT_DEBUG=1 to see one). Everything that
can be refused is refused before anything is measured, and a command stopped by a signal
says what it kept (:mod:`fusedkit.interrupts`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn

from fusedkit import interrupts
from fusedkit.check import MAX_SEEDS
from fusedkit.measure import SEEDS
from fusedkit.problems import Problem, SizeError

if TYPE_CHECKING:
    import pandas as pd

    from fusedkit import records


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
    from fusedkit.report import ParametersError, build_reports, notebook_paths, sizes_line  # noqa: PLC0415

    notebooks: list[Path] = []
    for p in map(Path, args.notebooks):
        if p.is_dir():   # a folder: its numbered notebooks, as the default is notebooks/'s
            try:
                notebooks += notebook_paths(p)
            except FileNotFoundError:
                raise SizeError(f"notebook={str(p)!r} is a folder without numbered notebooks "
                                "(NN_name.ipynb); allowed: notebook files, or a folder of them") from None
        elif p.is_file():
            notebooks.append(p)
        else:
            what = "is not a file" if p.exists() else "does not exist"
            raise SizeError(f"notebook={str(p)!r} {what}; allowed: a notebook file or a folder of "
                            "them (default: every notebooks/NN_*.ipynb)")
    seen: dict[str, Path] = {}
    for p in notebooks:   # the same file twice would run twice and write one report
        first = seen.setdefault(os.path.realpath(p), p)
        if first is not p:
            same = "" if str(first) == str(p) else f" ({str(first)!r} is the same file)"
            raise SizeError(f"notebook={str(p)!r} is given twice{same}; allowed: each notebook once")
    sizes: dict[str, dict[str, int]] = {}
    for key, values in args.sizes or []:
        if key in sizes:
            raise SizeError(f"--sizes names {key} twice; allowed: each problem once, e.g. "
                            f"--sizes {key}:batch_size=64,... (one --sizes per problem)")
        sizes[key] = values
    with _option("--out", args.out):   # the reports and the index are written there
        try:
            results = build_reports(args.out, notebooks or None, timeout=args.timeout, sizes=sizes)
        except ParametersError as e:
            raise ParametersError(f"--sizes: {e}") from None
    for r in results:
        status = "ok" if r.ok else f"FAILED: {r.error}"
        where = f"  {sizes_line(r.sizes)}" if r.sizes else ""
        print(f"{r.html}  ({r.seconds:.0f} s)  {status}{where}")
    print(f"index: {Path(args.out) / 'index.html'}")
    return 0 if all(r.ok for r in results) else 1


def _bench(args: argparse.Namespace) -> int:
    # Everything that can be refused is refused here, before the first (slow) measurement.
    with _before_measuring():
        import pandas as pd  # noqa: PLC0415

        from fusedkit import problems, records  # noqa: PLC0415

        problem = problems.get(args.problem)
        names = args.variants   # a list of distinct names, or None for all (see _variant_names)
        if names:
            problem.ladder(names)   # validate names before any work
        base = problems.parse_sizes(",".join(args.sizes or []))
        sizes = problem.sizes(base)
        axes = None
        if args.sweep:
            from fusedkit.sweep import parse_sweep  # noqa: PLC0415

            axes = parse_sweep(problem, args.sweep)
        import torch  # noqa: PLC0415

        # A CPU run records to an ignored local file unless told otherwise (data/README.md).
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        path = records.path_for(device, args.records)
        with _option("--records", args.records):
            records.preflight(path)
        _refuse_unrunnable(problem, names, sizes)
        if axes is None:
            problem.check_runnable(sizes, device)   # a sweep checks each point (skipping those too big)
        # The run's context now, so that a stopped bench counts the rows of its own run (another
        # bench may be appending to the same file).
        ctx = records.RunContext.collect()
    try:
        if axes is not None:
            return _sweep(args, problem, names, axes, base, path, ctx)
        from fusedkit.runner import run_ladder  # noqa: PLC0415
        # A progress bar is for a person at a terminal; in a log or a pipe it is noise on stderr.
        df = run_ladder(problem, sizes, variants=names, seeds=args.seeds, rep_ms=args.rep_ms,
                        records_path=path, progress=sys.stderr.isatty(), ctx=ctx,
                        clocks_beside=True)
    except KeyboardInterrupt as e:
        # Each row was appended as it was measured, so what finished is on disk: say so.
        how = interrupts.signal_name(e)
        raise interrupts.Interrupted(_kept(path, ctx.run_id, how), how) from None
    cols = [c for c in ("variant", "tier", "median_ms", "p10_ms", "p90_ms", "tflops", "gbps",
                        "pct_of_floor", "pct_of_measured", "pct_of_copy", "rel_error", "speedup")
            if c in df]
    timed = df[df["median_ms"].notna()] if "median_ms" in df else df.iloc[0:0]
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(timed[cols].to_string(index=False) if not timed.empty else "no variant ran")
    return _failures(df)


def _failures(df: pd.DataFrame) -> int:
    """Exit status of a bench: 1 when a variant was caught by a check (each named on stderr,
    none recorded) or nothing was measured, else 0."""
    caught = df[df["failure"].notna()] if "failure" in df else df.iloc[0:0]
    for _, r in caught.iterrows():
        print(f"not recorded: {r['variant']} at {r['sizes']}: {r['failure']}", file=sys.stderr)
    if df.empty:
        print("error: nothing was measured (see the skipped notes above)", file=sys.stderr)
    return 1 if df.empty or not caught.empty else 0


def _sweep(args: argparse.Namespace, problem: Problem, names: list[str] | None,
           axes: dict[str, list[int]], base: dict[str, int], path: Path,
           ctx: records.RunContext) -> int:
    """``bench --sweep``: the ladder at every size point, recorded as one series."""
    import pandas as pd  # noqa: PLC0415

    from fusedkit.sweep import run_sweep  # noqa: PLC0415

    res = run_sweep(problem, axes, base, variants=names, seeds=args.seeds, rep_ms=args.rep_ms,
                    records_path=path, progress=sys.stderr.isatty(), ctx=ctx)
    cols = [c for c in ("variant", *axes, "tier", "median_ms", "tflops", "gbps", "pct_of_floor",
                        "pct_of_measured", "rel_error", "speedup") if c in res.rows]
    rows = res.rows
    timed = rows[rows["median_ms"].notna()] if "median_ms" in rows else rows.iloc[0:0]
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(timed[cols].to_string(index=False) if not timed.empty else "no variant ran")
    print(f"series {res.run_id}: {res.points} points run, {len(res.skipped)} skipped, "
          f"{len(timed)} rows recorded")
    return _failures(res.rows)


def _ceilings(args: argparse.Namespace) -> int:
    """``ceilings``: the device's own ceilings in a run of their own, recorded; a table after."""
    import pandas as pd  # noqa: PLC0415

    from fusedkit import problems, records  # noqa: PLC0415

    keys = problems.names()
    if args.problem != "all":
        try:
            keys = [problems.get(args.problem).key]
        except ValueError:
            raise ValueError(f"--problem={args.problem!r} is not known; allowed: "
                             f"{', '.join(problems.names())} or all") from None
    import torch  # noqa: PLC0415

    from fusedkit import ceilings, device  # noqa: PLC0415

    if not torch.cuda.is_available():
        raise ValueError("ceilings are measured on a GPU and no CUDA GPU is visible here; the "
                         "recorded ones are in data/records.csv (fusedkit.ceilings.newest)")
    path = records.path_for(torch.device("cuda"), args.records)
    with _option("--records", args.records):
        records.preflight(path)
        got = device.record_run([problems.get(k) for k in keys], path)
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(ceilings.table(got).to_string(index=False))
    return 0


def _export(args: argparse.Namespace) -> int:
    """``export``: one variant as a KernelBench solution file, or every variant of a problem."""
    from fusedkit import export, problems  # noqa: PLC0415

    problem = problems.get(args.problem)
    if (args.variant is None) == (args.all is None):
        raise ValueError("export needs exactly one of --variant NAME (with -o FILE) or --all DIR")
    if args.all is not None:
        if args.output is not None:
            raise ValueError(f"-o={args.output!r} goes with --variant; --all writes one file per "
                             "variant into its folder")
        with _option("--all", args.all):
            paths = export.export_all(problem, args.all, force=args.force)
    else:
        if args.output is None:
            raise ValueError(f"--variant={args.variant!r} needs -o FILE, the solution file to write")
        with _option("-o", args.output):
            paths = [export.export_variant(problem, args.variant, args.output, force=args.force)]
    for path in paths:
        print(path)
    return 0


def _readme(args: argparse.Namespace) -> int:
    """``readme``: the README's measured-state block regenerated from the records
    (``--check``: only say whether it is current; exit status 1 when it is not)."""
    from fusedkit import readme  # noqa: PLC0415

    path = Path(args.readme)
    if not path.is_file():
        raise FileNotFoundError(f"--readme={args.readme!r} is not a file; allowed: the README.md to update")
    if args.records is not None and not Path(args.records).is_file():
        raise FileNotFoundError(f"--records={args.records!r} is not a file; allowed: a records CSV "
                                "(default data/records.csv)")
    if args.check:
        if readme.current_block(path.read_text(encoding="utf-8")) == readme.measured_state(args.records):
            print(f"{path}: the measured state is current")
            return 0
        print(f"{path}: the measured state is stale; run python -m fusedkit readme", file=sys.stderr)
        return 1
    with _option("--readme", args.readme):
        changed = readme.update(path, args.records)
    print(f"{path}: measured state {'updated' if changed else 'already current'}")
    return 0


def _refuse_unrunnable(problem: Problem, names: list[str] | None, sizes: dict[str, int]) -> None:
    """Refuse a bench in which no asked-for variant can run here: every one needs a GPU and none
    is visible, or every one needs a Hopper (sm_90) GPU and this GPU is another.

    The runner would skip them all and report nothing measured; a mix of runnable and
    unrunnable variants still runs, the runner noting each one it skips.
    """
    import torch  # noqa: PLC0415

    from fusedkit.check import device_refusal  # noqa: PLC0415

    chosen = problem.ladder(names)
    if not chosen:
        return
    slugs = ", ".join(v.slug for v in chosen)
    if torch.cuda.is_available():
        gpu = torch.device("cuda")
        reasons = [device_refusal(problem, v, sizes, gpu) for v in chosen]
        if all(reasons):
            allowed = ", ".join(v.slug for v in problem.ladder()
                                if not device_refusal(problem, v, sizes, gpu))
            raise ValueError(f"nothing ran: {slugs}: {'; '.join(dict.fromkeys(reasons))}; allowed here "
                             f"(--variants): {allowed or 'none'}")
        return
    if not all(v.needs_gpu for v in chosen):
        return
    cpu = ", ".join(v.slug for v in problem.ladder() if not v.needs_gpu)
    raise ValueError(f"nothing ran: {slugs} need{'s' if len(chosen) == 1 else ''} a CUDA GPU and "
                     f"none is visible; allowed here (--variants): {cpu or 'none'}")


def _count_rows(path: Path, run_id: str) -> int | None:
    """Rows of run ``run_id`` in the records file (0 if missing), or None if it cannot be read now."""
    from fusedkit import records  # noqa: PLC0415

    try:
        return int((records.read_records(path)["run_id"] == run_id).sum())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _before_measuring() -> Iterator[None]:
    """A bench's checks and set-up: a signal within says that nothing was measured or written."""
    try:
        yield
    except KeyboardInterrupt as e:
        how = interrupts.signal_name(e)
        raise interrupts.Interrupted(f"{interrupts.stopped_by(how)} before the first measurement: "
                                     "nothing was measured or written", how) from None


def _kept(path: Path, run_id: str, signal_name: str = "SIGINT") -> str:
    """What a bench stopped by ``signal_name`` says: how many rows of its own run (``run_id``;
    not another bench's appending to the same file) the records kept."""
    how = interrupts.stopped_by(signal_name)
    n = _count_rows(path, run_id)   # appends are atomic, so the file holds whole rows only
    if n is None:
        return f"{how}: rows measured before the interrupt are kept in {path}"
    return (f"{how}: {n} row{'' if n == 1 else 's'} measured before the interrupt "
            f"{'is' if n == 1 else 'are'} kept in {path}")


@contextlib.contextmanager
def _option(option: str, value: str | None) -> Iterator[None]:
    """Name ``option`` in a fault about the path it gave: an OSError or a records fault raised
    inside is raised again as the same kind of error, its one line starting ``--out: `` and
    naming the path, so that it says which option to change (``value`` None: the default path,
    named as it is)."""
    from fusedkit.records import RecordsError  # noqa: PLC0415 - pandas

    try:
        yield
    except (OSError, RecordsError) as e:
        if value is None:
            raise
        text = (f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename and e.strerror
                else _one_line(str(e)))
        if value not in text:
            text = f"{value}: {text}"
        raise type(e)(f"{option}: {text}") from None


# --- argument types: each refuses a bad value with one line naming option, value and what is allowed

def positive_int(option: str, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= 1 (and <= ``maximum``), else one line naming ``option``."""
    allowed = f"an integer from 1 to {maximum}" if maximum else "an integer >= 1"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option}={text!r} is not an integer; "
                                             f"allowed: {allowed}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{option}={value} is too small; allowed: {allowed}")
        if maximum and value > maximum:
            raise argparse.ArgumentTypeError(f"{option}={value} is too large; allowed: {allowed}")
        return value
    return parse


def positive_float(option: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        allowed = "a finite number > 0"
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option}={text!r} is not a number; "
                                             f"allowed: {allowed}") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"{option}={text.strip()} is out of range; "
                                             f"allowed: {allowed}")
        return value
    return parse


def _comma_list(option: str, what: str, allowed: str) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list of non-empty items, each once. An empty list
    must not mean "all" or "the defaults" by accident: it is refused, naming ``option``."""
    def parse(text: str) -> list[str]:
        items = [n.strip() for n in text.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError(f"{option} is empty ({text!r} names no {what}); "
                                             f"allowed: {allowed}")
        if "" in items:
            raise argparse.ArgumentTypeError(f"{option}={text!r}: {what} {items.index('') + 1} is "
                                             f"empty; allowed: {allowed}")
        twice = next((n for i, n in enumerate(items) if n in items[:i]), None)
        if twice:
            raise argparse.ArgumentTypeError(f"{option}={text!r} names {twice} twice; "
                                             f"allowed: {allowed}")
        return items
    return parse


_variant_names = _comma_list("--variants", "name", "comma-separated variant names, each once, e.g. "
                             "eager,compile (omit --variants for all)")
_size_items = _comma_list("--sizes", "size", "comma-separated name=value sizes, each once, e.g. "
                          "batch_size=1024,in_features=8192 (omit --sizes for KernelBench's)")


_PROBLEM_SIZES = ("PROBLEM:NAME=VALUE,... or PROBLEM:PRESET (presets: {presets}), e.g. "
                  "p12:batch_size=64,in_features=128 or p45:small")


def _problem_sizes(text: str) -> tuple[str, dict[str, int]]:
    """An argparse type for ``report --sizes``: ``PROBLEM:SPEC``, SPEC being a preset's name, or
    NAME=VALUE sizes, or both (the preset first, then overrides). Returns the problem's key and
    all its sizes, validated by the problem's own rules (:meth:`Problem.sizes`); any fault is one
    line naming ``--sizes``, the value and what is allowed."""
    from fusedkit import problems  # noqa: PLC0415
    from fusedkit.problems import presets  # noqa: PLC0415

    allowed = _PROBLEM_SIZES.format(presets=", ".join(presets.names()))
    option = f"--sizes={text!r}"
    if not text.strip():
        raise argparse.ArgumentTypeError(f"--sizes is empty ({text!r} names no problem); "
                                         f"allowed: {allowed}")
    name, sep, spec = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"{option} names no problem before a colon; allowed: {allowed}")
    try:
        problem = problems.get(name.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{option}: problem {name.strip()!r} is not known; allowed: "
                                         f"{' or '.join(problems.names())} before the colon") from None
    items = [i.strip() for i in spec.split(",")]
    if not any(items):
        raise argparse.ArgumentTypeError(f"{option} names no sizes for {problem.key}; allowed: {allowed}")
    if "" in items:
        raise argparse.ArgumentTypeError(f"{option}: item {items.index('') + 1} is empty; "
                                         f"allowed: {allowed}")
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
    """An argparse type for a path: not empty (which would mean the current folder by
    accident). What the path must be is checked where it is used, and a fault there names
    ``option`` (:func:`_option`)."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{option}={text!r} is empty; allowed: a path")
        return text
    return parse



def _one_line(message: str) -> str:
    """A message as one line: a multi-line one from a library would break 'one line on stderr'."""
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


class _Once(argparse.Action):
    """Store an option's value, converted by ``convert`` (an argparse type), refusing the option
    given a second time: argparse would keep the last value and drop the first without a word
    (``--records a.csv ... --records b.csv`` appending to b.csv only)."""

    def __init__(self, option_strings: list[str], dest: str,
                 convert: Callable[[str], object] | None = None, **kwargs: object) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.convert = convert

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        given = namespace.__dict__.setdefault("_given", {})   # the text each option came with
        if self.dest in given:
            raise argparse.ArgumentError(self, f"{'/'.join(self.option_strings)} is given twice ({given[self.dest]!r}, "
                                               f"then {values!r}); allowed: it once")
        given[self.dest] = values
        try:
            value = self.convert(values) if self.convert else values   # type: ignore[arg-type]
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentError(self, str(e)) from None
        setattr(namespace, self.dest, value)


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one ``error: ...`` line and exit status 2 (no usage block),
    where an option that takes a value may be given once (:class:`_Once`), and where an unknown
    option before the command is named as such (not as the command's missing option)."""

    def add_argument(self, *names: str, **kwargs: object) -> argparse.Action:
        if names and names[0].startswith("-") and kwargs.get("action", "store") == "store":
            kwargs["action"], kwargs["convert"] = _Once, kwargs.pop("type", None)
        return super().add_argument(*names, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 - argparse's
        if self._subparsers is not None:   # the top level: only -h/--help may come before the command
            words = sys.argv[1:] if args is None else list(args)
            for word in words:
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
    from fusedkit.problems import presets  # noqa: PLC0415
    p = Parser(prog="python -m fusedkit", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="device, versions and the mode the workbook runs in").set_defaults(fn=_info)
    r = sub.add_parser("report", help="execute the notebooks and write HTML reports")
    r.add_argument("--out", type=_path("--out"), default="reports",
                   help="output folder, created if missing (default: reports)")
    r.add_argument("--timeout", type=positive_int("--timeout"), default=600,
                   help="seconds allowed per cell (>= 1; default 600)")
    r.add_argument("--sizes", type=_problem_sizes, action="append", metavar="PROBLEM:SIZES",
                   help="run the notebooks at these sizes of PROBLEM instead of KernelBench's: "
                        "NAME=VALUE,... (e.g. p12:batch_size=64,in_features=128), a preset "
                        f"({'; '.join(f'{q.name}: {q.label}' for q in presets.PRESETS)}; e.g. "
                        "p12:small), or a preset then overrides (p45:small,batch_size=64); "
                        "repeat for each problem. Each "
                        "notebook's pickers start there (the sizes are injected after its "
                        "parameters cell) and its report and index line name them")
    r.add_argument("notebooks", nargs="*", help="notebooks to run (default: all)")
    r.set_defaults(fn=_report)
    b = sub.add_parser("bench", help="check and time a problem's ladder; append to data/")
    b.add_argument("--problem", required=True, help="p12 or p45")
    b.add_argument("--sizes", type=_size_items,
                   help="e.g. batch_size=1024,in_features=8192 (default: KernelBench's)")
    b.add_argument("--variants", type=_variant_names,
                   help="comma-separated variant names, each once (default: all)")
    b.add_argument("--seeds", type=positive_int("--seeds", MAX_SEEDS), default=SEEDS,
                   help=f"builds checked per variant, each on two inputs (1 to {MAX_SEEDS}; "
                        f"default {SEEDS})")
    b.add_argument("--rep-ms", type=positive_float("--rep-ms"), default=500.0,
                   help="timing budget per variant, ms (> 0)")
    b.add_argument("--records", type=_path("--records"),
                   help="records CSV (default: data/records.csv on a GPU, the ignored "
                        "data/local/records.csv without one)")
    b.add_argument("--sweep", action="append", metavar="DIM=VALUES",
                   help="run the ladder at several sizes as one series, e.g. batch_size=1,16,128 or "
                        "batch_size=64..16384x2 (or lo..hi+step); repeat for a cross product. Rows "
                        "are recorded as each variant finishes; a new run is a new series (no resume)")
    b.set_defaults(fn=_bench)
    c = sub.add_parser("ceilings", help="measure the GPU's own ceilings (copy, L2 and DRAM reads, "
                       "cuBLAS at each problem's GEMM shapes) and record them")
    c.add_argument("--problem", default="all", help="p12, p45 or all (default): whose GEMM shapes")
    c.add_argument("--records", type=_path("--records"),
                   help="records CSV (default: data/records.csv); the clocks go beside it")
    c.set_defaults(fn=_ceilings)
    e = sub.add_parser("export", help="write a kernel as a self-contained KernelBench solution (ModelNew)")
    e.add_argument("--problem", required=True, help="p12 or p45")
    e.add_argument("--variant", help="the variant to export (one of the problem's kernels, no baseline)")
    e.add_argument("-o", "--output", type=_path("-o"),
                   help="the solution file to write (with --variant)")
    e.add_argument("--all", metavar="DIR", type=_path("--all"),
                   help="write every kernel of the problem into DIR, one file each")
    e.add_argument("--force", action="store_true",
                   help="overwrite existing files (never one marked read-only)")
    e.set_defaults(fn=_export)
    m = sub.add_parser("readme", help="regenerate README.md's measured state from data/records.csv")
    m.add_argument("--check", action="store_true",
                   help="only check that the README is current (exit status 1 when stale)")
    m.add_argument("--records", type=_path("--records"), help="records CSV (default: data/records.csv)")
    m.add_argument("--readme", default=str(Path(__file__).resolve().parent.parent / "README.md"),
                   help="the README to update (default: the repository's README.md)")
    m.set_defaults(fn=_readme)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit status: 0 done, 1 a report failed, 2 refused or interrupted
    (Ctrl-C, SIGTERM or SIGHUP: :func:`fusedkit.interrupts.raising`)."""
    debug = bool(os.environ.get("FUSEDKIT_DEBUG"))
    try:
        # The command exits after a signal: a second one then changes nothing (in a test or a
        # script that calls main, the handlers from before are put back).
        with interrupts.raising(keep_ignoring=interrupts.launched_as_command()):
            return _run(argv)
    except KeyboardInterrupt as e:
        if debug:
            raise
        with contextlib.suppress(OSError):   # after a SIGHUP the terminal may be gone
            print(_one_line(str(e)) or interrupts.stopped_by(interrupts.signal_name(e)),
                  file=sys.stderr)
        return interrupts.EXIT_STATUS


def _run(argv: list[str] | None) -> int:
    """Parse ``argv`` and run its command; a refusal is one ``error:`` line and exit status 2."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:   # --help (0), or a usage error already printed as one line (2)
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    debug = bool(os.environ.get("FUSEDKIT_DEBUG"))
    try:
        return args.fn(args)
    except (ValueError, TypeError, OSError) as e:
        # Our own errors (SizeError, RecordsError, ...) are one line naming the parameter;
        # OSError covers a missing, read-only or folder path. Print just that, unless asked.
        if debug:
            raise
        print(f"error: {_one_line(str(e)) or type(e).__name__}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as e:
        # The budget counts the harness's copies, but a machine (or a ulimit) may hold less.
        if debug or not _out_of_memory(e):
            raise
        print(f"error: out of memory ({_one_line(str(e)) or type(e).__name__}); allowed: smaller "
              "--sizes, or a machine with more free memory; rows measured before are kept",
              file=sys.stderr)
        return 2


def _out_of_memory(e: BaseException) -> bool:
    """True for a failed allocation: Python's MemoryError, torch's on a CPU or a GPU."""
    import torch  # noqa: PLC0415

    return (isinstance(e, (MemoryError, torch.OutOfMemoryError))
            or "can't allocate memory" in str(e) or "out of memory" in str(e).lower())
