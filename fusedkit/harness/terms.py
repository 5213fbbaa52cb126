"""The harness's vocabulary, which both sides of the process line import: the classes of fault
(each failure line starts with one), the limits, and the row digest a worker commits to."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from fusedkit.kernels import load_step

Build = Callable[[torch.nn.Module], Callable[..., torch.Tensor]]
"""A learner's kernel: ``build(model) -> fn``, where ``fn(*inputs)`` returns the output."""

# The classes of fault: the first words of each failure line ("<class>: what was seen").
CRASHED = "the kernel crashed"
HUNG = "the kernel hung"
MALFORMED = "the kernel's process sent a malformed report"
LEFT_RUNNING = "the kernel left processes running"
FORBIDDEN = "the kernel reached outside its process"
RAISED = "raised an error"
NOT_PLAIN = "not a plain output tensor"
UNWRITTEN = "unwritten output"
STREAM = "work outside the caller's stream"
ALIASING = "output aliasing"
MUTATION = "input or weight mutation"
WRONG = "wrong result"
REUSE = "result reuse"
SPECIALISED = "shape specialisation"
TIMED_DIFFER = "timed calls differ from checked ones"
HIDDEN_WORK = "work outside the timed call"
IMPOSSIBLE = "faster than this GPU allows"
FAULT_CLASSES = (CRASHED, HUNG, MALFORMED, LEFT_RUNNING, FORBIDDEN, RAISED, NOT_PLAIN, UNWRITTEN,
                 STREAM, ALIASING, MUTATION, WRONG, REUSE, SPECIALISED, TIMED_DIFFER, HIDDEN_WORK,
                 IMPOSSIBLE)
CANNOT_RUN = "cannot run here"
"""The verdict of a plan that cannot run on its device: not a fault of the kernel."""

SEEDS = 3
"""Builds checked unless a caller says otherwise: each on two inputs, plus a nearby odd shape."""
MAX_SEEDS = 1000
CALLS_PER_BUILD = 2
"""Calls of each checked build, on independent inputs: two, so a cached answer is seen."""
SECOND_INPUT = 1_000_000_007
"""Offset of the second input's seed from the first's."""
WARMUP_MS, REP_MS = 100.0, 500.0
"""Default timing budgets, in ms, as ``triton.testing.do_bench`` takes them."""
MAX_BUDGET_MS = 60_000.0


TIMEOUTS_S = {"call_timeout_s": ("FUSEDKIT_CALL_TIMEOUT_S", 60.0),
              "build_timeout_s": ("FUSEDKIT_BUILD_TIMEOUT_S", 900.0)}
"""Seconds a call, or a build (compiling included), may take before it counts as hung: the
environment variable that sets each, and the default."""


def one_line(e: BaseException) -> str:
    """An exception as ``Type: first line of its message`` (long compiler output cut)."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else '(no message)'}"


def row_digest(out: torch.Tensor) -> torch.Tensor:
    """One int64 per row of ``out``: BLAKE2s-64 of the row's bytes, or of its 1 KB chunks' own
    (``kernels/common/row_digest.py`` says how), on the GPU where ``out`` is, with hashlib on a CPU.
    A worker sends these for a timed call's whole output before any row is chosen; the rows it
    sends later must give the same digests. A cryptographic hash, because a kernel knows the rule
    (docs/measuring.md)."""
    step = load_step("common", "row_digest.py")
    return step.row_digest(out) if out.device.type == "cuda" else step.row_digest_cpu(out)


def refill(problem, inputs: list[torch.Tensor], seed: int) -> None:
    """Fresh values into ``inputs`` from ``seed``, on their device (the device's own Philox on a
    GPU, numpy's PCG64 on a CPU): the worker draws a timed call's input, the caller replays it."""
    device = inputs[0].device
    rng = (torch.Generator(device).manual_seed(seed) if device.type == "cuda"
           else np.random.default_rng(seed))
    problem.refill_inputs(inputs, rng)
