"""Deliberately bad kernels for problem 12, one per class of fault the harness must catch.

Each is a builder, ``build(model) -> fn``, written the way a careless or cheating learner
might write it. They compute with PyTorch so that they run on a CPU as well as a GPU; the
fault, not the arithmetic, is what they show.
"""

from __future__ import annotations

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
    """Impossible speed for the declared precision: TF32 tensor cores, declared fp32."""
    def run(x):
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return model(x)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    return run
