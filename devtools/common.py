"""What the probes share: their command-line options, and one recorded run that all the
measurements of a probe join, each checked and timed by :func:`fusedkit.harness.measure`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from fusedkit import records
from fusedkit.harness import SEEDS, WARMUP_MS, Measurement, measure
from fusedkit.device import time_fn
from fusedkit.harness.timing import Timing
from fusedkit.problems import Problem, SizeError, Sizes, fmt_sizes, parse_sizes
from fusedkit.roofline import achieved

LAUNCH = "launch alone, not checked"
"""How the notes of a launch timed on its own begin: a piece of a step, not the problem's output."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):   # one line, exit status 2 (argparse's usage block left out)
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive(kind: type, name: str) -> Callable[[str], float]:
    """An argparse type: a number of ``kind`` above 0, else one line naming ``name``."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"{name}={text!r}: expected a number > 0")
        return value
    return parse


def parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """A probe's parser: one ``error:`` line and exit status 2 on bad input, with ``--rep-ms``
    and ``--records`` as ``fusedkit bench`` takes them."""
    ap = _Parser(prog=f"python -m devtools.{prog}", description=doc.splitlines()[0])
    ap.add_argument("--rep-ms", type=positive(float, "--rep-ms"), default=200.0,
                    help="timing budget per measurement, ms (> 0)")
    ap.add_argument("--records", help="records CSV (default: data/records.csv on a GPU, the "
                                      "ignored data/local/records.csv without one)")
    return ap


def refused(prog: str, e: BaseException) -> int:
    """A fault before anything was measured (a records file that cannot be written): one line
    on stderr, exit status 2."""
    print(f"{prog}: error: {' '.join(str(e).split()) or type(e).__name__}", file=sys.stderr)
    return 2


class Probe:
    """One probe's run: every row it records shares one run id, so its ratios stay within it.

    Rows go to ``records_path`` (default :func:`fusedkit.records.path_for` the device), refused
    before anything is measured when it cannot be written. Each row's notes end with
    ``probe <name>`` and what the probe adds (a configuration, extra timings).
    """

    def __init__(self, name: str, *, rep_ms: float = 200.0, seeds: int = SEEDS,
                 records_path: str | Path | None = None, device: str | torch.device | None = None):
        self.name, self.rep_ms, self.seeds = name, rep_ms, seeds
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.path = records.path_for(self.device, records_path)
        records.preflight(self.path)
        self.ctx = records.RunContext.collect()
        self.rows: list[dict[str, str]] = []

    def measure(self, problem: Problem, what: object, sizes: Sizes, *, notes: Sequence[str] = (),
                time_it: bool = True, quiet: bool = False, **kw: object) -> Measurement | None:
        """:func:`fusedkit.harness.measure` of ``what`` (a variant's name or a builder; ``kw``:
        ``name``, ``precision``, ``triton``) at ``sizes``, its summary printed (``quiet``: only a
        failure) and, when it was timed clean, its row recorded with ``notes`` added. None, after
        one line, when it cannot run here (a GPU step on a CPU, a Hopper step elsewhere)."""
        label = kw.get("name") or (what if isinstance(what, str) else "candidate")
        try:
            m = measure(problem, what, sizes, device=self.device, seeds=self.seeds,
                        warmup_ms=min(WARMUP_MS, self.rep_ms), rep_ms=self.rep_ms,
                        time_it=time_it, **kw)
        except ValueError as e:
            print(f"{label}: not run: {' '.join(str(e).split())}", flush=True)
            return None
        if m.skipped:
            print(f"{label}: not run: {m.failure}", flush=True)
            return None
        if m.timed:
            row = m.row()
            row["notes"] = "; ".join([row["notes"], f"probe {self.name}", *notes])
            self._append(records.make_row(self.ctx, **row))
        if not quiet or not m.ok:
            rate = f", {m.tflops:.1f} TFLOP/s" if m.timed else ""
            print(f"{m.summary()}{rate} at {fmt_sizes(m.sizes)}", flush=True)
        return m

    def time_launch(self, problem: Problem, sizes: Sizes, variant: str, fn: Callable[[], object], *,
                    flop: float = 0.0, nbytes: float = 0.0, notes: Sequence[str] = ()) -> Timing:
        """Time one launch of a step alone (``fn()``, the harness's timer, an L2 flush before each
        call) and record it as ``variant``: it computes a piece, not the problem's output, so no
        check can judge it, and its notes say so. ``flop`` and ``nbytes`` give its TFLOP/s and GB/s."""
        t, _ = time_fn(fn, warmup_ms=min(WARMUP_MS, self.rep_ms), rep_ms=self.rep_ms,
                       device=self.device)
        tflops, gbps = achieved(flop, nbytes, t.median_ms)
        tflops, gbps = tflops or None, gbps or None
        self._append(records.make_row(
            self.ctx, problem=problem.key, sizes=fmt_sizes(problem.sizes(sizes)), variant=variant,
            timer=t.timer, median_ms=t.median_ms, p10_ms=t.p10_ms, p90_ms=t.p90_ms,
            repeats=t.repeats, tflops=tflops, gbps=gbps,
            notes="; ".join([LAUNCH, f"probe {self.name}", *notes])))
        return t

    def _append(self, row: dict[str, str]) -> None:
        records.append_rows(self.path, [row])   # at once: a probe that dies keeps what it finished
        self.rows.append(row)

    def done(self) -> None:
        """The closing line: how many rows this run recorded, and where."""
        print(f"# {self.name}: run {self.ctx.run_id}, {len(self.rows)} rows recorded in {self.path}",
              flush=True)


def sizes_arg(problem: Problem) -> Callable[[str], Sizes]:
    """An argparse type: ``--sizes`` as ``bench`` takes it (NAME=VALUE,...), validated by the
    problem, one line naming the option otherwise."""
    def parse(text: str) -> Sizes:
        try:
            return problem.sizes(parse_sizes(text))
        except SizeError as e:
            raise argparse.ArgumentTypeError(f"--sizes={text!r}: {e}") from None
    return parse
