"""The candidate runs in a worker process; its verdict is reached here, where it never ran.

:func:`fusedkit.check.check_build` and :func:`fusedkit.measure.measure` send each build of a
candidate (a registered variant by name, a learner's builder pickled by value with cloudpickle)
to a :class:`Worker`: a process of its own, started from a clean server process, that builds
the model and the inputs from the seeds it is given, builds and calls the candidate, and sends
back only what the candidate produced (its outputs, or the rows of its timed outputs, and the raw
times). This process regenerates the same model and inputs from the same seeds and computes the
float64 reference, eager fp32, the comparison, the tier and every judgement of the times. So

- nothing the candidate patches or caches in its own process reaches a reference, a tolerance,
  a tier or the judgement of a time: that code never runs where the candidate ran;
- a crash (a segfault, an illegal memory access, which kills a CUDA context) ends the worker,
  not the caller: it is a verdict, ``the kernel crashed: ...``, and the next build gets a fresh
  worker; a call that makes no progress for :data:`CALL_TIMEOUT_S` seconds (a build for
  :data:`BUILD_TIMEOUT_S`: compiling takes minutes) is ``the kernel hung: ...`` and its worker is
  killed.

Each candidate gets a worker that has run nothing else (:func:`fresh`); its checked and timed
builds share it. The next worker is started while the current one works (forked from a server
process that has torch and fusedkit imported, its CUDA context made), so a new candidate
rarely waits for one.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import io
import linecache
import marshal
import math
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import multiprocessing.spawn
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import types
from dataclasses import dataclass
from typing import Callable, Iterator, NoReturn

import cloudpickle
import psutil
import torch

from fusedkit import interrupts, wire
from fusedkit.interrupts import checkpoint

ENV_FAULTS: dict[str, str] = {}
"""Variables of the environment that were set to something other than what they allow: named
by :func:`check_environment` in one line before anything runs (never a traceback at import)."""


def _env_seconds(name: str, default: float) -> float:
    """``$name`` as seconds (a finite number > 0), the default where unset; a bad value is kept
    in :data:`ENV_FAULTS` and the default stands in until it is named."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        ENV_FAULTS[name] = f"{name}={text!r} is not a number of seconds; allowed: a finite number > 0"
        return default
    return value


def check_environment() -> None:
    """Raise ValueError naming the first variable of the environment set to a bad value."""
    if ENV_FAULTS:
        raise ValueError(next(iter(ENV_FAULTS.values())))


def check_seconds(name: str, value: object) -> None:
    """Refuse a time limit that is not a finite number of seconds above 0 (one line naming it)."""
    allowed = "a finite number of seconds > 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}={value!r} is not a number; allowed: {allowed}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}={value!r} is out of range; allowed: {allowed}")


CALL_TIMEOUT_S = _env_seconds("FUSEDKIT_CALL_TIMEOUT_S", 60.0)
"""Seconds a call of the candidate may go without returning before it counts as hung."""
BUILD_TIMEOUT_S = _env_seconds("FUSEDKIT_BUILD_TIMEOUT_S", 900.0)
"""Seconds a build (compiling a CUDA or Triton kernel included) may take before it counts as hung."""

def _quiet_start(*args: object, **kwargs: object) -> object:
    """multiprocessing's start of a worker in the fork server, ended without a traceback when
    the caller went away while the worker was being started (a stopped command): the worker has
    nothing to do and no one to tell, and its traceback would sit beside the command's line."""
    try:
        return _spawn_main(*args, **kwargs)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        os._exit(0)


_spawn_main = multiprocessing.spawn._main
if interrupts.preloading_in_forkserver():   # only the fork server's own copy of this module
    multiprocessing.spawn._main = _quiet_start

CRASHED = "the kernel crashed"
HUNG = "the kernel hung"
MALFORMED = "the kernel's process sent a malformed report"
LEFT_RUNNING = "the kernel left processes running"

_START = "forkserver"   # a clean process (never this one's state), forked in ~0.1 s
_PRELOAD = ["fusedkit.isolation", "fusedkit.check", "fusedkit.measure"]


class WorkerDied(Exception):
    """The worker ended (a crash) or was ended (a hang): ``line`` is the verdict."""

    def __init__(self, line: str):
        super().__init__(line)
        self.line = line


# -- tensors across the pipe ---------------------------------------------------------------

def pack(t: torch.Tensor | None) -> torch.Tensor | None:
    """A tensor to send to the caller: its values as a plain contiguous host tensor, which
    :mod:`fusedkit.wire` sends as raw bytes (a tensor subclass or a lazy object never crosses)."""
    if t is None:
        return None
    return torch.Tensor(t.detach().to("cpu").contiguous())


def unpack(t: object, device: torch.device) -> torch.Tensor | None:
    """A tensor the caller received (:func:`fusedkit.wire.receive` made it from raw bytes), on
    ``device``; None stays None, and anything else is a malformed report."""
    if t is None:
        return None
    if type(t) is not torch.Tensor:
        raise wire.Malformed(f"a {type(t).__name__} where a tensor belongs")
    return t.to(device)


# -- what the worker is asked to build -----------------------------------------------------

def builder_spec(problem, build: Callable) -> tuple:
    """("pickled", bytes, sources): the builder itself (cloudpickle: by reference where it lives in
    an importable module, by value otherwise, so a notebook's own function travels too, and a
    registry entry replaced in this process is the one the worker runs); ("registered", problem,
    slug) for a registered builder that cannot be pickled. Raises TypeError in one line when
    neither works."""
    try:
        buf = io.BytesIO()
        _KeepFileNames(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(build)
        return ("pickled", buf.getvalue(), _unsaved_sources())
    except Exception as e:  # noqa: BLE001 - whatever it holds that cannot travel
        for v in problem.variants.values():   # the worker's registry holds the same one
            if v.build is build:
                return ("registered", problem.key, v.slug)
        raise TypeError(f"build={getattr(build, '__name__', build)!r} cannot be sent to the "
                        f"worker process that runs kernels ({type(e).__name__}: "
                        f"{str(e).splitlines()[0] if str(e) else ''}); build it from module-level "
                        "functions and plain data") from None


def _code_by_marshal(code: types.CodeType) -> tuple:
    return marshal.loads, (marshal.dumps(code),)   # the worker runs this very Python


def _triton_kernel_class() -> type | None:
    """Triton's JITFunction where Triton is imported (nothing is imported for the asking)."""
    jit = sys.modules.get("triton.runtime.jit")
    return getattr(jit, "JITFunction", None)


def _jit_again(fn: Callable, options: dict) -> object:
    """A ``@triton.jit`` kernel made anew from its Python function in the worker: in the
    worker's own Triton mode (compiled for its GPU, or interpreted), compiled there on first use
    or loaded from Triton's cache on disk."""
    import triton  # noqa: PLC0415 - only a worker sent a Triton kernel imports Triton

    return triton.jit(fn, **options)


def _jit_options(kernel: object) -> dict:
    """The arguments of ``triton.jit`` that made ``kernel`` (its compiled state stays behind)."""
    return dict(version=kernel.version, repr=kernel._repr, launch_metadata=kernel.launch_metadata,
                do_not_specialize=kernel.do_not_specialize,
                do_not_specialize_on_alignment=kernel.do_not_specialize_on_alignment,
                debug=kernel.debug, noinline=kernel.noinline)


class _KeepFileNames(cloudpickle.Pickler):
    # cloudpickle names every code object "<dynamic-code>"; marshal keeps its file name, so an
    # error in the worker still points at the line of the cell it came from.
    dispatch_table = collections.ChainMap({types.CodeType: _code_by_marshal},
                                          cloudpickle.Pickler.dispatch_table)

    def reducer_override(self, obj: object) -> object:
        # A @triton.jit kernel compiled for a GPU holds a lock and its compiled binaries (in the
        # interpreter it is a plain object, which is why a CPU never saw this): it travels as
        # its Python function (by value, its source lines with it) and is jitted again there.
        # An autotuned or heuristic kernel wraps one and travels whole around it.
        jit = _triton_kernel_class()
        if jit is not None and type(obj) is jit:
            return _jit_again, (obj.fn, _jit_options(obj))
        return super().reducer_override(obj)


def _unsaved_sources() -> dict:
    """The source lines Python holds for code that is in no file (a notebook's cells, an
    exercise's kernel): Triton reads a kernel's source, and an error names its line, from
    :mod:`linecache`, which the worker must then hold too."""
    return {name: entry for name, entry in list(linecache.cache.items())
            if len(entry) == 4 and (entry[1] is None or not os.path.exists(name))}


def _resolve_builder(spec: tuple) -> Callable:
    if spec[0] == "registered":
        from fusedkit import problems  # noqa: PLC0415

        return problems.get(spec[1]).variant(spec[2]).build
    linecache.cache.update(spec[2])
    return pickle.loads(spec[1])


# -- the worker ------------------------------------------------------------------------------

def is_device_fault(e: BaseException) -> bool:
    """True for an error that leaves the CUDA context unusable (an illegal address, a launch
    failure, a device-side assert): the process cannot go on."""
    accel = getattr(torch, "AcceleratorError", None)
    text = str(e)
    return (accel is not None and isinstance(e, accel)) or "CUDA error" in text or \
        "illegal memory access" in text or "device-side assert" in text


def _child(conn, progress, device: str) -> None:
    """The worker's loop: one job at a time, each (kind, args) answered ("done", result),
    ("crashed", line) after a device fault (then it exits) or ("error", traceback) for a fault
    of the harness itself. A job may ``ask`` the caller a question (plain data) and gets the
    caller's answer."""
    # A session and process group of its own: a signal the kernel sends its group stays there,
    # and whatever it starts is ended with the group; orphans of its children come back to it.
    os.setsid()
    _adopt_orphans()
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")   # no compile pool left running
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the caller decides; Ctrl-C reaches it
    # Blocked since the fork server started (Worker.start); ignored now, so what the kernel
    # starts gets the usual mask.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def say(message: object) -> None:
        try:
            wire.send(conn, message)
        except OSError:   # the caller has gone (stopped, say): no one to tell, nothing to keep
            os._exit(0)

    try:
        if device.startswith("cuda"):   # its CUDA context now, while it waits as the spare
            _use_gpu(torch.device(device))
            torch.empty(1, device=device)
        else:
            # One thread: the caller orders each timed call, so between calls the worker waits
            # on its pipe, and a pool of threads gone to sleep meanwhile costs a scheduler tick
            # (ms) to wake at the next call: the time of the waking, not of the kernel.
            torch.set_num_threads(1)
    except Exception as e:  # noqa: BLE001 - this machine's fault, told to the caller in one line
        say(("error", one_line(e)))
        os._exit(1)
    say(("ready", os.getpid()))
    stage = ["starting"]

    def report(text: str) -> None:
        stage[0] = text
        say(("stage", text))

    def ask(question: object) -> object:
        say(("ask", question))
        try:
            return conn.recv()   # from the caller, which is trusted: its own pickle
        except (EOFError, OSError):
            os._exit(0)

    while True:
        try:
            job, spec, kwargs = conn.recv()   # the job is a function of fusedkit, by reference
        except (EOFError, OSError):   # the caller has gone: nothing to do, no one to tell
            return
        if job is None:
            return
        try:
            device = torch.device(kwargs["device"])
            if device.type == "cuda":
                _use_gpu(device)
            report("the build")
            build = _resolve_builder(spec)
            with harness_stream(device):
                result = job(build=build, report=report, progress=progress, ask=ask, **kwargs)
            say(("done", result))
            del result, build   # nothing of this job is held while the caller judges it
        except BaseException as e:  # noqa: BLE001 - sent to the caller, never lost
            if is_device_fault(e) or not isinstance(e, Exception):
                # A dead CUDA context, or the kernel raised SystemExit or KeyboardInterrupt (Ctrl-C
                # itself goes to the caller): this worker cannot go on.
                say(("crashed", f"{CRASHED}: {one_line(e)}, during {stage[0]}"))
                os._exit(1)   # nothing here can be trusted to clean up
            say(("error", traceback.format_exc()))


def _adopt_orphans() -> None:
    """Make this process the one that a descendant's orphans are given to (Linux's child
    subreaper), so that every process a kernel starts stays among its descendants, where the
    caller finds it; nothing where there is no prctl."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER


def _use_gpu(device: torch.device) -> None:
    """Make ``device`` current; "cuda" without an index is the current one already
    (torch.cuda.set_device refuses a device without an index)."""
    if device.index is not None:
        torch.cuda.set_device(device.index)


def one_line(e: BaseException) -> str:
    """An exception as ``Type: first line of its message`` (long compiler output cut)."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else '(no message)'}"


def _signal_name(code: int) -> str:
    try:
        sig = signal.Signals(-code)
        return f"{sig.name} ({signal.strsignal(sig) or ''})".replace(" ()", "")
    except ValueError:
        return f"exit code {code}"


@contextlib.contextmanager
def _without_main() -> Iterator[None]:
    """Start a worker without the caller's ``__main__``: multiprocessing would import the
    caller's script again in it (running a script's measurements twice, or failing); builders
    travel by value, so the worker needs nothing from it."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


@dataclass
class Worker:
    """One worker process and the pipe to it."""

    process: multiprocessing.process.BaseProcess
    conn: object
    progress: object          # the timed call counter the worker writes (a shared integer)
    device: str
    ready: bool = False       # it said it has started (its imports done, its CUDA context made)

    @classmethod
    def start(cls, device: str) -> "Worker":
        ctx = multiprocessing.get_context(_START)
        if _START == "forkserver":
            ctx.set_forkserver_preload(_PRELOAD)
            # The server inherits this environment when it starts: it must check for CUDA through
            # NVML, with no CUDA runtime of its own, or no worker it forks can use CUDA
            # ("Cannot re-initialize CUDA in forked subprocess", every check on a GPU).
            os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
            # Started (or started again, if it was ended) with SIGINT blocked, which it and every
            # worker it forks inherit: a Ctrl-C at the terminal reaches them all, and while they
            # start it would end them or print a traceback beside the command's one line. The
            # resource tracker first: starting it unblocks SIGINT in this thread.
            multiprocessing.resource_tracker.ensure_running()
            with interrupts.sigint_blocked():
                multiprocessing.forkserver.ensure_running()
        ours, theirs = ctx.Pipe()
        progress = ctx.Value("q", 0, lock=False)
        p = ctx.Process(target=_child, args=(theirs, progress, device), daemon=True,
                        name=f"fusedkit-worker-{device}")
        with _without_main():
            p.start()
        theirs.close()
        return cls(p, ours, progress, device)

    def alive(self) -> bool:
        return self.process.is_alive()

    def wait_ready(self, timeout_s: float = 300.0) -> None:
        """Wait until the worker has started; a worker that cannot start (no CUDA there, say)
        is a fault of this machine, not of a kernel: ChildProcessError (an OSError, so the
        command line says it in one line), naming why."""
        if self.ready:
            return
        t0 = time.monotonic()
        while not self.conn.poll(0.05):
            checkpoint()
            if not self.process.is_alive() or time.monotonic() - t0 > timeout_s:
                self.stop(kill=True)
                code = self.process.exitcode
                self._not_started(f"not within {timeout_s:g} s" if code is None
                                  else f"it ended with {_signal_name(code)}")
        try:
            kind, body = _message(wire.receive(self.conn))
        except (EOFError, OSError, wire.Malformed) as e:
            self.stop(kill=True)   # reaps it: its exit code is known
            code = self.process.exitcode
            self._not_started(f"it ended with {_signal_name(code)}" if code is not None else
                              f"{type(e).__name__}: {e}")
        if kind == "error":
            self.stop(kill=True)
            self._not_started(str(body))
        if kind != "ready":
            self.stop(kill=True)
            self._not_started(f"it said {kind!r} before it was ready")
        self.ready = True

    def _not_started(self, why: str) -> NoReturn:
        raise ChildProcessError(f"the worker process for {self.device} did not start: {why}")

    def stop(self, kill: bool = False) -> None:
        """End the worker and every process it started (its process group)."""
        if self.process.is_alive() and not kill:
            try:
                self.conn.send((None, None, None))
                self.process.join(2.0)
            except (OSError, ValueError):
                pass
        _end_group(self.process)
        self.conn.close()

    def run(self, job: Callable, spec: tuple, kwargs: dict, call_timeout_s: float,
            timeline: list | None = None, answer: Callable[[object], object] | None = None,
            calls: int = 0, build_timeout_s: float = BUILD_TIMEOUT_S) -> object:
        """Send one job and wait for its result, watching for a crash, a hang and an interrupt.
        Raises :class:`WorkerDied` with the verdict line when the worker dies, hangs, or sends
        anything but the data it should (:mod:`fusedkit.wire`; nothing it sends is unpickled).

        The watchdog is this process's clock alone: the build may take
        :data:`BUILD_TIMEOUT_S` from the job's start, each of the job's ``calls`` calls
        ``call_timeout_s`` from its stage's start, and no stage message extends the job's
        whole allowance (the build's and one call's limit per call). A job that asks the caller
        (``ask`` in the worker) gets ``answer(question)`` back; each answer starts one call's
        limit anew. Each stage the worker announces is appended to ``timeline`` as (stage, this
        process's monotonic clock when it arrived), the result's arrival as ("done", time)."""
        self.wait_ready()
        self.progress.value = 0
        self.conn.send((job, spec, kwargs))
        start = since = time.monotonic()
        stage, changes = "the build", 0
        deadline = start + build_timeout_s + call_timeout_s * (calls + 1)
        timeline = timeline if timeline is not None else []
        while True:
            try:
                checkpoint()   # a run asked to stop: the worker is mid-job, so it goes
            except BaseException:
                self.stop(kill=True)
                raise
            if self.conn.poll(0.05):
                try:
                    kind, body = _message(wire.receive(self.conn))
                except (EOFError, OSError):
                    kind, body = None, None
                except wire.Malformed as e:
                    self.stop(kill=True)
                    raise WorkerDied(f"{MALFORMED} ({e}), during {stage}") from None
                if kind is None:
                    _end_group(self.process)
                    raise WorkerDied(f"{CRASHED}: the process ended with "
                                     f"{_signal_name(self.process.exitcode or 0)}, during {stage}")
                now = time.monotonic()
                if kind == "stage":
                    # A new stage starts its own limit; the same one again, or more stages than
                    # a job has, starts nothing (a heartbeat is not progress).
                    if body != stage and changes < MAX_STAGES:
                        changes += 1
                        since = now
                    stage = body
                    timeline.append((stage, now))
                    continue
                if kind == "ask":
                    if answer is None:
                        self.stop(kill=True)
                        raise WorkerDied(f"{MALFORMED} (a question the job does not ask), "
                                         f"during {stage}")
                    try:
                        reply = answer(body)
                    except wire.Malformed as e:
                        self.stop(kill=True)
                        raise WorkerDied(f"{MALFORMED} ({e}), during {stage}") from None
                    since = time.monotonic()   # one call's limit from here
                    deadline = max(deadline, since + call_timeout_s)
                    self.conn.send(reply)
                    continue
                if kind == "done":
                    timeline.append(("done", now))
                    left = _descendants(self.process.pid)
                    if left:
                        self.stop(kill=True)
                        raise WorkerDied(f"{LEFT_RUNNING}: {len(left)} process(es) it started were "
                                         f"still running when it returned (pid {left[0]}); a "
                                         "kernel must end what it starts")
                    return body
                if kind == "crashed":
                    _end_group(self.process)
                    raise WorkerDied(body)
                raise RuntimeError(f"the harness failed in the worker process:\n{body}")
            if not self.process.is_alive() and not self.conn.poll(0):
                _end_group(self.process)
                raise WorkerDied(f"{CRASHED}: the process ended with "
                                 f"{_signal_name(self.process.exitcode or 0)}, during {stage}")
            now = time.monotonic()
            limit = build_timeout_s if stage == "the build" else call_timeout_s
            if now - since > limit or now > deadline:
                self.stop(kill=True)
                count = self.progress.value
                what = f"timed call {count}" if stage == "timed calls" and count else stage
                knob = "build_timeout_s" if stage == "the build" else "call_timeout_s"
                raise WorkerDied(f"{HUNG}: {what} did not return within {limit:g} s "
                                 f"({knob} sets the limit)")


MAX_STAGES = 12
"""The most stage changes one job makes (a check's: the build, its calls; a timing's: the build,
the timed calls, the device-wide timing); more restart no limit."""
_KINDS = {"ready": int, "stage": str, "ask": object, "done": object, "crashed": str, "error": str}


def _message(msg: object) -> tuple[str, object]:
    """(kind, body) of a message the worker sent, checked: a pair whose kind is one of
    :data:`_KINDS` and whose body is of that kind's type; a crash's line starts as one."""
    if not (isinstance(msg, list) and len(msg) == 2 and isinstance(msg[0], str) and msg[0] in _KINDS):
        raise wire.Malformed(f"a message that is not one of {', '.join(_KINDS)}")
    kind, body = msg
    want = _KINDS[kind]
    if want is not object and (type(body) is not want or (want is str and len(body) > 100_000)):
        raise wire.Malformed(f"a {kind!r} message whose body is not a {want.__name__}")
    if kind == "crashed" and not body.startswith(CRASHED + ": "):
        raise wire.Malformed("a crash report that does not say the kernel crashed")
    if kind == "stage":
        body = body[:300]
    return kind, body


def _descendants(pid: int | None) -> list[int]:
    """The pids of every living descendant of ``pid`` (a zombie counts as ended)."""
    if pid is None:
        return []
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    alive = []
    for k in kids:
        with contextlib.suppress(psutil.Error):
            if k.status() != psutil.STATUS_ZOMBIE:
                alive.append(k.pid)
    return alive


def _end_group(process: multiprocessing.process.BaseProcess) -> None:
    """Kill the worker, every process of its process group (it leads one of its own) and every
    other descendant (one that left the group), then reap the worker."""
    pid = process.pid
    if pid is not None:
        for kid in _descendants(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(kid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    if process.is_alive():
        process.kill()
    process.join(5.0)


_workers: dict[str, Worker] = {}   # the worker of the candidate being measured, per device
_spares: dict[str, Worker] = {}    # the next one, started while this one works
_lock = threading.RLock()


def fresh(device: str | torch.device) -> None:
    """Give the next candidate on ``device`` a worker that has run nothing: the current one
    ends, the spare (started in the background while the last candidate ran, its CUDA context
    already made) takes its place, and a new spare starts. :func:`fusedkit.check.check_variant`
    calls this first, so each candidate's builds, checked and timed, share one worker and no
    other candidate ever ran there (nor what it patched or left running)."""
    key = str(device)
    with _lock:
        retire(key)
        spare = _spares.pop(key, None)
        _workers[key] = spare if spare is not None and spare.alive() else Worker.start(key)
        _spares[key] = Worker.start(key)


def run(job: Callable, problem, build: Callable, device: torch.device, *,
        call_timeout_s: float = CALL_TIMEOUT_S, timeline: list | None = None,
        answer: Callable[[object], object] | None = None, calls: int = 1,
        build_timeout_s: float = BUILD_TIMEOUT_S, **kwargs) -> object:
    """Run ``job(build=, report=, progress=, problem_key=, device=, **kwargs)`` (a module-level
    function of fusedkit: :func:`fusedkit.check.candidate_calls`,
    :func:`fusedkit.measure.candidate_timing`) on ``build`` for ``problem`` on ``device`` in the
    current worker (a fresh one when there is none or it ended); returns its result, or raises
    :class:`WorkerDied` with the verdict (the worker is then ended). ``timeline`` collects the
    job's stages on this process's clock; ``answer`` answers the job's questions; ``calls`` is
    how many calls of the kernel the job makes besides those it asks for (:meth:`Worker.run`)."""
    spec = builder_spec(problem, build)
    key = str(device)
    with _lock:
        w = _workers.get(key)
        if w is None or not w.alive():
            fresh(key)
            w = _workers[key]
        try:
            return w.run(job, spec, dict(kwargs, problem_key=problem.key, device=key),
                         call_timeout_s, timeline, answer, calls, build_timeout_s)
        except BaseException:
            retire(key)
            raise


def retire(device: str | torch.device | None = None) -> None:
    """End the current worker for ``device`` (every worker, spares too, when None): the next
    job gets a fresh one. Called after a fault that leaves a worker's state in doubt."""
    with _lock:
        pools = [_workers] if device is not None else [_workers, _spares]
        for pool in pools:
            for key in [str(device)] if device is not None else list(pool):
                w = pool.pop(key, None)
                if w is not None:
                    w.stop(kill=not w.alive())


atexit.register(retire)


def seconds_between(timeline: list, start: str, end: str) -> float:
    """Seconds on this process's clock from the last ``start`` stage of ``timeline`` to the first
    stage after it that begins with ``end`` (NaN when either is missing)."""
    starts = [i for i, (stage, _) in enumerate(timeline) if stage == start]
    if not starts:
        return float("nan")
    i = starts[-1]
    t0 = timeline[i][1]
    return next((t - t0 for stage, t in timeline[i + 1:] if stage.startswith(end)), float("nan"))


@contextlib.contextmanager
def harness_stream(device: torch.device) -> Iterator[None]:
    """A stream of the harness's own made current on a GPU (nothing on a CPU): a kernel that
    launches on the default stream instead of the current one is then seen to do so."""
    if device.type != "cuda":
        yield
        return
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        yield
    torch.cuda.current_stream(device).wait_stream(stream)


__all__ = ["BUILD_TIMEOUT_S", "CALL_TIMEOUT_S", "CRASHED", "ENV_FAULTS", "HUNG", "LEFT_RUNNING",
           "MALFORMED", "Worker", "WorkerDied", "check_environment", "check_seconds",
           "builder_spec", "fresh", "harness_stream", "is_device_fault", "one_line", "pack",
           "retire", "run", "seconds_between", "unpack"]
