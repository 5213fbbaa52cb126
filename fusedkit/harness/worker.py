"""What runs on the far side of the process line: the kernel, and nothing that judges it.

A zygote forks a worker per candidate; the worker locks itself in (:func:`lock_in`), then builds,
calls and times the candidate as the caller orders, one step at a time, and sends back data."""

from __future__ import annotations

import contextlib
import copy
import ctypes
import linecache
import os
import pickle
import platform
import signal
import socket
import struct
import sys
import time
import traceback
import warnings
from typing import Callable

import torch

from fusedkit import problems
from fusedkit.harness import wire
from fusedkit.harness.terms import ALIASING, CRASHED, NOT_PLAIN, STREAM, one_line, refill, row_digest

FOREVER = float("inf")


class KernelRaised(Exception):
    """The candidate's build or call raised: the caller's verdict, in the error's one line."""


# -- locking the worker in ---------------------------------------------------------------------

_SYSCALLS = {   # architecture (AUDIT_ARCH_*): kill, tkill, tgkill, rt_sigqueueinfo,
    # rt_tgsigqueueinfo, ptrace, process_vm_readv, process_vm_writev, pidfd_open, io_uring_setup,
    # socket, ioctl; then seccomp itself
    "x86_64": (0xC000003E, (62, 200, 234, 129, 297, 101, 310, 311, 434, 425, 41, 16), 317),
    "aarch64": (0xC00000B7, (129, 130, 131, 138, 240, 117, 270, 271, 434, 425, 198, 29), 277),
}


def lock_in() -> str:
    """Lock this process in (see the module's docstring); returns "" or why the seccomp part could
    not be installed on this machine (another architecture: the rest still holds)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)                     # PR_SET_CHILD_SUBREAPER: orphans stay ours
    libc.prctl(38, 1, 0, 0, 0)                     # PR_SET_NO_NEW_PRIVS
    for cap in range(64):                          # PR_CAPBSET_DROP every capability
        libc.prctl(24, cap, 0, 0, 0)
    libc.prctl(47, 4, 0, 0, 0)                     # PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    libc.capset(header, (ctypes.c_uint32 * 6)())   # effective, permitted, inheritable: none
    arch = _SYSCALLS.get(platform.machine())
    if arch is None:
        return f"no seccomp filter on {platform.machine()}"
    program = _filter(*arch[:2], os.getpid())
    prog = struct.pack("HxxxxxxQ", len(program) // 8, ctypes.addressof(
        buf := ctypes.create_string_buffer(program, len(program))))
    # SECCOMP_SET_MODE_FILTER, FLAG_SPEC_ALLOW: some hosts slow a filtered task's every launch with the
    # store-bypass mitigation (an attack on its own memory, where it holds nothing of the caller's).
    if libc.syscall(arch[2], 1, 4, ctypes.c_char_p(prog)) != 0:
        return f"seccomp refused (errno {ctypes.get_errno()})"
    del buf   # the kernel has copied the program
    return ""


def _filter(audit_arch: int, calls: tuple[int, ...], me: int) -> bytes:
    """A classic BPF program: on this architecture, end this process with SIGSYS when it sends a
    signal (or opens a pidfd) to a pid below ``me`` (a process or thread older than this worker:
    its caller, the zygote, the caller's threads), to every process (-1) or to another process
    group; traces another process; opens a network socket (a Jupyter kernel listens on one);
    pushes input into a terminal (TIOCSTI); or sets up io_uring (which would do all of these
    unseen). Everything else is allowed."""
    kill, tkill, tgkill, sigq, tgsigq, ptrace, vm_read, vm_write, pidfd_open, uring, sock, ioctl = calls
    LD, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
    ALLOW, DIE = 0x7FFF0000, 0x80000000              # SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS
    code: list[tuple[int, int, str | None, str | None]] = [   # (op, k, jump if true, if false)
        (LD, 4, None, None),                         # seccomp_data.arch
        (JEQ, audit_arch, "nr", "allow"),
        ("nr", 0, None, None),
        (LD, 0, None, None),                         # seccomp_data.nr
        (JGE, 0x40000000, "die", None),              # x32 numbering: not this filter's
        *[(JEQ, nr, "die", None) for nr in (tkill, ptrace, vm_read, vm_write, uring)],
        *[(JEQ, nr, "pid", None) for nr in (kill, tgkill, sigq, tgsigq, pidfd_open)],
        (JEQ, sock, "socket", None),
        (JEQ, ioctl, "ioctl", None),
        ("allow", 0, None, None),
        (RET, ALLOW, None, None),
        ("socket", 0, None, None),
        (LD, 16, None, None),                        # args[0]: the address family
        (JEQ, 2, "die", None),                       # AF_INET
        (JEQ, 10, "die", "ok"),                      # AF_INET6
        ("ioctl", 0, None, None),
        (LD, 24, None, None),                        # args[1], low 32 bits: the request
        (JEQ, 0x5412, "die", "ok"),                  # TIOCSTI
        ("pid", 0, None, None),
        (LD, 16, None, None),                        # args[0], low 32 bits: a pid_t
        (JEQ, 0, "ok", None),                        # its own process group
        (JEQ, (-me) & 0xFFFFFFFF, "ok", None),       # its own group, by number
        (JGE, 0x80000000, "die", None),              # -1 (every process) or another group
        (JGE, me, "ok", "die"),                      # from its own pid up: its children
        ("ok", 0, None, None),
        (RET, ALLOW, None, None),
        ("die", 0, None, None),
        (RET, DIE, None, None),
    ]
    labels, program = {}, []
    for op, k, jt, jf in code:
        if isinstance(op, str):
            labels[op] = len(program)
        else:
            program.append((op, k, jt, jf))
    return b"".join(struct.pack("HBBI", op, labels[jt] - i - 1 if jt else 0,
                                labels[jf] - i - 1 if jf else 0, k)
                    for i, (op, k, jt, jf) in enumerate(program))


# -- the zygote ----------------------------------------------------------------------------------

def zygote(ctl: socket.socket) -> None:
    """Fork a worker for each socket the caller sends (with the device it is for: -1 a CPU, N
    the GPU cuda:N); tell the caller each worker's pid, and the exit status of a worker it asks
    about, once that worker has ended."""
    # PR_SET_DUMPABLE 0, kept by every fork: no worker opens another's memory, or this one's.
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    ctl.sendall(struct.pack("<q", os.getpid()))
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 16, 1)
        except OSError:
            return
        if len(msg) < 9:
            return                              # the caller has gone
        op, arg = struct.unpack("<cq", msg[:9])
        if op == b"f" and fds:
            pid = os.fork()
            if pid == 0:
                ctl.close()
                _worker(socket.socket(fileno=fds[0]), "cpu" if arg < 0 else f"cuda:{arg}")
                os._exit(0)
            os.close(fds[0])
            ctl.sendall(struct.pack("<q", pid))
        elif op == b"w":
            try:
                code = os.waitstatus_to_exitcode(os.waitpid(int(arg), 0)[1])
            except ChildProcessError:
                code = 0
            ctl.sendall(struct.pack("<q", code))


def _worker(sock: socket.socket, device: str) -> None:
    os.setsid()   # a session and process group of its own; a terminal's Ctrl-C is the caller's
    # The previous candidate's worker may signal this one while it waits as a spare: what can be
    # ignored is (the caller ends a worker with SIGKILL, and replaces a spare found stopped).
    for sig in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD,
                                         signal.SIGCONT, signal.SIGWINCH, signal.SIGURG}:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_IGN)
    keep = sock.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    note = lock_in()
    try:
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))
            torch.empty(1, device=device)      # its CUDA context now, while it waits as a spare
            probe = torch.rand(3, 300, device=device)   # and the row digest's kernels, checked (2 chunks a row)
            if not torch.equal(row_digest(probe).cpu(), row_digest(probe.cpu())):
                raise RuntimeError("the GPU's row digest differs from hashlib's BLAKE2s")
        else:
            # One thread: the caller's clock times every call, and its CPU-time budget allows
            # this process one core.
            torch.set_num_threads(1)
    except Exception as e:  # noqa: BLE001 - this machine's fault, said to the caller in one line
        wire.send(sock, ["error", one_line(e)])
        return
    wire.send(sock, ["ready", {"pid": os.getpid(), "note": note}])
    Session(sock, torch.device(device)).serve()


# -- a worker's session ----------------------------------------------------------------------------

def _resolve_builder(spec: list) -> Callable:
    """The candidate from the caller's spec: a registered variant by name, or the caller's
    pickle of a builder (the caller is trusted; the worker never sends one back)."""
    if spec[0] == "registered":
        return problems.get(spec[1]).variant(spec[2]).build
    path, sources = pickle.loads(spec[2].numpy().tobytes())
    sys.path[:0] = [p for p in path if p not in sys.path]
    linecache.cache.update(sources)
    return pickle.loads(spec[1].numpy().tobytes())


class Session:
    """The worker's side of one candidate: each order of the caller answered, in order."""

    def __init__(self, sock: socket.socket, device: torch.device) -> None:
        self.sock, self.device = sock, device
        self.fn = self.model = self.hidden = self.out = None
        self.calls: list[tuple[list, list, torch.Tensor]] = []   # checked: inputs, originals, out
        self.inputs: list[torch.Tensor] = []
        self.flush = torch.empty(256 * 2**20, dtype=torch.int8, device=device) \
            if device.type == "cuda" else None

    def serve(self) -> None:
        while True:
            try:
                order = wire.receive(self.sock, FOREVER, spin_s=wire.spin_s(self.device))
            except (EOFError, OSError, wire.Malformed):
                return
            try:
                self.sock_send(getattr(self, "do_" + order["op"])(order))
            except KernelRaised as e:
                self.sock_send(["raised", str(e)])
            except BaseException as e:  # noqa: BLE001 - said to the caller, never lost
                if _device_fault(e) or not isinstance(e, Exception):
                    self.sock_send(["crashed", f"{CRASHED}: {one_line(e)}"])
                    os._exit(1)          # a dead CUDA context: nothing here can go on
                self.sock_send(["error", traceback.format_exc()])

    def sock_send(self, message: list) -> None:
        try:
            wire.send(self.sock, message)
        except OSError:
            os._exit(0)   # the caller has gone: no one to tell

    def do_build(self, o: dict) -> list:
        self.problem = problems.get(o["problem"])
        self.sizes = self.problem.sizes(o["sizes"])
        self.model = self.problem.make_model(self.sizes, seed=o["seed"], device=self.device)
        self.hidden = copy.deepcopy(self.model)     # the candidate never holds this one
        self.calls, self.fn = [], None
        self.inputs = self.problem.get_inputs(self.sizes, seed=o["seed"], device=self.device)
        try:
            build = _resolve_builder(o["spec"])
            with torch.no_grad():
                self.fn = build(self.model)
        except Exception as e:  # noqa: BLE001 - a learner's build may fail in any way
            if _device_fault(e):
                raise
            raise KernelRaised(f"building it raised {one_line(e)}") from None
        return ["built", None]

    def do_check(self, o: dict) -> list:
        """One checked call on inputs drawn from ``seed``: the output, whole, and what is wrong
        with it that only this process can see (its type, memory it shares, a stream still
        writing it)."""
        inputs = self.problem.get_inputs(self.sizes, seed=o["seed"], device=self.device)
        originals = [t.clone() for t in inputs]
        shape = tuple(self.problem.output_shape(self.sizes))
        # Deterministic mode fills every tensor torch allocates with NaN: an unwritten element shows.
        # torch._C's switch: the public one also imports inductor (4-8 s a fresh worker, an H100).
        torch._C._set_deterministic_algorithms(True, warn_only=True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = self._call(inputs)
        finally:
            torch._C._set_deterministic_algorithms(False)
        fault = plain_output_fault(out, shape, self.device)
        if fault:
            return ["fault", f"{NOT_PLAIN}: {fault}"]
        named = {f"its input {'x' if i == 0 else f'#{i}'}": t for i, t in enumerate(inputs)}
        named |= {f"parameter {n}": p for n, p in self.model.named_parameters()}
        named |= {"the previous call's output": c[2] for c in self.calls[-1:]}
        hits = [name for name, t in named.items() if shares_memory(out, t)]
        if hits:
            return ["fault", f"{ALIASING}: call {len(self.calls) + 1}'s output shares memory "
                             f"with {hits[0]}; return a new tensor"]
        early = out.clone()                # on the caller's stream, before any device-wide sync
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if not same_bits(out, early):
            return ["fault", f"{STREAM}: call {len(self.calls) + 1}'s output "
                             "was still changing after the call returned; join any side stream "
                             "to the caller's current stream"]
        self.calls.append((inputs, originals, out))
        return ["output", out]

    def do_mutation(self, _o: dict) -> list:
        """What the calls so far changed of their inputs or the model's weights."""
        found = [f"the call changed {n}; a kernel must not write its weights"
                 for (n, t), (_, t0) in zip(self.model.state_dict().items(),
                                            self.hidden.state_dict().items()) if not same_bits(t, t0)]
        found += [f"call {k + 1} changed its input; a kernel must not write its inputs"
                  for k, (now, was, _) in enumerate(self.calls)
                  if not all(same_bits(a, b) for a, b in zip(now, was))]
        return ["mutation", found]

    def do_time(self, o: dict) -> list:
        """One timed call: the inputs refilled from ``seed``, the L2 flushed on a GPU, the call,
        its time and the digest of every row of its output, kept for :meth:`do_rows`. The time: on a
        GPU, events from after the flush to after the whole device is idle (any stream's work is
        inside); on a CPU, this clock (the caller bounds both by its own)."""
        refill(self.problem, self.inputs, o["seed"])
        if self.device.type == "cuda":
            self.flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = self._call(self.inputs)
            torch.cuda.synchronize(self.device)
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            out = self._call(self.inputs)
            ms = (time.perf_counter() - t0) * 1e3
        fault = plain_output_fault(out, tuple(self.problem.output_shape(self.sizes)), self.device)
        if fault:
            return ["fault", fault]
        self.out = out
        return ["timed", {"ms": float(ms), "digest": row_digest(out)}]

    def do_rows(self, o: dict) -> list:
        rows = self.out.index_select(0, torch.tensor(o["rows"], device=self.device))
        self.out = None
        return ["rows", rows]

    def do_peak(self, _o: dict) -> list:
        """Device memory one more call needs beyond what is allocated (GPU only; a figure for
        the records, no verdict rests on it)."""
        torch.cuda.synchronize(self.device)
        before = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self._call(self.inputs)
        torch.cuda.synchronize(self.device)
        return ["peak", (torch.cuda.max_memory_allocated(self.device) - before) / 1e6]

    def do_job(self, o: dict) -> list:
        """A function of fusedkit run on the candidate (an exercise's probe): its plain result."""
        module, _, name = o["job"].partition(":")
        job = getattr(sys.modules.get(module) or __import__(module, fromlist=[name]), name)
        build = _resolve_builder(o["spec"])
        return ["done", job(build=build, report=lambda _stage: None, problem_key=o["problem"],
                            device=str(self.device), **o["kwargs"])]

    def _call(self, inputs: list[torch.Tensor]) -> object:
        try:
            with torch.no_grad():
                return self.fn(*inputs)
        except Exception as e:  # noqa: BLE001 - a learner's kernel may fail in any way
            if _device_fault(e):
                raise
            raise KernelRaised(f"it raised {one_line(e)}") from None


def plain_output_fault(out: object, shape: tuple[int, ...], device: torch.device) -> str:
    """What is wrong with a returned object as the problem's output ("" when it is right)."""
    if type(out) is not torch.Tensor:   # a subclass can override comparisons or compute lazily
        return f"returned a {type(out).__module__}.{type(out).__qualname__}; expected a plain torch.Tensor"
    if out.device.type != device.type or (device.type == "cuda" and out.device.index != (
            device.index if device.index is not None else torch.cuda.current_device())):
        return f"output is on {out.device}, expected {device}: the device measured"
    if tuple(out.shape) != shape or out.dtype != torch.float32:
        return f"output is {tuple(out.shape)} {out.dtype}, expected {shape} torch.float32"
    return ""


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when the storages of ``a`` and ``b`` overlap."""
    if a.device != b.device:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes() and sa.nbytes() > 0 and sb.nbytes() > 0


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN payloads and signed zeros included)."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _device_fault(e: BaseException) -> bool:
    """An error that leaves the CUDA context unusable (an illegal address, a device assert)."""
    accel = getattr(torch, "AcceleratorError", None)
    text = str(e)
    return (accel is not None and isinstance(e, accel)) or "CUDA error" in text or \
        "illegal memory access" in text or "device-side assert" in text

