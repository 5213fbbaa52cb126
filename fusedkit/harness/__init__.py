"""The measuring harness: check, then time, then one result, every verdict reached in this
process, where the kernel never ran. Its files are its processes (docs/measuring.md)."""

from fusedkit.harness.budget import CPU_BUDGET_S
from fusedkit.harness.judge import classify, eager32, reference64, rel_error
from fusedkit.harness.measuring import CheckResult, Measurement, measure, pack, run_job, unpack
from fusedkit.harness.plans import Plan, candidate, plan
from fusedkit.harness.pool import WorkerDied
from fusedkit.harness.terms import (CANNOT_RUN, FAULT_CLASSES, MALFORMED, MAX_SEEDS, REP_MS, SEEDS,
                                    WARMUP_MS, Build)
from fusedkit.precision import TIERS

__all__ = ["CANNOT_RUN", "CPU_BUDGET_S", "FAULT_CLASSES", "MALFORMED", "MAX_SEEDS", "REP_MS",
           "SEEDS", "TIERS", "WARMUP_MS", "Build", "CheckResult", "Measurement", "Plan",
           "WorkerDied", "candidate", "classify", "eager32", "measure", "plan",
           "pack", "reference64", "rel_error", "run_job", "unpack"]
