"""What one notebook step does after its explanation: check the kernel and time it where
this machine can, and show the recorded GPU numbers next to whatever ran here.

Live numbers and recorded numbers are always labelled as such, with the recorded run's
device, date and commit; nothing is shown without saying where it came from.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fusedkit import results
from fusedkit.kernels import step_path
from fusedkit.measure import SEEDS, measure
from fusedkit.mode import Mode
from fusedkit.problems import Problem, Sizes, fmt_sizes


def header(source: str) -> str:
    """The three opening comment lines of a step's kernel file (what, what changed, bound)."""
    lines = kernel_path(source).read_text().splitlines()[:3]
    return "\n".join(line.lstrip("/# ").rstrip() for line in lines)


def small_sizes(problem: Problem) -> Sizes:
    """Odd, small sizes for checks in Triton's CPU interpreter (seconds, not hours)."""
    odd = [17, 33, 65, 19]
    return problem.sizes({d.name: odd[i % len(odd)] for i, d in enumerate(problem.dims)})


def run_step(problem: Problem, slug: str, sizes: Sizes, mode: Mode,
             recorded: pd.DataFrame) -> pd.DataFrame:
    """Check (and on a GPU, time) one variant; return live and recorded rows side by side.

    GPU: measured at ``sizes`` through :func:`fusedkit.measure.measure`. CPU: Triton steps are
    checked in the interpreter at :func:`small_sizes` through the same path; CUDA steps cannot
    run. Either way the recorded GPU row of ``slug`` (from :func:`fusedkit.results.latest_run`)
    is shown beside.
    """
    v = problem.variant(slug)
    rows = []
    if mode.gpu:
        rows.append(live_row(problem, slug, sizes, "cuda", label=f"live on {mode.device}"))
    elif v.triton:
        small = small_sizes(problem)
        m = measure(problem, v, small, device="cpu", time_it=False)
        rows.append({"source": "live in Triton's CPU interpreter (precision flags ignored: "
                               "this checks the logic, not the precision)",
                     "sizes": fmt_sizes(small),
                     "tier": (m.tier or "logic right") if m.ok else "FAILED: " + m.failure,
                     "rel. error": _sci(m.check.rel_error)})
    hit = recorded[recorded["variant"] == slug] if not recorded.empty else recorded
    if not hit.empty:
        r = hit.iloc[0]
        rows.append({"source": f"recorded: {results.run_label(recorded)}", "sizes": r["sizes"],
                     "tier": r["tier"], "rel. error": _sci(r["rel_error"]), "ms": r["median_ms"],
                     "TFLOP/s": r["tflops"], "% of floor": r["pct_of_floor"],
                     "speedup vs eager": r["speedup"]})
    elif not rows:
        rows.append({"source": "no GPU here and no recorded run of this step yet"})
    return pd.DataFrame(rows).set_index("source").T   # one column per source reads best


def live_row(problem: Problem, slug: str, sizes: Sizes, device: str, *, label: str,
             seeds: int = SEEDS) -> dict:
    """Measure ``slug`` at ``sizes`` on ``device`` (check, then time) as one table row."""
    m = measure(problem, slug, sizes, device=device, seeds=seeds)
    row = {"source": label, "sizes": fmt_sizes(sizes), "tier": m.tier,
           "rel. error": _sci(m.check.rel_error)}
    if not m.ok:
        row["tier"] = "FAILED: " + m.failure
        return row
    row.update({"ms": m.timing.median_ms, "timer": m.timing.timer, "TFLOP/s": m.tflops})
    return row


def _sci(value: float) -> str:
    """An error in scientific notation: the transposed step table holds mixed types, and pandas
    would print 4e-08 there as 0.0."""
    return f"{value:.2e}" if value == value else "not measured"


def kernel_path(source: str) -> Path:
    """Absolute path of a step's kernel file (``source`` as in ``Variant.source``), validated."""
    problem, _, filename = source.partition("/")
    return step_path(problem, filename)
