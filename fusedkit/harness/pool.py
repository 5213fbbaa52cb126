"""The caller's side of the process line: a zygote started once forks a worker per candidate
(:mod:`fusedkit.harness.worker`); every order waits for its answer against this process's clock,
and what a worker may not touch (other processes, fusedkit's files) is checked from here."""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import io
import linecache
import marshal
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Callable, Iterator

import cloudpickle
import psutil
import torch

import fusedkit
from fusedkit.harness import wire
from fusedkit.harness.terms import CRASHED, FORBIDDEN, HUNG, LEFT_RUNNING, MALFORMED
from fusedkit.interrupts import checkpoint

START_TIMEOUT_S = 300.0
"""Seconds the zygote, or a worker's CUDA context, may take to start."""


class WorkerDied(Exception):
    """The worker ended, hung, or sent what it should not: ``line`` is the verdict."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


# -- the zygote -------------------------------------------------------------------------------

_lock = threading.RLock()
_zygote: tuple[subprocess.Popen, socket.socket] | None = None


def _ctl() -> socket.socket:
    """The zygote's control socket, the zygote started (again) if it is not running."""
    global _zygote
    if _zygote is not None and _zygote[0].poll() is None:
        return _zygote[1]
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE 0: no same-user process opens our memory
    ours, theirs = socket.socketpair()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTORCH_NVML_BASED_CUDA_CHECK="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               TORCHINDUCTOR_COMPILE_THREADS="1")
    start = f"from fusedkit.harness import worker; worker.zygote(worker.socket.socket(fileno={theirs.fileno()}))"
    proc = subprocess.Popen([sys.executable, "-c", start],
                            pass_fds=(theirs.fileno(),), start_new_session=True,
                            stdin=subprocess.DEVNULL, env=env)
    theirs.close()
    _zygote = proc, ours
    try:
        _read_int(ours, START_TIMEOUT_S)
    except (OSError, EOFError, TimeoutError) as e:
        proc.kill()
        raise ChildProcessError(f"the process that starts kernels' workers did not start "
                                f"({type(e).__name__}; exit code {proc.poll()})") from None
    return ours


def _read_int(sock: socket.socket, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    return struct.unpack("<q", bytes(wire.read_exact(sock, 8, deadline, lambda: None)))[0]


def _fork(device: torch.device) -> tuple[int, socket.socket]:
    with _lock:
        ctl = _ctl()
        ours, theirs = socket.socketpair()
        index = -1 if device.type == "cpu" else (device.index if device.index is not None
                                                 else torch.cuda.current_device())
        socket.send_fds(ctl, [struct.pack("<cq", b"f", index)], [theirs.fileno()])
        theirs.close()
        return _read_int(ctl, START_TIMEOUT_S), ours


def _exit_code(pid: int) -> int:
    """The ended worker's exit code (a negative signal number), from the zygote that reaped it."""
    with _lock:
        if _zygote is None or _zygote[0].poll() is not None:
            return 0
        _zygote[1].sendall(struct.pack("<cq", b"w", pid))
        return _read_int(_zygote[1], 30.0)


# -- a worker -----------------------------------------------------------------------------------

ANSWERS = {"build": {"built", "raised"}, "check": {"output", "raised", "fault"},
           "mutation": {"mutation"}, "time": {"timed", "raised", "fault"}, "rows": {"rows"},
           "peak": {"peak"}, "job": {"done", "raised"}}
"""The kinds of answer each order may get (the worker's side: :class:`~fusedkit.harness.worker.Session`)."""


class Worker:
    """One worker process for one candidate, and the socket to it."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.pid, self.sock = _fork(device)
        self.ready, self.ended = False, False

    def wait_ready(self) -> None:
        """Wait until it has started (its CUDA context made); one that cannot start is this
        machine's fault, not a kernel's: ChildProcessError, in one line."""
        if self.ready:
            return
        try:
            kind, body = wire.receive(self.sock, time.monotonic() + START_TIMEOUT_S, checkpoint, True)
        except (EOFError, OSError, TimeoutError, wire.Malformed) as e:
            self.stop()
            raise ChildProcessError(f"a worker process for {self.device} did not start "
                                    f"({type(e).__name__})") from None
        if kind != "ready":
            self.stop()
            raise ChildProcessError(f"a worker process for {self.device} did not start: {body}")
        self.ready = True

    def ask(self, order: dict, limit_s: float, what: str, knob: str = "call_timeout_s"
            ) -> tuple[str, object]:
        """Send ``order`` and return the (kind, body) of the answer, which must come within
        ``limit_s`` on this clock and be of a kind :data:`ANSWERS` allows the order; else
        :class:`WorkerDied` with the verdict (the worker ended)."""
        self.wait_ready()
        try:
            wire.send(self.sock, order)
            kind, body = wire.receive(self.sock, time.monotonic() + limit_s, checkpoint, True,
                                      wire.spin_s(self.device))
            if kind == "crashed" and isinstance(body, str) and body.startswith(CRASHED + ": "):
                self.stop()
                raise WorkerDied(f"{body}, during {what}")
            if kind == "error":   # the worker's own code failed: a kernel can make it, so a verdict
                last = str(body).strip().splitlines()[-1:] or ["no message"]
                raise wire.Malformed(f"the worker's code failed: {last[0][:300]}")
            if kind not in ANSWERS[order["op"]]:
                raise wire.Malformed(f"a {kind!r} answer to a {order['op']!r} order")
        except TimeoutError:
            self.stop()
            raise WorkerDied(f"{HUNG}: {what} did not return within {limit_s:g} s "
                             f"({knob} sets the limit)") from None
        except (EOFError, OSError):
            code = self.stop()
            if code == -signal.SIGSYS:
                raise WorkerDied(f"{FORBIDDEN}: during {what} it signalled or traced a process it "
                                 "did not start (its caller, say), opened a network socket or "
                                 "typed into a terminal; the worker was ended") from None
            how = signal.Signals(-code).name if -code in signal.valid_signals() else f"exit code {code}"
            raise WorkerDied(f"{CRASHED}: the process ended with {how}, during {what}") from None
        except wire.Malformed as e:
            self.stop()
            raise WorkerDied(f"{MALFORMED} ({e}), during {what}") from None
        except WorkerDied:
            raise
        except BaseException:
            self.stop()   # interrupted (Ctrl-C, Cancel): the worker is mid-order, so it goes
            raise
        return kind, body

    def descendants(self) -> list[psutil.Process]:
        """Every living process this worker started (orphans come back to it: a subreaper)."""
        with contextlib.suppress(psutil.Error):
            return [k for k in psutil.Process(self.pid).children(recursive=True)
                    if _status(k.pid) not in (psutil.STATUS_ZOMBIE, None)]
        return []

    def left_running(self) -> str:
        """The verdict when processes it started still run ("" when none do)."""
        left = self.descendants()
        if not left:
            return ""
        self.stop()
        return (f"{LEFT_RUNNING}: {len(left)} process(es) it started were still running after "
                f"its calls (pid {left[0].pid}); a kernel must end what it starts")

    def cpu_s(self) -> float:
        """CPU seconds used by the worker and every process it started, so far."""
        total = 0.0
        for p in [self.pid, *(k.pid for k in self.descendants())]:
            with contextlib.suppress(psutil.Error):
                t = psutil.Process(p).cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        return total

    def fit(self) -> bool:
        """Alive and not stopped: a candidate may have signalled the spare while it ran."""
        return not self.ended and _status(self.pid) not in (
            psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE, None)

    def stop(self) -> int:
        """End the worker, its process group and every process it started; its exit code. All
        are stopped first, until no new one appears, so none forks its way out."""
        if self.ended:
            return 0
        self.ended = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGSTOP)    # orphans come back to it while it waits
        frozen: dict[int, psutil.Process] = {}
        while kids := [k for k in self.descendants() if k.pid not in frozen]:
            for kid in kids:
                frozen[kid.pid] = kid
                with contextlib.suppress(psutil.Error):
                    kid.suspend()
        for kid in frozen.values():
            with contextlib.suppress(psutil.Error):
                kid.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.sock.close()
        return _exit_code(self.pid)


def _status(pid: int) -> str | None:
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).status()
    return None


_spares: dict[str, Worker] = {}
_live: set[Worker] = set()


@contextlib.contextmanager
def worker(device: torch.device) -> Iterator[Worker]:
    """A worker that has run nothing else, for one candidate; it is ended after, and the next
    one is already starting (its CUDA context made while this one works)."""
    with _lock:
        w = _spares.pop(str(device), None)
        if w is None or not w.fit():
            if w is not None:
                w.stop()
            w = Worker(device)
        _spares[str(device)] = Worker(device)
        _live.add(w)
    try:
        yield w
    finally:
        w.stop()
        _live.discard(w)


def settle(device: torch.device) -> None:
    """Wait until the spare started for ``device`` has made its CUDA context, which would share the
    GPU and its driver with the calls being timed (a spare that cannot start is replaced later)."""
    with _lock:
        w = _spares.get(str(device))
    if w is not None and w.fit():   # a stopped spare never starts; the next worker() replaces it
        with contextlib.suppress(ChildProcessError):
            w.wait_ready()


def stop_all() -> None:
    """End every worker and the zygote (at exit, or to start afresh)."""
    global _zygote
    with _lock:
        for w in [*_live, *_spares.values()]:
            w.stop()
        _live.clear()
        _spares.clear()
        if _zygote is not None:
            _zygote[0].kill()
            _zygote[1].close()
            _zygote[0].wait()
            _zygote = None


atexit.register(stop_all)


# -- what a worker is asked to build --------------------------------------------------------------

def builder_spec(problem, build: Callable) -> list:
    """``["pickled", bytes, extras]``: the builder by cloudpickle (by reference where it lives in
    an importable module, by value otherwise, so a notebook's own function travels too), with this
    process's ``sys.path`` (its modules import there too) and the source lines Python holds for
    code in no file (Triton reads a kernel's source there); ``["registered", problem, slug]`` for
    a registered builder that cannot be pickled. TypeError in one line when neither works."""
    try:
        buf = io.BytesIO()
        _KeepFileNames(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(build)
        sources = {n: e for n, e in list(linecache.cache.items())
                   if len(e) == 4 and (e[1] is None or not os.path.exists(n))}
        return ["pickled", _bytes(buf.getvalue()), _bytes(pickle.dumps((list(sys.path), sources)))]
    except Exception as e:  # noqa: BLE001 - whatever it holds that cannot travel
        for v in problem.variants.values():
            if v.build is build:
                return ["registered", problem.key, v.slug]
        raise TypeError(f"build={getattr(build, '__name__', build)!r} cannot be sent to the "
                        f"worker process that runs kernels ({type(e).__name__}: "
                        f"{str(e).splitlines()[0] if str(e) else ''}); build it from module-level "
                        "functions and plain data") from None


def _bytes(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _code_by_marshal(code: types.CodeType) -> tuple:
    return marshal.loads, (marshal.dumps(code),)   # the worker runs this very Python


def _jit_again(fn: Callable, options: dict) -> object:
    import triton  # noqa: PLC0415 - only a worker sent a Triton kernel imports Triton

    return triton.jit(fn, **options)


class _KeepFileNames(cloudpickle.Pickler):
    # cloudpickle names every code object "<dynamic-code>"; marshal keeps its file name, so an
    # error in the worker still points at the line of the cell it came from.
    dispatch_table = collections.ChainMap({types.CodeType: _code_by_marshal},
                                          cloudpickle.Pickler.dispatch_table)

    def reducer_override(self, obj: object) -> object:
        # A @triton.jit kernel compiled for a GPU holds a lock and its binaries: it travels as
        # its Python function and is jitted again in the worker's own Triton mode.
        jit = getattr(sys.modules.get("triton.runtime.jit"), "JITFunction", None)
        if jit is not None and type(obj) is jit:
            return _jit_again, (obj.fn, dict(
                version=obj.version, repr=obj._repr, launch_metadata=obj.launch_metadata,
                do_not_specialize=obj.do_not_specialize, debug=obj.debug, noinline=obj.noinline,
                do_not_specialize_on_alignment=obj.do_not_specialize_on_alignment))
        return super().reducer_override(obj)


# -- fusedkit's own files ---------------------------------------------------------------------------

class Sources:
    """fusedkit's files as they were before a candidate ran: :meth:`undo` names and restores any
    that changed, appeared or went while it ran (a cached ``.pyc`` written then is removed: no
    worker writes one, and the next import would trust it)."""

    ROOT = Path(fusedkit.__file__).resolve().parent
    _known: dict[Path, tuple[tuple, bytes]] = {}

    def __init__(self) -> None:
        self.before = self._stat()
        for path, key in self.before.items():
            if path.suffix != ".pyc" and self._known.get(path, ((), b""))[0] != key:
                with contextlib.suppress(OSError):
                    self._known[path] = key, path.read_bytes()

    def _stat(self) -> dict[Path, tuple]:
        out = {}
        for folder, _dirs, files in os.walk(self.ROOT):
            for name in files:
                path = Path(folder, name)
                with contextlib.suppress(OSError):
                    s = path.stat()
                    out[path] = (s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns)
        return out

    def undo(self) -> str:
        """"" when nothing changed; else the verdict, after putting every file back."""
        now = self._stat()
        changed = sorted(p for p in self.before.keys() | now.keys()
                         if self.before.get(p) != now.get(p))
        if not changed:
            return ""
        for path in changed:
            with contextlib.suppress(OSError):
                if path.suffix == ".pyc" or path not in self._known:
                    path.unlink()
                else:
                    path.write_bytes(self._known[path][1])
                    s = path.stat()
                    self._known[path] = ((s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns),
                                         self._known[path][1])
        named = [str(p.relative_to(self.ROOT.parent)) for p in changed if p.suffix != ".pyc"]
        if not named:
            return ""
        return (f"{FORBIDDEN}: it changed fusedkit's own files while it ran ({named[0]}"
                f"{f' and {len(named) - 1} more' if len(named) > 1 else ''}); they are put back")

