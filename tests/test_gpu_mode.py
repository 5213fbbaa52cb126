"""What differs when Triton compiles for a GPU instead of interpreting, shown on a CPU: each test
runs Python in a subprocess with ``TRITON_INTERPRET=0`` (Triton's GPU mode; nothing is launched,
so no GPU is needed), where this suite's own process interprets."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def gpu_mode(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run Python with ``args`` with Triton in its GPU mode, this folder's modules importable."""
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


# A notebook cell: its code is in no file, only in linecache (as IPython keeps it), and its
# kernels are a @triton.jit helper, a @triton.jit kernel calling it, and an autotuned kernel.
CELL = '''
import triton, triton.language as tl
from fusedkit.exercises.p12_epilogue import epilogue_kernel as solution   # one from a module

@triton.jit
def _twice(v):
    return v * 2.0

@triton.jit
def epilogue(y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, _twice(tl.load(y_ptr + i, mask=i < n)), mask=i < n)

@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def tuned(y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, _twice(tl.load(y_ptr + i, mask=i < n)), mask=i < n)

def build(model):
    def fn(x):
        epilogue[(1,)](x, x.numel(), BLOCK=128)
        tuned[(1,)](x, x.numel())
        return x if solution is not None else None   # a module's kernel travels with the cell's

    return fn
'''

SEND = '''
import json, linecache, sys
from fusedkit import harness, problems
from test_gpu_mode import seen_in_the_worker
cell, name = sys.argv[1], "/tmp/ipykernel_4242/2718281828.py"   # a cell's name, no such file
linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
ns = {"__name__": "__main__"}
exec(compile(cell, name, "exec"), ns)
print(json.dumps([type(ns["epilogue"]).__name__, type(ns["tuned"]).__name__,
                  harness.run_job(seen_in_the_worker, problems.get("p12"), ns["build"], "cpu")]))
'''


def seen_in_the_worker(build, report, problem_key, device):
    """What a worker, which never saw the cell, makes of its builder (run there by harness.run_job)."""
    fn = build(None)
    ep, tuned, twice, solution = (fn.__globals__[n] for n in ("epilogue", "tuned", "_twice", "solution"))
    return dict(kinds=[type(k).__name__ for k in (ep, tuned, tuned.fn, twice, solution)],
                first_line=ep._src.splitlines()[0], configs=[c.kwargs for c in tuned.configs],
                helper=type(ep.fn.__globals__["_twice"]).__name__)


def test_triton_kernels_reach_the_worker_in_gpu_mode():
    # Compiled for a GPU, a @triton.jit kernel holds a lock: once, the measuring path refused
    # every learner's Triton kernel ("cannot pickle '_thread.RLock' object"), and the
    # interpreter, where it pickles, hid that from every CPU run.
    got = gpu_mode("-c", SEND, CELL)
    assert got.returncode == 0, got.stderr[-2000:]
    here_ep, here_tuned, there = json.loads(got.stdout.splitlines()[-1])
    assert (here_ep, here_tuned) == ("JITFunction", "Autotuner")   # the GPU mode's own kinds
    assert there == dict(kinds=["JITFunction", "Autotuner", "JITFunction", "JITFunction", "JITFunction"],
                         first_line="def epilogue(y_ptr, n, BLOCK: tl.constexpr):",
                         configs=[{"BLOCK": 64}, {"BLOCK": 128}], helper="JITFunction")


def test_the_suite_collects_in_gpu_mode():
    # Once, collecting tests/test_check.py asked the interpreter's cost model for a Triton step,
    # which raises outside the interpreter: `make test` stopped at collection on a GPU machine.
    # (Nothing runs, so no assert needs pytest's rewriting: that halves the time.)
    got = gpu_mode("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--assert=plain")
    assert got.returncode == 0, (got.stdout + got.stderr)[-3000:]
    assert "error" not in got.stdout.splitlines()[-1], got.stdout[-2000:]
