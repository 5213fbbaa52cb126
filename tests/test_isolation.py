"""The kernel runs in a worker process; the verdict is reached in the caller's, where it never ran
(fusedkit.isolation): a crash or a hang is one line and the caller goes on, and a patch in the
worker that no snapshot sees cannot reach a reference."""

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import adversarial as bad
from fusedkit import check, isolation, measure, problems

REPO = Path(__file__).resolve().parent.parent
P12 = problems.get("p12")
SMALL = P12.sizes(batch_size=32, in_features=48, out_features=40)
FAST = dict(seeds=2, warmup_ms=2, rep_ms=10)
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def run(builder, device="cpu", **kw):
    return measure.measure(P12, builder, SMALL, device=device, name=builder.__name__,
                           **{**FAST, **kw})


def one_line(m, start):
    assert not m.ok and not m.timed, m.summary()
    assert m.failure.startswith(start), m.failure
    assert "\n" not in m.failure and "Traceback" not in m.failure
    return m.failure


def test_a_segfault_is_a_verdict_and_the_caller_goes_on():
    line = one_line(run(bad.segfaults), isolation.CRASHED)
    assert re.fullmatch(r"the kernel crashed: the process ended with SIGSEGV \(Segmentation fault\), "
                        r"during call 1 at batch_size=32,in_features=48,out_features=40", line), line
    assert run(bad.forgets_the_bias).failure.startswith(check.WRONG)   # a fresh worker, at once
    assert measure.measure(P12, "eager", SMALL, device="cpu", **FAST).timed


def test_a_call_that_never_returns_is_a_verdict_within_its_limit():
    t0 = time.monotonic()
    line = one_line(run(bad.hangs, call_timeout_s=1.5), isolation.HUNG)
    assert time.monotonic() - t0 < 15
    assert line == ("the kernel hung: call 1 at batch_size=32,in_features=48,out_features=40 did not "
                    "return within 1.5 s (call_timeout_s sets the limit)")


def test_a_kernel_that_hangs_only_when_timed_is_refused_in_one_line():
    m = run(bad.hangs_when_timed, call_timeout_s=1.5, seeds=1)
    assert m.check.ok, m.summary()   # right on its checked calls
    assert re.fullmatch(r"the kernel hung: timed call \d+ did not return within 1\.5 s "
                        r"\(call_timeout_s sets the limit\)", m.refused), m.refused
    assert not m.timed


def test_the_default_limit_is_shown_and_bad_limits_are_one_line():
    assert isolation.CALL_TIMEOUT_S == 60.0 and "60 s" in measure.measure.__doc__
    for bad_value, error in ((0, ValueError), (float("nan"), ValueError), ("1", TypeError),
                             (True, TypeError)):
        with pytest.raises(error, match=r"^call_timeout_s=.*allowed: a finite number of seconds > 0$"):
            run(bad.forgets_the_bias, call_timeout_s=bad_value)


def test_a_patch_no_snapshot_watches_cannot_reach_the_reference():
    """Rebinding the F that nn.Linear calls turns every Linear of its process to bf16. The
    snapshot does not see it; in one process the float64 reference would be computed through it
    and agree. The reference is computed here, where the kernel never ran: a wrong result."""
    import torch.nn.modules.linear as lin

    before = lin.F
    line = one_line(run(bad.rebinds_what_linear_calls), check.WRONG)
    assert "more than fp32 arithmetic can explain" in line
    assert lin.F is before and lin.F is torch.nn.functional   # nothing changed in this process
    assert measure.measure(P12, "eager", SMALL, device="cpu", **FAST).tier == "reference"


def test_every_candidate_runs_in_a_process_of_its_own(tmp_path):
    """Never in the caller's process, and never where another candidate ran: the builds of one
    candidate, checked and timed, share a worker; the next candidate gets another."""
    tally = bad.Tally(tmp_path / "pids")
    for _ in range(2):
        assert run(bad.reports_its_process(tally)).timed
    pids = tally.counts()
    first, second = sorted(pids, key=lambda p: open(tally.path).read().index(p))
    assert str(os.getpid()) not in pids
    assert pids[first] == pids[second] == FAST["seeds"] + 2   # its checked builds, odd shape, timed


def test_a_builder_that_cannot_travel_is_one_line():
    lock = threading.Lock()

    def holds_a_lock(model):
        with lock:
            return lambda x: model(x)
    with pytest.raises(TypeError, match=r"^build='holds_a_lock' cannot be sent to the worker process "
                                        r"that runs kernels \(TypeError: .*lock.*\); build it from "
                                        r"module-level functions and plain data$"):
        run(holds_a_lock)


def test_a_notebook_kernel_travels_with_its_source_lines():
    """A function defined in no file (a cell) goes by value; an error in it names its line."""
    source = "def build(model):\n    def run(x):\n        return undefined_name + x\n    return run\n"
    name = "<a notebook cell>"
    import linecache
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    namespace = {}
    exec(compile(source, name, "exec"), namespace)
    m = run(namespace["build"])
    assert m.failure == ("raised an error: call 1 at batch_size=32,in_features=48,out_features=40 "
                         "raised NameError: name 'undefined_name' is not defined"), m.failure


def _fresh_python(script: str) -> subprocess.CompletedProcess:
    """``script`` in a Python process of its own (its own fork server), the repository on its path."""
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc (Linux)")
def test_the_fork_server_checks_for_cuda_through_nvml():
    """Every worker is forked from the fork server, so the server must hold no CUDA runtime: it
    checks for CUDA through NVML (PYTORCH_NVML_BASED_CUDA_CHECK=1, in its environment from its
    start). Started before the variable was set, it made CUDA's runtime while importing, and on the
    H200 every worker failed with "Cannot re-initialize CUDA in forked subprocess" (a CPU never
    shows it: there is no CUDA to make)."""
    done = _fresh_python(
        "import psutil\nfrom fusedkit import isolation\n"
        "w = isolation.Worker.start('cpu'); w.wait_ready(120)\n"
        "server = [p for p in psutil.Process().children() "
        "if 'multiprocessing.forkserver' in ' '.join(p.cmdline())][0]\n"
        "print(server.environ().get('PYTORCH_NVML_BASED_CUDA_CHECK'))\nw.stop()\n")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1"], done.stdout


def test_a_worker_that_cannot_start_says_why_in_one_line():
    """On the H200 a worker that could not make its CUDA context printed its own traceback, and
    the caller said "the worker process for cuda did not start ()", with no reason, as a
    RuntimeError (a traceback on the command line). cuda:99 exists on no machine."""
    done = _fresh_python(
        "from fusedkit import isolation\n"
        "try:\n    isolation.Worker.start('cuda:99').wait_ready(120)\n"
        "except ChildProcessError as e:\n    print(e)\n")
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    line = done.stdout.strip()
    assert "\n" not in line and line.startswith("the worker process for cuda:99 did not start: "), line
    assert "Error" in line.split("did not start: ")[1], line   # the reason, by its exception's name


@pytest.mark.gpu
@GPU
def test_an_illegal_memory_access_is_a_verdict_and_the_callers_gpu_goes_on():
    line = one_line(run(bad.reads_out_of_bounds_on_the_gpu, "cuda"), isolation.CRASHED)
    assert "illegal memory access" in line and "during call 1" in line, line
    torch.ones(4, device="cuda").sum().item()   # this process's CUDA context is untouched
    assert measure.measure(P12, "eager", SMALL, device="cuda", **FAST).timed


@pytest.mark.gpu
@GPU
def test_on_the_gpu_a_patched_operator_and_an_unwatched_one_are_both_caught():
    assert one_line(run(bad.patches_linear, "cuda"), check.PATCHED).startswith(
        "patched torch.nn.functional.linear during the build")
    assert "more than fp32 arithmetic can explain" in one_line(run(bad.rebinds_what_linear_calls, "cuda"),
                                                               check.WRONG)
    assert one_line(run(bad.segfaults, "cuda"), isolation.CRASHED)
