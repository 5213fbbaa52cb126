"""Deliberately bad kernels for problem 12 (and a few for problem 45), one per class of fault
the harness must catch.

Each is a builder, ``build(model) -> fn``, written the way a careless or cheating learner
might write it. They compute with PyTorch so that they run on a CPU as well as a GPU; the
fault, not the arithmetic, is what they show.
"""

from __future__ import annotations

import hashlib
import random
import time

import torch

REFERENCE_CALLS = 2   # a check calls each build on two inputs


def leaves_a_hole(model):
    """Unwritten output: one element is NaN (an element the kernel never stores)."""
    def run(x):
        y = model(x)
        y[0, 0] = float("nan")
        return y
    return run


def slightly_noisy(model):
    """Lower precision: eager's answer plus noise of about 2e-6, inside KernelBench's 1e-4 but
    more than twice eager's own error."""
    def run(x):
        y = model(x)
        return y + 2e-6 * torch.randn_like(y)
    return run


# -- wrong answers: no precision explains them -------------------------------------------------

def forgets_the_leaky_relu(model):
    """Wrong result: the GEMM, bias and multiplier, no LeakyReLU (negative outputs 10x too big)."""
    def run(x):
        return model.gemm(x) * model.multiplier
    return run


def forgets_the_bias(model):
    """Wrong result: x @ W.T without the bias, then the multiplier and LeakyReLU."""
    def run(x):
        y = (x @ model.gemm.weight.T) * model.multiplier
        return torch.nn.functional.leaky_relu(y, model.leaky_relu.negative_slope)
    return run


def adds_one(model):
    """Wrong result: the right answer plus 1 (any problem)."""
    def run(*inputs):
        return model(*inputs) + 1.0
    return run


def returns_zeros(model):
    """Wrong result: zeros of the right shape, whatever the input (any problem). Two calls give
    the same output, but neither input's answer: wrong, not reused."""
    def run(*inputs):
        return torch.zeros_like(model(*inputs))
    return run


def returns_negated(model):
    """Wrong result: the answer with its sign flipped (any problem)."""
    def run(*inputs):
        return -model(*inputs)
    return run


def returns_noise(model):
    """Wrong result: uniform random numbers of the right shape (any problem)."""
    def run(*inputs):
        return torch.rand_like(model(*inputs))
    return run


def scaled_by_1_001(model):
    """Wrong result in fp32, explained in tf32: the answer times 1.001 (any problem)."""
    def run(*inputs):
        return model(*inputs) * 1.001
    return run


def p45_max_for_logsumexp(model):
    """Problem 45, wrong result: the row maximum of the logits instead of their logsumexp."""
    def run(x):
        return model.linear2(torch.sigmoid(model.linear1(x))).amax(dim=1)
    return run


def p45_forgets_the_sigmoid(model):
    """Problem 45, wrong result: the two Linears back to back, no sigmoid between them."""
    def run(x):
        return torch.logsumexp(model.linear2(model.linear1(x)), dim=1)
    return run


def p45_forgets_the_second_bias(model):
    """Problem 45, wrong result: GEMM2 without b2 (a shift of the logits, small in the output)."""
    def run(x):
        h = torch.sigmoid(model.linear1(x))
        return torch.logsumexp(h @ model.linear2.weight.T, dim=1)
    return run


WRONG_ANYWHERE = (adds_one, returns_zeros, returns_negated, returns_noise)
WRONG_P12 = (forgets_the_leaky_relu, forgets_the_bias, *WRONG_ANYWHERE)
# Not here: problem 45 without b2. Its output moves by b2's softmax-weighted mean, near 0 on some
# draws at small sizes; test_check tests it on its own.
WRONG_P45 = (p45_max_for_logsumexp, p45_forgets_the_sigmoid, *WRONG_ANYWHERE)


# -- cheats and careless kernels -------------------------------------------------------------------

def caching(model):
    """Result reuse: computes the first answer, then returns a copy of it whatever the input."""
    memo = {}

    def run(x):
        if "y" not in memo:
            memo["y"] = model(x)
        return memo["y"].clone()
    return run


def memo_by_pointer(model):
    """Result reuse keyed on the input's address: right for two distinct input tensors, wrong
    when the same buffer is refilled (as the timing loop does)."""
    memo = {}

    def run(x):
        key = x.data_ptr()
        if key not in memo:
            memo[key] = model(x)
        return memo[key].clone()
    return run


class Tally:
    """Counts kept in a file: the harness runs a kernel in a worker process of its own, so a
    test reads what the kernel did there from here."""

    def __init__(self, path):
        self.path = str(path)
        self.reset()

    def add(self, key: str) -> None:
        with open(self.path, "a") as f:
            f.write(key + "\n")

    def counts(self) -> dict[str, int]:
        with open(self.path) as f:
            words = f.read().split()
        return {k: words.count(k) for k in set(words)}

    def reset(self) -> None:
        open(self.path, "w").close()


def wrong_one_call_in(n: int, tally: Tally | None = None):
    """A builder wrong on one call in ``n`` from its third call on (the check calls each build
    twice): on those calls it returns the previous call's answer again, skipping the work, as a
    kernel that guesses when it is timed would. Which calls, a phase drawn per build, is unknown
    to the harness. ``tally`` counts its "call"s and "wrong" ones."""
    def build(model):
        state = {"calls": 0, "phase": random.randrange(n)}

        def run(x):
            state["calls"] += 1
            if tally:
                tally.add("call")
            if state["calls"] > REFERENCE_CALLS and (state["calls"] + state["phase"]) % n == 0:
                if tally:
                    tally.add("wrong")
                return state["y"].clone()
            state["y"] = model(x)
            return state["y"]
        return run
    build.__name__ = f"wrong_one_call_in_{n}"
    return build


def memo_by_content(tally: Tally | None = None):
    """Result reuse keyed on the input's content (a fingerprint of its bytes): right whenever it
    computes, and fast only where the harness repeats an input. ``tally`` counts its "call"s and
    the "hit"s it served from memory; a harness that times it on inputs it never saw has none."""
    def build(model):
        memo = {}

        def run(x):
            if tally:
                tally.add("call")
            key = hashlib.blake2b(x.detach().cpu().contiguous().numpy().tobytes(), digest_size=16).digest()
            if key in memo:
                if tally:
                    tally.add("hit")
                return memo[key].clone()
            memo[key] = model(x)
            return memo[key].clone()
        return run
    build.__name__ = "memo_by_content"
    return build


def whole_tiles_only(model):
    """Shape specialisation: handles rows in tiles of 16 and forgets the remainder, so it is
    right at a multiple of 16 rows and wrong elsewhere."""
    def run(x):
        whole = (x.shape[0] // 16) * 16
        y = torch.zeros(x.shape[0], model.gemm.out_features, device=x.device)
        y[:whole] = model(x[:whole])
        return y
    return run


def writes_its_input(model):
    """Input mutation: clamps x in place (a learner's 'harmless' pre-processing)."""
    def run(x):
        x.clamp_(max=0.5)
        return model(x)
    return run


def writes_its_weights(model):
    """Weight mutation: a right answer, then the bias 'restored' after a round trip through +1.
    b + 1 keeps b's bits only down to 2**-23, so almost every |b| < 1 comes back changed: the
    mutation shows at every size (with +1e-3 instead, a small bias round-tripped exactly now
    and then, and the check saw the mutation only at the nearby odd shape)."""
    def run(x):
        with torch.no_grad():
            y = model(x)
            model.gemm.bias.add_(1.0)
            model.gemm.bias.sub_(1.0)
        return y
    return run


def reused_output_buffer(model):
    """Output aliasing: writes every answer into the same preallocated buffer."""
    buf = {}

    def run(x):
        y = model(x)
        if "out" not in buf:
            buf["out"] = torch.empty_like(y)
        return buf["out"].copy_(y)
    return run


class LazyTensor(torch.Tensor):
    """A tensor subclass: it could override comparisons or compute only when read."""


def returns_a_subclass(model):
    """Not a plain tensor: the answer wrapped in a subclass."""
    def run(x):
        return model(x).as_subclass(LazyTensor)
    return run


def counts_calls(model):
    """Warm-up detection: right for the first calls of a build, then returns the first answer
    again (a kernel that guesses when the clock starts)."""
    state = {"calls": 0}

    def run(x):
        state["calls"] += 1
        if state["calls"] <= REFERENCE_CALLS + 3:
            state["y"] = model(x)
            return state["y"]
        return state["y"].clone()
    return run


def patches_the_clock(model):
    """Timer patching: replaces time.perf_counter and torch.cuda.Event when built, so a
    harness that looks them up at call time would see no time pass."""
    time.perf_counter = lambda: 0.0
    torch.cuda.Event = None   # anything: the harness must not look it up

    def run(x):
        return model(x)
    return run


# -- replacing library functions ---------------------------------------------------------------

def patches_linear(model):
    """Patched operator: replaces torch.nn.functional.linear when built with one that rounds its
    operands to bf16 first. The kernel's answer is then bf16's, and so would be the float64
    reference, which calls the same F.linear through the hidden model's nn.Linear."""
    original = torch.nn.functional.linear

    def sloppy(x, weight, bias=None):
        return original(x.bfloat16().to(x.dtype), weight.bfloat16().to(weight.dtype), bias)
    torch.nn.functional.linear = sloppy

    def run(x):
        return model(x)
    return run


def patches_a_tensor_method(model):
    """Patched operator: on its first call, replaces torch.Tensor.double (with which the harness
    widens outputs and references to float64) by one that rounds to bf16 on the way."""
    def run(x):
        original = torch.Tensor.double
        if "double" not in vars(torch.Tensor):
            torch.Tensor.double = lambda t, *a, **k: original(t.bfloat16(), *a, **k)
        return model(x)
    return run


def patches_the_harness_when_timed(model):
    """Patched operator, while timed only: from its third call on (the check makes two), it
    replaces fusedkit.precision.error_bound, the bound every timed output is held to."""
    from fusedkit import precision

    state = {"calls": 0}

    def run(x):
        state["calls"] += 1
        if state["calls"] == REFERENCE_CALLS + 1:
            original = precision.error_bound
            precision.error_bound = lambda *a, **k: (original(*a, **k)[0], torch.tensor(1.0))
        return model(x)
    return run


def raises(model):
    """A kernel whose call fails (a learner's typo)."""
    def run(x):
        return model(x.T)
    return run


def side_stream_output(model):
    """Work outside the caller's stream: the output is computed on a side stream that the
    caller's stream never waits for (a sleep first makes the race certain)."""
    side = torch.cuda.Stream()

    def run(x):
        y = torch.empty(x.shape[0], model.gemm.out_features, device=x.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(2_000_000)
            y.copy_(model(x))
        return y
    return run


def side_stream_busywork(model):
    """Work hidden from the events: the answer is computed properly on the caller's stream,
    but a millisecond of work per call goes to a side stream nobody waits for."""
    side = torch.cuda.Stream()

    def run(x):
        with torch.cuda.stream(side):
            torch.cuda._sleep(2_000_000)
        return model(x)
    return run


def tf32_declared_fp32(model):
    """TF32 tensor cores, declared fp32: on problem 12 an error fp32 cannot explain (a wrong
    result), and a speed fp32 cannot reach (impossible speed)."""
    def run(x):
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return model(x)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    return run


def patches_the_statistics(model):
    """Timer patching, one step on: replaces numpy's median and percentile when built (the
    summary of the times, not the clock)."""
    import numpy as np

    np.median = lambda a, *args, **kw: 1e-9
    np.percentile = lambda a, q, *args, **kw: 1e-9

    def run(x):
        return model(x)
    return run


# -- kernels that take their process down, or never return ---------------------------------------

def segfaults(model):
    """A crash: reads address 0 (what an out-of-bounds pointer in a C extension does)."""
    def run(x):
        import ctypes
        return ctypes.string_at(0)
    return run


def hangs(model):
    """A call that never returns (a deadlock, a spin on a flag nobody sets)."""
    def run(x):
        while True:
            time.sleep(1)
    return run


def hangs_when_timed(model):
    """Right on the check's two calls, then stuck from the fifth call of a build on: only the
    timing's calls hang."""
    state = {"calls": 0}

    def run(x):
        state["calls"] += 1
        while state["calls"] >= 5:
            time.sleep(1)
        return model(x)
    return run


def rebinds_what_linear_calls(model):
    """A patch no snapshot watches: rebinds the name ``F`` inside torch.nn.modules.linear (not
    torch.nn.functional itself), so every nn.Linear in its process, the model it is given and
    any reference computed there alike, multiplies in bf16. Where the reference is computed in
    the same process it agrees with itself; computed elsewhere it does not."""
    import types

    import torch.nn.modules.linear as lin

    real = lin.F

    def bf16_linear(x, weight, bias=None):
        y = (x.bfloat16() @ weight.bfloat16().T).to(x.dtype)
        return y if bias is None else y + bias

    lin.F = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
    lin.F.linear = bf16_linear

    def run(x):
        return model(x)
    return run


def reports_its_process(tally):
    """An honest kernel that writes the id of the process it runs in to ``tally``."""
    def build(model):
        import os
        tally.add(str(os.getpid()))
        return lambda x: model(x)
    build.__name__ = "reports_its_process"
    return build


def reads_out_of_bounds_on_the_gpu(model):
    """An illegal memory access in a tiny Triton kernel: it loads from 2**40 floats past its
    input, which kills the CUDA context of its process."""
    import triton

    kernel = _oob_kernel()

    def run(x):
        y = torch.empty(x.shape[0], model.gemm.out_features, device=x.device)
        kernel[(1,)](x, y, 1 << 40, BLOCK=32)
        torch.cuda.synchronize()
        return y
    del triton
    return run


def _oob_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def oob(x_ptr, y_ptr, far, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(y_ptr + i, tl.load(x_ptr + far + i))
    return oob


# -- kernels that own their process (the worker): what they can reach there ----------------------

def _worker_connection():
    """The worker's pipe to the caller, found among the process's objects (as a kernel could)."""
    import gc
    from multiprocessing.connection import Connection

    return next(o for o in gc.get_objects() if isinstance(o, Connection) and not o.closed)


def _frames_with(name: str):
    """Every frame of this thread's stack that holds a local called ``name``, innermost first."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        if name in frame.f_locals:
            yield frame
        frame = frame.f_back


class _RunsInTheCaller:
    """Unpickled, it writes the pid of the process that unpickled it into ``path``."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        code = f"open({self.path!r}, 'w').write(str(__import__('os').getpid()))"
        return exec, (code,)


def sends_a_pickle(path):
    """Honest work, plus a message on the worker's pipe holding an object that runs code in
    whichever process unpickles it (it writes that process's pid to ``path``)."""
    import pickle

    def build(model):
        def run(x):
            _worker_connection().send_bytes(pickle.dumps(("stage", _RunsInTheCaller(path))))
            return model(x)
        return run
    return build


def computes_only_the_verified_rows(model):
    """Right on the check's two calls of each build; when timed, only the rows it expects to be
    verified are computed: those the harness drew before the call, if it can find them on its
    stack (``picked``), else the first eight."""
    calls = [0]

    def run(x):
        calls[0] += 1
        if calls[0] <= REFERENCE_CALLS:
            return model(x)
        rows = None
        for frame in _frames_with("picked"):
            rows = frame.f_locals["picked"][0]
            break
        rows = torch.arange(min(8, x.shape[0])) if rows is None else rows.to(x.device)
        out = torch.zeros(x.shape[0], model.gemm.out_features, device=x.device)
        out[rows] = model(x[rows])
        return out
    return run


def knows_the_next_input(model):
    """Right on the check's calls; when timed, each call returns the answer it computed ahead,
    during the call before, for the input the harness's generator will draw next (found on the
    stack, ``values``, and copied); with no generator to copy, the last answer again."""
    import copy

    calls, ahead = [0], [None]

    def run(x):
        calls[0] += 1
        if calls[0] <= REFERENCE_CALLS:
            return model(x)
        gen = next((f.f_locals["values"] for f in _frames_with("values")), None)
        out = ahead[0] if ahead[0] is not None else model(x)
        if gen is not None and not isinstance(gen, torch.Generator):   # numpy's, on a CPU
            future = copy.deepcopy(gen).random(x.shape, dtype="float32")
            ahead[0] = model(torch.from_numpy(future))
        else:
            ahead[0] = out   # nothing to foresee: the last answer stands in for the next
        return out.clone()
    return run


def ticks_while_it_hangs(model):
    """Right on the check's calls; its first timed call never returns, but keeps ticking the
    worker's progress counter and announcing stages, the heartbeat the watchdog watched."""
    import ctypes
    import gc
    import time as _time

    calls = [0]

    def announce(conn):   # in the harness's own words, whichever protocol it speaks
        from fusedkit import isolation
        if hasattr(isolation, "wire"):
            isolation.wire.send(conn, ("stage", "timed calls"))
        else:
            conn.send(("stage", "timed calls"))

    def run(x):
        calls[0] += 1
        if calls[0] <= REFERENCE_CALLS:
            return model(x)
        counters = [o for o in gc.get_objects() if type(o) is ctypes.c_long]
        conn = _worker_connection()
        while True:
            for c in counters:
                c.value += 1
            announce(conn)
            _time.sleep(0.2)
    return run


def leaves_a_process_running(path):
    """Honest work, and a process started at the first call that goes on running (its pid in
    ``path``), beside whatever is measured next."""
    import subprocess
    import sys

    started = [False]

    def build(model):
        def run(x):
            if not started[0]:
                started[0] = True
                p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                     start_new_session=True)
                open(path, "w").write(str(p.pid))
            return model(x)
        return run
    return build


def signals_its_process_group(model):
    """Honest answer, then SIGTERM to every process of its process group."""
    import os
    import signal

    def run(x):
        y = model(x)
        os.killpg(0, signal.SIGTERM)
        return y
    return run


def kills_its_parent(model):
    """SIGKILL to the process that started its worker."""
    import os
    import signal

    def run(x):
        os.kill(os.getppid(), signal.SIGKILL)
        return model(x)
    return run
