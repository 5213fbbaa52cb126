"""Ctrl-C, SIGTERM and SIGHUP on the command line: one line on stderr and exit status 2, from the
first instant, and nothing already done is lost; a second signal while the command stops
changes nothing.

Two phases. While the command starts (Python imports torch, pandas, nbclient: a second or two)
nothing has been done yet, so a signal ends the process at once with one line
(:func:`exit_while_starting`, which ``fusedkit/__init__.py`` installs before its first heavy
import when the process is the command, :func:`launched_as_command`). Once a command runs, a
signal raises :class:`Interrupted` in the main thread (:func:`raising`), so that the command
can say what it kept (the rows a bench measured, the reports a report built) before it exits.
The first such signal makes the others ignored: a second Ctrl-C while the command says what it
kept would otherwise end it with a traceback (exit status 130), the line unsaid.

The measuring workers lead sessions of their own (:mod:`fusedkit.harness.pool`), so a Ctrl-C at a
terminal reaches the command alone, which ends them. A run in a thread of its own (the
explorer's) stops at :func:`checkpoint`, between two orders to its worker.

Standard library only: this module is imported before torch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals a person, a job scheduler or a closed terminal sends to stop a command."""
EXIT_STATUS = 2
"""The exit status of a command stopped by a signal, as of one refused (see fusedkit.cli)."""


class Interrupted(KeyboardInterrupt):
    """A command stopped by SIGINT (Ctrl-C) or SIGTERM; ``str()`` says so, and what was kept.

    A KeyboardInterrupt, so that every ``except KeyboardInterrupt`` (and nothing that catches
    ``Exception``) sees a SIGTERM as it sees a Ctrl-C.
    """

    def __init__(self, message: str = "", signal_name: str = "SIGINT") -> None:
        self.signal_name = signal_name
        super().__init__(message or stopped_by(signal_name))


def stopped_by(signal_name: str = "SIGINT") -> str:
    """"interrupted" for a Ctrl-C, "interrupted by SIGTERM" for another signal: how a message
    about a stopped command begins."""
    return "interrupted" if signal_name == "SIGINT" else f"interrupted by {signal_name}"


def signal_name(e: BaseException) -> str:
    """The signal behind a KeyboardInterrupt (SIGINT unless :class:`Interrupted` says otherwise)."""
    return getattr(e, "signal_name", "SIGINT")


def launched_as_command() -> bool:
    """True when this process is ``python -m fusedkit`` or the ``fusedkit`` command (the
    console script), and not a notebook, a test or a script that imports fusedkit."""
    if Path(sys.argv[0]).name == "fusedkit":   # the console script
        return True
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(spec, "name", None) == "fusedkit.__main__":   # -m fusedkit, once runpy runs it
        return True
    if sys.argv[:1] != ["-m"]:   # runpy sets it so while it imports the package run by -m
        return False
    argv = getattr(sys, "orig_argv", [])
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "-m":
            return argv[i + 1:i + 2] == ["fusedkit"]
        if arg.startswith("-m"):
            return arg[2:] == "fusedkit"
    return False


def exit_while_starting() -> None:
    """Until :func:`raising` takes over: a signal writes one line and ends the process with
    :data:`EXIT_STATUS` (nothing has been done, so there is nothing to keep or clean up)."""
    def stop(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        with contextlib.suppress(OSError):   # after a SIGHUP the terminal may be gone
            os.write(2, f"{stopped_by(name)} while starting: nothing was done\n".encode())
        os._exit(EXIT_STATUS)

    for s in SIGNALS:
        signal.signal(s, stop)


@contextlib.contextmanager
def raising(keep_ignoring: bool = False) -> Iterator[None]:
    """Within: SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread, the
    first of them only: from then on they are ignored, so that a second one cannot cut short
    what the command does to stop (say what it kept, end its workers). After it, the handlers
    from before, unless it ended by a signal and ``keep_ignoring`` (a command about to exit:
    they stay ignored until it has). Outside the main thread (where Python delivers no signal)
    it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopped = False

    def interrupt(signum: int, _frame: object) -> None:
        nonlocal stopped
        stopped = True
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signal_name=signal.Signals(signum).name)

    before = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, interrupt)
    try:
        yield
    finally:
        if not (stopped and keep_ignoring):
            for s, handler in before.items():
                signal.signal(s, handler if handler is not None else signal.SIG_DFL)


# -- stopping a run that works in a thread of its own (the explorer's Run button) -------------

_run = threading.local()   # the stop event of the run this thread works for, if any
_ACTIVE: set[threading.Event] = set()   # every such run now working, in any thread


@contextlib.contextmanager
def stoppable(stop: threading.Event) -> Iterator[None]:
    """Within, in this thread: :func:`checkpoint` raises :class:`Interrupted` once ``stop`` is
    set (by a Cancel button, or by the kernel's interrupt through :func:`route_kernel_interrupt`)."""
    before = getattr(_run, "stop", None)
    _run.stop = stop
    _ACTIVE.add(stop)
    try:
        yield
    finally:
        _ACTIVE.discard(stop)
        _run.stop = before


def checkpoint() -> None:
    """Raise :class:`Interrupted` if the run this thread works for was asked to stop. The
    measuring path calls it between kernel calls, so a run stops after the call now running."""
    stop = getattr(_run, "stop", None)
    if stop is not None and stop.is_set():
        raise Interrupted()


_routed = False


def route_kernel_interrupt() -> bool:
    """Let the notebook toolbar's interrupt stop the runs working in threads (True when done).

    A run in a thread leaves the kernel idle, and an idle ipykernel ignores SIGINT: it sets
    SIG_IGN at start-up, and around each message it handles it installs Python's default
    handler, then restores the one it saved before (``Kernel.saved_sigint_handler``). Making
    that saved handler ours (once, from the main thread, inside a message handler such as a
    button's callback) puts ours in place between messages: it sets every active run's stop
    event, and does nothing when none is running, as SIG_IGN did. A cell that executes still
    gets its KeyboardInterrupt as before. False (and nothing changed) outside a kernel.
    """
    global _routed
    if _routed:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        from IPython import get_ipython  # noqa: PLC0415 - only inside a notebook
    except ImportError:
        return False
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None or not hasattr(kernel, "saved_sigint_handler"):
        return False
    previous = kernel.saved_sigint_handler

    def stop_runs(signum: int, frame: object) -> None:
        if _ACTIVE:
            for stop in list(_ACTIVE):
                stop.set()
        elif callable(previous):
            previous(signum, frame)

    kernel.saved_sigint_handler = stop_runs
    _routed = True
    return True
