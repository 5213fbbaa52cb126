"""Deliberately bad kernels, each a builder ``build(model) -> fn`` written as a careless or
cheating learner might: one per class of fault the checks name, and one per way the measurement
itself could be cheated (the causes a harness must close by construction). They compute with
PyTorch so that they run on a CPU as well as a GPU; the fault, not the arithmetic, is the point.
A kernel runs in a worker process of its own, so what it saw there comes back through a file
(:class:`Tally`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

import torch

CHECKED_CALLS = 2   # the check calls each build on two inputs; later calls are timed


class Tally:
    """Lines a kernel writes in its worker, read here."""

    def __init__(self, path) -> None:
        self.path = str(path)
        open(self.path, "w").close()

    def add(self, text: str) -> None:
        with open(self.path, "a") as f:
            f.write(text + "\n")

    def lines(self) -> list[str]:
        with open(self.path) as f:
            return f.read().split("\n")[:-1]


def records_its_inputs(tally):
    """An honest kernel that writes a digest, the smallest and the largest value of each input
    it is given to ``tally``."""
    def build(model):
        import hashlib

        def run(x):
            tally.add(f"{hashlib.sha1(x.numpy().tobytes()).hexdigest()} {x.min().item()} {x.max().item()}")
            return model(x)
        return run
    return build


def _timed_from_call_3(model, honest, cheat):
    """Honest on the check's calls of each build, ``cheat(x)`` from the third call on."""
    calls = [0]

    def run(x):
        calls[0] += 1
        return honest(x) if calls[0] <= CHECKED_CALLS else cheat(x)
    return run


def _caller() -> int:
    """The pid of the process that judges (the parent of the worker's parent)."""
    with open(f"/proc/{os.getppid()}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


# -- wrong answers and careless kernels: the checked calls ----------------------------------------

def slightly_noisy(model):
    """Eager's answer plus noise of about 2e-6: inside KernelBench's 1e-4, over 2x eager's error."""
    def run(x):
        y = model(x)
        return y + 2e-6 * torch.randn_like(y)
    return run


def forgets_the_leaky_relu(model):
    return lambda x: model.gemm(x) * model.multiplier


def returns_zeros(model):
    return lambda *inputs: torch.zeros_like(model(*inputs))


def scaled_by_1_001(model):
    """Wrong in fp32, within what tf32 arithmetic explains."""
    return lambda *inputs: model(*inputs) * 1.001


def p45_forgets_the_sigmoid(model):
    return lambda x: torch.logsumexp(model.linear2(model.linear1(x)), dim=1)


def caching(model):
    memo = {}

    def run(x):
        if "y" not in memo:
            memo["y"] = model(x)
        return memo["y"].clone()
    return run


def memo_by_pointer(model):
    """Right for two distinct input tensors; stale once the same buffer is refilled."""
    memo = {}

    def run(x):
        if x.data_ptr() not in memo:
            memo[x.data_ptr()] = model(x)
        return memo[x.data_ptr()].clone()
    return run


def whole_tiles_only(model):
    """Rows in tiles of 16, the remainder forgotten: right only at a multiple of 16 rows."""
    def run(x):
        whole = (x.shape[0] // 16) * 16
        y = torch.zeros(x.shape[0], model.gemm.out_features, device=x.device)
        y[:whole] = model(x[:whole])
        return y
    return run


def writes_its_input(model):
    def run(x):
        x.clamp_(max=0.5)
        return model(x)
    return run


def writes_its_weights(model):
    def run(x):
        y = model(x)
        model.gemm.bias.add_(1.0)
        return y
    return run


def reused_output_buffer(model):
    buf = {}

    def run(x):
        y = model(x)
        buf.setdefault("out", torch.empty_like(y))
        return buf["out"].copy_(y)
    return run


class LazyTensor(torch.Tensor):
    """A tensor subclass: it could override comparisons or compute only when read."""


def returns_a_subclass(model):
    return lambda x: model(x).as_subclass(LazyTensor)


def returns_a_view_of_its_input(model):
    """Output aliasing: the answer written into the input's own first columns."""
    def run(x):
        y = model(x)
        out = x[:, :y.shape[1]]
        out.copy_(y)
        return out
    return run


def counts_calls(model):
    """Right for the first calls of a build, then the first answer again: a kernel that guesses
    when the clock starts."""
    state = {}

    def run(x):
        state["calls"] = state.get("calls", 0) + 1
        if state["calls"] <= CHECKED_CALLS + 3:
            state["y"] = model(x)
        return state["y"].clone()
    return run


def wrong_one_call_in_seven(model):
    """When timed, the whole output is wrong on one call in seven."""
    calls = [0]

    def run(x):
        calls[0] += 1
        y = model(x)
        return y + 1.0 if calls[0] > CHECKED_CALLS and calls[0] % 7 == 0 else y
    return run


def patches_linear(model):
    """Replaces torch.nn.functional.linear in its process by one that rounds to bf16: the model it
    is given then computes bf16's answer (a reference computed there would agree with it)."""
    real = torch.nn.functional.linear

    def sloppy(x, weight, bias=None):
        return real(x.bfloat16().float(), weight.bfloat16().float(), bias)
    torch.nn.functional.linear = sloppy
    return model


def reports_its_process(tally):
    """An honest kernel that writes the pid of the process it runs in to ``tally``."""
    def build(model):
        tally.add(str(os.getpid()))
        return model
    return build


def signals_its_process_group(model):
    """An honest answer, then SIGKILL to every process of its own process group."""
    def run(x):
        y = model(x)
        os.killpg(0, signal.SIGKILL)
        return y
    return run


def kills_its_parent(model):
    def run(x):
        os.kill(os.getppid(), signal.SIGKILL)
        return model(x)
    return run


def opens_a_network_socket(model):
    """A socket to a port on this machine (where a Jupyter kernel listens for code to run)."""
    def run(x):
        import socket
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        return model(x)
    return run


def pushes_input_into_a_terminal(model):
    """TIOCSTI: typing into a terminal, as if its user had."""
    def run(x):
        import fcntl
        import termios
        with contextlib.suppress(OSError):
            fcntl.ioctl(0, termios.TIOCSTI, b"x")
        return model(x)
    return run


def sends_a_pickle(path):
    """Honest work, and a pickle on its socket that would write the pid of whichever process
    unpickled it into ``path``."""
    class RunsWhereUnpickled:
        def __reduce__(self):
            return exec, (f"open({str(path)!r}, 'w').write(str(__import__('os').getpid()))",)

    def build(model):
        import pickle
        import socket
        import struct

        def run(x):
            for fd in range(3, 64):
                try:
                    s = socket.socket(fileno=os.dup(fd))
                except OSError:
                    continue
                data = pickle.dumps(("done", RunsWhereUnpickled()))
                s.sendall(struct.pack("<Q", len(data)) + data)
                s.detach()
            return model(x)
        return run
    return build


def tf32_declared_fp32(model):
    """GPU: TF32 tensor cores, declared fp32."""
    def run(x):
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return model(x)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
    return run


def skips_an_element(model):
    """The output's first element never written (an empty tensor, filled but for it)."""
    def run(x):
        y = model(x)
        out = torch.empty_like(y)
        out.view(-1)[1:] = y.view(-1)[1:]
        return out
    return run


def reads_out_of_bounds_on_the_gpu(model):
    """GPU: a load 2**40 floats past its input, which kills the CUDA context of its process."""
    import triton
    import triton.language as tl

    @triton.jit
    def oob(x_ptr, y_ptr, far, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(y_ptr + i, tl.load(x_ptr + far + i))

    def run(x):
        y = torch.empty(x.shape[0], model.gemm.out_features, device=x.device)
        oob[(1,)](x, y, 1 << 40, BLOCK=32)
        torch.cuda.synchronize()
        return y
    return run


def raises(model):
    return lambda x: model(x.T)


def segfaults(model):
    def run(x):
        import ctypes
        return ctypes.string_at(0)
    return run


def hangs(model):
    def run(x):
        while True:
            time.sleep(1)
    return run


def hangs_when_timed(model):
    def stuck(x):
        while True:
            time.sleep(1)
    return _timed_from_call_3(model, model, stuck)


def leaves_a_process_running(tally):
    def build(model):
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                 start_new_session=True)
        tally.add(str(child.pid))
        return model
    return build


def kills_its_caller(model):
    def run(x):
        os.kill(_caller(), signal.SIGKILL)
        return model(x)
    return run


def kills_its_callers_group(model):
    def run(x):
        os.killpg(os.getpgid(_caller()), signal.SIGTERM)
        return model(x)
    return run


def kills_every_process(model):
    def run(x):
        os.kill(-1, signal.SIGTERM)
        return model(x)
    return run


def writes_garbage_into_its_files(model):
    """Bytes into every file descriptor it holds (the worker's socket among them)."""
    def run(x):
        for fd in range(3, 64):
            try:
                os.write(fd, b"\xff" * 64)
            except OSError:
                pass
        return model(x)
    return run


# -- cheating the measurement: one per cause --------------------------------------------------------

def _report_a_microsecond():
    """From now on, every time the worker reports is rewritten to a microsecond on its way out."""
    from fusedkit.harness import worker
    send = worker.wire.send

    def forge(sock, message):
        if message[0] == "timed":
            message[1]["ms"] = 1e-3
        send(sock, message)
    worker.wire.send = forge


def reports_a_microsecond(model):
    """Cause 1, times from the worker: 30 ms of work a call, and every time its process reports
    rewritten to a microsecond on its way out."""
    _report_a_microsecond()

    def run(x):
        time.sleep(0.03)
        return model(x)
    return run


def inflates_the_harness_cost(model):
    """Cause 1 again: 10 ms of work a call, a microsecond reported, and from its build on a thread
    that keeps pausing every younger worker (the one that measures the harness's own cost, were it
    measured while this kernel lives), so that cost would seem as long as the work."""
    _report_a_microsecond()

    def pause_the_younger():
        while True:
            with open(f"/proc/{os.getppid()}/task/{os.getppid()}/children") as f:
                younger = [int(p) for p in f.read().split() if int(p) > os.getpid()]
            for sig, pause in ((signal.SIGSTOP, 0.003), (signal.SIGCONT, 0.00005)):
                for pid in younger:
                    with contextlib.suppress(OSError):
                        os.kill(pid, sig)
                time.sleep(pause)
    threading.Thread(target=pause_the_younger, daemon=True).start()

    def run(x):
        time.sleep(0.01)
        return model(x)
    return run


def works_after_the_call(model):
    """Cause 2, work moved out of the call: returns at once, and the 30 ms of work happen in
    the harness's own step after it (the row digest, replaced), inside the round trip."""
    from fusedkit.harness import worker   # built in the worker: its own module
    real, pending = worker.row_digest, []

    def late(out):
        time.sleep(0.03)
        out.copy_(model(pending.pop()))
        return real(out)

    def cheat(x):
        pending[:] = [x]
        worker.row_digest = late
        return torch.empty(x.shape[0], model.gemm.out_features)
    return _timed_from_call_3(model, model, cheat)


def fills_its_output_later(model):
    """Cause 2, the other way: returns an empty output that a thread fills 20 ms later."""
    def cheat(x):
        out = torch.empty(x.shape[0], model.gemm.out_features)

        def fill():
            time.sleep(0.02)
            out.copy_(model(x))
        threading.Thread(target=fill).start()
        return out
    return _timed_from_call_3(model, model, cheat)


def computes_only_the_rows_asked(model):
    """Cause 3 (and 5): returns zeros when timed, and answers the caller's request for rows by
    computing just those rows from the inputs it was given."""
    def cheat(x):
        from fusedkit.harness import worker

        def rows(self, o):
            index = torch.tensor(o["rows"])
            return ["rows", model(self.inputs[0].index_select(0, index))]
        worker.Session.do_rows = rows
        return torch.zeros(x.shape[0], model.gemm.out_features)
    return _timed_from_call_3(model, model, cheat)


def wrong_on_one_row_per_call(model):
    """Cause 4: when timed, one row of every output is wrong, and each call takes 30 ms, so few
    calls are timed (a kernel that bets on the rows verified, or on its last call)."""
    def cheat(x):
        time.sleep(0.03)
        y = model(x)
        y[torch.randint(0, x.shape[0], ())] += 1.0
        return y
    return _timed_from_call_3(model, model, cheat)


def fp32_when_checked_bf16_when_timed(model):
    """Cause 6: declares bf16, computes in fp32 while checked (tiered fp32-faithful) and in bf16
    while timed."""
    def bf16(x):
        y = (x.bfloat16() @ model.gemm.weight.bfloat16().T).float() + model.gemm.bias
        return torch.nn.functional.leaky_relu(y * model.multiplier, 0.1)
    return _timed_from_call_3(model, model, bf16)


def opens_others_memory(tally):
    """Cause 7: tries to open for writing the memory of the judging process, of the process that
    starts workers, and of the next candidate's worker, already waiting (what it saw goes to
    ``tally``); computes honestly."""
    def build(model):
        with open(f"/proc/{os.getppid()}/task/{os.getppid()}/children") as f:
            spares = [int(p) for p in f.read().split() if int(p) != os.getpid()]
        for who, pid in [("caller", _caller()), ("zygote", os.getppid())] + [("spare", p) for p in spares]:
            try:
                open(f"/proc/{pid}/mem", "r+b").close()
                tally.add(f"{who} opened")
            except OSError as e:
                tally.add(f"{who} {type(e).__name__}")
        return model
    return build


def signals_the_next_worker(sig):
    """Sends ``sig`` at build to the next candidate's worker, already waiting (a younger process,
    which its seccomp filter lets it signal); computes honestly."""
    def build(model):
        with open(f"/proc/{os.getppid()}/task/{os.getppid()}/children") as f:
            for pid in f.read().split():
                if int(pid) != os.getpid():
                    os.kill(int(pid), sig)
        return model
    return build


def rewrites_fusedkit(path):
    """Cause 7: appends a line to one of fusedkit's own files (``path``) at build."""
    def build(model):
        with open(path, "a") as f:
            f.write("\n# every later tolerance is 1.0\n")
        return model
    return build


def uses_two_cores(model):
    """Cause 7: undoes its one-thread setting and spends each timed call on two cores."""
    a = torch.randn(768, 768)

    def cheat(x):
        torch.set_num_threads(2)
        for _ in range(8):
            a @ a
        return model(x)
    return _timed_from_call_3(model, model, cheat)


def side_stream_output(model):
    """GPU: the output computed on a side stream the caller's stream never waits for."""
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
    """GPU: the answer on the caller's stream, and a millisecond a call on a side stream."""
    side = torch.cuda.Stream()

    def run(x):
        with torch.cuda.stream(side):
            torch.cuda._sleep(2_000_000)
        return model(x)
    return run
