"""``python -m fusedkit bench`` answers bad input and faults with one ``error:`` line and exit 2.

Every refusal here must come before anything is measured: the ``no_measuring`` fixture
makes the runner and the sweep fail the test if they are reached at all.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from fusedkit import records
from fusedkit.check import MAX_SEEDS
from fusedkit.cli import main

REPO = Path(__file__).resolve().parent.parent
TINY = ["--problem", "p12", "--sizes", "batch_size=4,in_features=8,out_features=8"]
GPU = torch.cuda.is_available()


def one_line(err: str, *phrases: str) -> str:
    """The single stderr line, after checking it says each of ``phrases`` and is no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    return lines[0]


@pytest.fixture
def no_measuring(monkeypatch):
    """Fail the test if the bench gets as far as measuring anything."""
    def measured(*args, **kwargs):
        raise AssertionError("the bench started measuring before refusing its input")
    monkeypatch.setattr("fusedkit.runner.run_ladder", measured)
    monkeypatch.setattr("fusedkit.sweep.run_sweep", measured)


def valid_records(path: Path) -> bytes:
    """A records file holding one valid row; returns its bytes."""
    ctx = records.RunContext(run_id="20261129T091500Z-abcdef", timestamp="2026-11-29T09:15:00Z",
                             commit="1a2b3c4", device="cpu: test", driver="", cuda="",
                             torch="2.11.0", triton="")
    records.append_rows(path, [records.make_row(ctx, problem="p12", sizes="batch_size=4",
                                                variant="eager", timer="cpu-wall", median_ms=1.0)])
    return path.read_bytes()


# --- argument values -------------------------------------------------------------------------

@pytest.mark.parametrize("value,phrase", [("0", "--seeds=0"), ("-1", "--seeds=-1"),
                                          ("two", "--seeds='two'"),
                                          ("1000000000", "--seeds=1000000000 is too large")])
def test_seeds_must_be_an_integer_from_1_to_the_maximum(value, phrase, tmp_path, capsys, no_measuring):
    """A billion seeds was drawn as a list of a billion items and OOM-killed without a word."""
    assert main(["bench", *TINY, "--seeds", value, "--records", str(tmp_path / "r.csv")]) == 2
    one_line(capsys.readouterr().err, "error: ", phrase, f"allowed: an integer from 1 to {MAX_SEEDS}")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-5", "fast"])
def test_rep_ms_must_be_finite_and_positive(value, tmp_path, capsys, no_measuring):
    assert main(["bench", *TINY, f"--rep-ms={value}", "--records", str(tmp_path / "r.csv")]) == 2
    one_line(capsys.readouterr().err, "error: ", "--rep-ms=", "allowed: a finite number > 0")


@pytest.mark.parametrize("value,phrases", [
    ("", ["--variants is empty", "allowed: "]),
    (",", ["--variants is empty", "allowed: "]),
    ("eager,,compile", ["--variants='eager,,compile'", "name 2 is empty"]),
    ("eager,eager", ["--variants='eager,eager'", "eager twice", "each once"]),
])
def test_variants_must_name_distinct_variants(value, phrases, tmp_path, capsys, no_measuring):
    assert main(["bench", *TINY, "--variants", value, "--records", str(tmp_path / "r.csv")]) == 2
    one_line(capsys.readouterr().err, "error: ", *phrases)
    assert not (tmp_path / "r.csv").exists()


def test_a_size_given_twice_is_refused(tmp_path, capsys, no_measuring):
    argv = ["bench", "--problem", "p12", "--sizes", "batch_size=8,batch_size=16",
            "--records", str(tmp_path / "r.csv")]
    assert main(argv) == 2
    one_line(capsys.readouterr().err, "error: batch_size is given twice", "each size once")


@pytest.mark.parametrize("argv,phrase", [
    ([], "arguments are required: command"),
    (["bench"], "arguments are required: --problem"),
    (["bench", "--problem", "p12", "--bogus"], "unrecognized arguments: --bogus"),
    (["bench", "--problem", "p12", "--records", ""], "--records='' is empty"),
])
def test_usage_errors_are_one_line_without_usage_block(argv, phrase, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage:" not in one_line(err, "error: ", phrase)


def test_help_still_exits_zero(capsys):
    assert main(["bench", "--help"]) == 0
    assert "--rep-ms" in capsys.readouterr().out


# --- the records location, checked before the first measurement -----------------------------

def test_records_naming_a_folder_is_refused(tmp_path, capsys, no_measuring):
    assert main(["bench", *TINY, "--records", str(tmp_path)]) == 2
    one_line(capsys.readouterr().err, "error: --records: ", str(tmp_path), "is a folder")


@pytest.mark.parametrize("how", ["path under a file", "folder not writable"])
def test_unwritable_records_location_is_refused(how, tmp_path, capsys, no_measuring):
    folder = tmp_path / "locked"
    folder.mkdir()
    if how == "path under a file":
        (tmp_path / "afile").write_text("not a folder\n")
        path, phrase = tmp_path / "afile" / "records.csv", "is a file, not a folder"
    else:   # as root too: root could write into it, but its mode says keep it as it is
        path, phrase = folder / "records.csv", "is not writable (mode 0o555)"
        folder.chmod(0o555)
    try:
        assert main(["bench", *TINY, "--records", str(path)]) == 2
    finally:
        folder.chmod(0o755)   # so that pytest can remove tmp_path
    one_line(capsys.readouterr().err, "error: --records: ", str(path), phrase)
    assert not path.exists()


def test_read_only_records_file_is_refused_and_kept(tmp_path, capsys, no_measuring):
    path = tmp_path / "r.csv"
    before = valid_records(path)
    path.chmod(0o444)
    assert main(["bench", *TINY, "--records", str(path)]) == 2
    one_line(capsys.readouterr().err, "error: --records: ", str(path), "read-only", "0o444")
    assert path.read_bytes() == before and (path.stat().st_mode & 0o777) == 0o444


@pytest.mark.parametrize("sweep", [False, True])
@pytest.mark.parametrize("corrupt,phrase", [
    (lambda text: text + "a,b,c\n", ":3: wrong field count: 3 fields"),
    (lambda text: text.replace("run_id,", "run,", 1), ":1: header is not the current schema"),
])
def test_corrupt_records_file_is_found_before_measuring(corrupt, phrase, sweep, tmp_path, capsys,
                                                        no_measuring):
    path = tmp_path / "r.csv"
    bad = corrupt(valid_records(path).decode()).encode()
    path.write_bytes(bad)
    extra = ["--sweep", "batch_size=2,4"] if sweep else []
    assert main(["bench", *TINY, *extra, "--records", str(path)]) == 2
    one_line(capsys.readouterr().err, "error: --records: ", f"{path}{phrase}")
    assert path.read_bytes() == bad


# --- faults raised while benching -------------------------------------------------------------

@pytest.mark.parametrize("fault", [
    PermissionError(13, "Permission denied", "/data/records.csv"),
    IsADirectoryError(21, "Is a directory", "/data/records.csv"),
    FileNotFoundError(2, "No such file or directory", "/data/x.cu"),
    OSError(28, "No space left on device"),
    records.RecordsError("/data/records.csv:7: wrong field count: 3 fields"),
    ValueError("first line\n  second line of a library's message"),
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                 "memory: you tried to allocate 4294967296 bytes. Error code 12"),
    MemoryError("no room"),
])
def test_faults_under_bench_are_one_line(fault, tmp_path, capsys, monkeypatch):
    """An allocation that fails under a memory limit smaller than the budget was a 31-line
    RuntimeError traceback."""
    def fails(*args, **kwargs):
        raise fault
    monkeypatch.setattr("fusedkit.runner.run_ladder", fails)
    assert main(["bench", *TINY, "--records", str(tmp_path / "r.csv")]) == 2
    line = one_line(capsys.readouterr().err, "error: ")
    expect = getattr(fault, "strerror", None) or " ".join(t.strip() for t in str(fault).splitlines())
    assert expect in line


def test_debug_setting_shows_the_traceback(tmp_path, monkeypatch):
    def fails(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/data/records.csv")
    monkeypatch.setattr("fusedkit.runner.run_ladder", fails)
    monkeypatch.setenv("FUSEDKIT_DEBUG", "1")
    with pytest.raises(PermissionError):
        main(["bench", *TINY, "--records", str(tmp_path / "r.csv")])


def test_interrupt_counts_the_rows_kept(tmp_path, capsys, monkeypatch):
    """In process: a Ctrl-C after one row was appended reports that row, exit 2; a row another
    bench appended meanwhile to the same file is not counted (it said "2 rows")."""
    path = tmp_path / "r.csv"

    def one_row_then_ctrl_c(*args, ctx, **kwargs):
        valid_records(path)   # another run's row
        records.append_rows(path, [records.make_row(ctx, problem="p12", sizes="batch_size=4",
                                                    variant="eager", timer="cpu-wall", median_ms=1.0)])
        raise KeyboardInterrupt
    monkeypatch.setattr("fusedkit.runner.run_ladder", one_row_then_ctrl_c)
    try:
        rc = main(["bench", *TINY, "--records", str(path)])
    except KeyboardInterrupt:   # escaping, it would stop the whole pytest session
        pytest.fail("main let KeyboardInterrupt escape")
    assert rc == 2
    one_line(capsys.readouterr().err, "interrupted: 1 row measured before the interrupt is kept in",
             str(path))


def test_an_interrupt_before_the_first_measurement_says_nothing_was_written(tmp_path, capsys,
                                                                           monkeypatch):
    """A Ctrl-C while the bench checked its records file (or imported torch, or collected its
    run's context) said only "interrupted"; seen once in 24 Ctrl-Cs at random instants."""
    def ctrl_c(path):
        raise KeyboardInterrupt
    monkeypatch.setattr("fusedkit.records.preflight", ctrl_c)
    path = tmp_path / "r.csv"
    assert main(["bench", *TINY, "--records", str(path)]) == 2
    one_line(capsys.readouterr().err,
             "interrupted before the first measurement: nothing was measured or written")
    assert not path.exists()


def test_a_worker_that_cannot_start_is_one_line(tmp_path, capsys, monkeypatch):
    """On the H200 the bench printed a 30-line traceback ending "the worker process for cuda did not
    start ()" when its worker could not make a CUDA context: a fault of the machine, one line."""
    from fusedkit import isolation

    def cannot(self, timeout_s=300.0):
        self.stop(kill=True)
        self._not_started("RuntimeError: Cannot re-initialize CUDA in forked subprocess")
    monkeypatch.setattr(isolation.Worker, "wait_ready", cannot)
    assert main(["bench", *TINY, "--variants", "eager", "--records", str(tmp_path / "r.csv")]) == 2
    one_line(capsys.readouterr().err, "error: the worker process for cpu did not start: "
             "RuntimeError: Cannot re-initialize CUDA")


def fusedkit_child(*args: str, cwd: Path = REPO) -> subprocess.Popen:
    """``python -m fusedkit ARGS`` in a process of its own, its output captured."""
    return subprocess.Popen([sys.executable, "-m", "fusedkit", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "FUSEDKIT_DEBUG": "", "PYTHONPATH": str(REPO)})


def stop(child: subprocess.Popen, signum: int, timeout: float = 60) -> tuple[str, str]:
    """Send ``signum`` to ``child`` and collect its output (killing it if it does not end)."""
    try:
        child.send_signal(signum)
        return child.communicate(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("signum,how", [(signal.SIGINT, "interrupted: "),
                                        (signal.SIGTERM, "interrupted by SIGTERM: "),
                                        (signal.SIGHUP, "interrupted by SIGHUP: ")])
def test_a_signal_during_a_bench_keeps_measured_rows(signum, how, tmp_path):
    """A real Ctrl-C (SIGINT), SIGTERM or SIGHUP (a closed terminal) once the first row is on
    disk: one line, exit 2, rows kept. SIGTERM used to end the bench silently, SIGHUP with
    exit status 129."""
    path = tmp_path / "r.csv"
    child = fusedkit_child("bench", "--problem", "p12", "--sizes",
                           "batch_size=64,in_features=256,out_features=256",
                           "--variants", "eager,addmm_alpha_beta", "--seeds", "50", "--rep-ms", "2000",
                           "--records", str(path))
    deadline = time.monotonic() + 60
    while not (path.exists() and len(records.read_records(path)) >= 1):
        if child.poll() is not None or time.monotonic() > deadline:
            out, err = stop(child, signal.SIGKILL)
            pytest.fail(f"no row was recorded within 60 s: {err}")
        time.sleep(0.05)
    out, err = stop(child, signum, timeout=30)
    assert child.returncode == 2, (out, err)
    kept = records.read_records(path)   # still a valid file
    assert len(kept) >= 1 and kept["variant"].iloc[0] == "eager"
    n = len(kept)
    one_line(err, how, f"{n} row{'' if n == 1 else 's'} measured", str(path))


def bench_with_a_row(path: Path) -> subprocess.Popen:
    """A bench in a process of its own, once its first row is on disk."""
    child = fusedkit_child("bench", "--problem", "p12", "--sizes",
                           "batch_size=64,in_features=256,out_features=256",
                           "--variants", "eager,addmm_alpha_beta", "--seeds", "50", "--rep-ms", "2000",
                           "--records", str(path))
    deadline = time.monotonic() + 60
    while not (path.exists() and len(records.read_records(path)) >= 1):
        if child.poll() is not None or time.monotonic() > deadline:
            out, err = stop(child, signal.SIGKILL)
            pytest.fail(f"no row was recorded within 60 s: {err}")
        time.sleep(0.05)
    return child


@pytest.mark.parametrize("pause", [0.05, 0.3])
def test_a_second_ctrl_c_while_the_bench_stops_changes_nothing(pause, tmp_path):
    """A second SIGINT 0.3 s after the first ended the bench with exit status 130 (killed by
    SIGINT), 0.05 s after it added a second line, "interrupted while starting"."""
    path = tmp_path / "r.csv"
    child = bench_with_a_row(path)
    child.send_signal(signal.SIGINT)
    time.sleep(pause)
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
    out, err = stop(child, signal.SIGINT, timeout=30)   # and a third
    assert child.returncode == 2, (out, err)
    one_line(err, "interrupted: ", "measured before the interrupt", str(path))


HAMMER = """
import os, signal, sys, threading, time
import psutil
from fusedkit import isolation

started, sent = threading.Event(), [0]

def hammer():
    # SIGINT, every half millisecond, to the fork server from the moment it runs its own
    # program (before that it is a fork of this script) and to each worker it forks, until the
    # worker says it is ready: a Ctrl-C at the terminal reaches all of them.
    me = psutil.Process()
    while not started.is_set():
        for proc in me.children(recursive=True):
            try:
                if "multiprocessing.forkserver" in " ".join(proc.cmdline()) or \\
                        proc.ppid() != me.pid:
                    os.kill(proc.pid, signal.SIGINT)
                    sent[0] += 1
            except (psutil.Error, ProcessLookupError):
                pass
        time.sleep(0.0005)

threading.Thread(target=hammer, daemon=True).start()
worker = isolation.Worker.start("cpu")
try:
    worker.wait_ready(120)
finally:
    started.set()
print(sent[0], worker.alive())
worker.stop()
"""


def test_ctrl_c_reaches_no_fork_server_or_worker_while_they_start():
    """A Ctrl-C at the terminal reaches the measuring worker's fork server, and the workers it
    forks, while they start (Python's own start, then torch's import: a second or more). It
    printed a traceback beside the command's one line, or ended the fork server at once (before
    Python's start a SIGINT kills). Seen once in about ten Ctrl-Cs of a bench: the window was the
    fork server's start before it imported fusedkit, which then ignored SIGINT. Now the fork
    server is started with SIGINT blocked (as multiprocessing starts its resource tracker), so no
    instant of it or of a worker takes one; each worker unblocks it once it ignores it."""
    done = subprocess.run([sys.executable, "-c", HAMMER], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    sent, alive = done.stdout.split()
    assert int(sent) > 100 and alive == "True", done.stdout   # the window was hammered, and held


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler of its own for ``signum`` (Linux: SigCgt)."""
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("SigCgt:")), 16)
    return bool(mask >> (signum - 1) & 1)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("signum,how", [(signal.SIGINT, "interrupted while starting"),
                                        (signal.SIGTERM, "interrupted by SIGTERM while starting"),
                                        (signal.SIGHUP, "interrupted by SIGHUP while starting")])
def test_a_signal_while_the_command_starts_is_one_line(signum, how):
    """Ctrl-C in the first second (while torch is imported) printed a 24-37 line traceback.
    The handler is the first thing ``python -m fusedkit`` installs: once the child catches
    SIGTERM (Python itself never does), it is still importing, and a signal is one line."""
    child = fusedkit_child("info")
    deadline = time.monotonic() + 20
    while not catches(child.pid, signal.SIGTERM):
        if child.poll() is not None or time.monotonic() > deadline:
            stop(child, signal.SIGKILL)
            pytest.fail("python -m fusedkit installed no handler for SIGTERM while starting")
        time.sleep(0.001)
    out, err = stop(child, signum)
    assert child.returncode == 2, (out, err)
    one_line(err, f"{how}: nothing was done")
    assert out == ""


def test_the_console_script_is_the_command_and_starts_guarded(monkeypatch):
    """``.venv/bin/fusedkit`` (pyproject's console script) runs fusedkit.cli:main, and is
    recognised as the command, so it gets the start-up handler too; a notebook or a test that
    imports fusedkit does not."""
    import tomllib

    from fusedkit import interrupts
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"fusedkit": "fusedkit.cli:main"}
    monkeypatch.setattr(sys, "argv", ["/somewhere/.venv/bin/fusedkit", "info"])
    assert interrupts.launched_as_command()
    monkeypatch.setattr(sys, "argv", ["-m"])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-X", "importtime", "-m", "fusedkit", "info"])
    assert interrupts.launched_as_command()
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "devtools.probe_tma_tf32"])
    assert not interrupts.launched_as_command()
    monkeypatch.setattr(sys, "argv", ["/x/ipykernel_launcher.py", "-f", "k.json"])
    assert not interrupts.launched_as_command()


def test_main_restores_the_signal_handlers_it_installs():
    before = signal.getsignal(signal.SIGTERM)
    assert main(["bench", "--help"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before


def tiny_notebooks(folder: Path, pid_file: Path) -> list[Path]:
    """Two notebooks: one quick, one that writes its kernel's pid and then waits a minute."""
    import nbformat

    folder.mkdir()
    cells = {"01_quick": ["1 + 1"],
             "02_slow": [f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))",
                         "time.sleep(60)"]}
    paths = []
    for name, sources in cells.items():
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}"),
                                             *map(nbformat.v4.new_code_cell, sources)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, folder / f"{name}.ipynb")
        paths.append(folder / f"{name}.ipynb")
    return paths


def test_ctrl_c_during_a_report_stops_it_and_keeps_what_finished(tmp_path):
    """Ctrl-C used to mark the running notebook "FAILED: AssertionError:" and go on with the
    next one. Now: one line, exit 2, the finished report and the index kept, the interrupted
    notebook without a report, its kernel gone."""
    quick, slow = tiny_notebooks(tmp_path / "nb", tmp_path / "kernel.pid")
    out_dir = tmp_path / "reports"
    child = fusedkit_child("report", "--out", str(out_dir), str(quick), str(slow))
    deadline = time.monotonic() + 120
    while not (tmp_path / "kernel.pid").exists() or not (tmp_path / "kernel.pid").read_text():
        if child.poll() is not None or time.monotonic() > deadline:
            out, err = stop(child, signal.SIGKILL)
            pytest.fail(f"the slow notebook did not start within 120 s: {out} {err}")
        time.sleep(0.1)
    t0 = time.monotonic()
    out, err = stop(child, signal.SIGINT)
    assert child.returncode == 2, (out, err)
    assert time.monotonic() - t0 < 30
    # The kernel's own log lines ([IPKernelApp] ...) are not the command's.
    mine = "\n".join(ln for ln in err.splitlines() if not ln.startswith("[IPKernelApp]"))
    one_line(mine, "interrupted while running 02_slow.ipynb, whose report was not written",
             "1 finished before it", "01_quick.html")
    assert "FAILED" not in out
    assert (out_dir / "01_quick.html").is_file() and not (out_dir / "02_slow.html").exists()
    assert "01_quick" in (out_dir / "index.html").read_text()
    kernel = int((tmp_path / "kernel.pid").read_text())
    time.sleep(0.5)
    assert not Path(f"/proc/{kernel}").exists() or "zombie" in Path(f"/proc/{kernel}/status").read_text()


# --- report's options ----------------------------------------------------------------------------

@pytest.mark.parametrize("argv,phrases", [
    (["report", "--timeout", "0"], ["--timeout=0 is too small", "allowed: an integer >= 1"]),
    (["report", "--timeout", "-5"], ["--timeout=-5 is too small", "allowed: an integer >= 1"]),
    (["report", "--timeout", "ten"], ["--timeout='ten' is not an integer"]),
    (["report", "--out", ""], ["--out='' is empty", "allowed: a path"]),
    (["report", "missing.ipynb"], ["notebook='missing.ipynb' does not exist", "allowed: "]),
])
def test_report_options_are_refused_before_any_notebook_runs(argv, phrases, tmp_path, capsys,
                                                             monkeypatch):
    """``--out ''`` wrote three files into the current folder; ``--timeout 0`` and ``-5`` were
    accepted."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    assert main(argv) == 2
    one_line(capsys.readouterr().err, "error: ", *phrases)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how,phrase", [("a file", "is a file; allowed: a folder"),
                                        ("in a read-only folder", "is not writable (mode 0o555)")])
def test_report_out_that_cannot_hold_reports_names_the_option(how, phrase, tmp_path, capsys,
                                                              monkeypatch):
    """``--out`` naming a file said ``error: [Errno 17] File exists: ...``, no option named;
    a read-only folder was written as root."""
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    locked = tmp_path / "locked"
    locked.mkdir()
    if how == "a file":
        out = tmp_path / "afile"
        out.write_text("x")
    else:
        out = locked / "reports"
        locked.chmod(0o555)
    try:
        assert main(["report", "--out", str(out)]) == 2
    finally:
        locked.chmod(0o755)
    one_line(capsys.readouterr().err, "error: --out: ", str(out), phrase)
    assert not (locked / "reports").exists()


def test_report_takes_a_folder_as_its_notebooks_and_each_notebook_once(tmp_path, capsys, monkeypatch):
    """``report notebooks`` (a folder) said "does not exist"; the same notebook given twice ran
    twice."""
    quick, slow = tiny_notebooks(tmp_path / "nb", tmp_path / "kernel.pid")
    got = []
    monkeypatch.setattr("fusedkit.report.build_reports",
                        lambda out, notebooks, **kw: got.append(notebooks) or [])
    assert main(["report", "--out", str(tmp_path / "r"), str(tmp_path / "nb")]) == 0
    assert got == [[quick, slow]]
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    for argv, phrase in [([str(quick), str(quick)], f"notebook={str(quick)!r} is given twice;"),
                         ([str(tmp_path / "nb"), str(slow)], f"notebook={str(slow)!r} is given twice"),
                         ([str(tmp_path / "empty")], "is a folder without numbered notebooks")]:
        assert main(["report", "--out", str(tmp_path / "r"), *argv]) == 2
        one_line(capsys.readouterr().err, "error: ", phrase, "allowed: ")
    assert len(got) == 1


def test_a_cell_past_the_timeout_is_one_line_and_the_kernel_says_nothing(tmp_path):
    """``report --timeout 1`` printed a 7-line FAILED message and the kernel's ZMQ traceback;
    every report printed the kernel's "[IPKernelApp] WARNING | ... TCP without encryption"."""
    quick, _ = tiny_notebooks(tmp_path / "nb", tmp_path / "kernel.pid")
    slow = tmp_path / "nb" / "03_sleeps.ipynb"
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1"),
                                         nbformat.v4.new_code_cell("import time\ntime.sleep(30)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, slow)
    child = fusedkit_child("report", "--out", str(tmp_path / "r"), "--timeout", "1", str(quick), str(slow))
    out, err = child.communicate(timeout=300)
    assert child.returncode == 1, (out, err)
    assert err.strip() == "", err
    lines = out.strip().splitlines()
    assert len(lines) == 3, out
    assert lines[0].endswith("ok")
    assert lines[1].endswith("FAILED: code cell 2 of 2 ran longer than the 1 s allowed per cell "
                             "(--timeout); the cells after it did not run"), out
    # The kernel's sockets lived in a temporary folder, not beside the notebooks.
    assert sorted(p.name for p in (tmp_path / "nb").iterdir()) == ["01_quick.ipynb", "02_slow.ipynb",
                                                                  "03_sleeps.ipynb"]


# --- report --sizes ----------------------------------------------------------------------------------

ALLOWED = "allowed: PROBLEM:NAME=VALUE,... or PROBLEM:PRESET (presets: kernelbench, small)"


@pytest.mark.parametrize("value,phrases", [
    ("", ["--sizes is empty ('' names no problem)", ALLOWED]),
    ("batch_size=64", ["--sizes='batch_size=64' names no problem before a colon", ALLOWED]),
    (":small", ["--sizes=':small' names no problem before a colon", ALLOWED]),
    ("p99:batch_size=64", ["--sizes='p99:batch_size=64': problem 'p99' is not known",
                           "allowed: p12 or p45 before the colon"]),
    ("p12:", ["--sizes='p12:' names no sizes for p12", ALLOWED]),
    ("p12:batch_size=64,,in_features=8", ["--sizes='p12:batch_size=64,,in_features=8': item 2 is empty"]),
    ("p12:nope=3", ["--sizes='p12:nope=3': 'nope' is not a size of p12",
                    "valid: batch_size, in_features, out_features"]),
    ("p45:hidden_size=4k", ["--sizes='p45:hidden_size=4k': hidden_size='4k' is not an integer",
                            "allowed: a whole number"]),
    ("p12:batch_size=0", ["--sizes='p12:batch_size=0': batch_size=0 is out of range",
                          "allowed: an integer from 1 to 65536"]),
    ("p45:small,output_size=70000", ["output_size=70000 is out of range", "from 1 to 65536"]),
    ("p12:batch_size", ["size 'batch_size' has no value", "allowed: name=value"]),
    ("p12:batch_size=8,batch_size=9", ["batch_size is given twice", "each size once"]),
    ("p12:tiny", ["--sizes='p12:tiny': 'tiny' is neither a preset nor NAME=VALUE",
                  "allowed: a preset (kernelbench, small) or sizes of p12"]),
])
def test_report_sizes_are_refused_in_one_line_before_any_notebook_runs(value, phrases, tmp_path,
                                                                      capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    assert main(["report", "--sizes", value]) == 2
    one_line(capsys.readouterr().err, "error: ", *phrases)
    assert list(tmp_path.iterdir()) == []


def test_report_sizes_name_each_problem_once(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    assert main(["report", "--sizes", "p12:small", "--sizes", "12:batch_size=64"]) == 2
    one_line(capsys.readouterr().err, "error: --sizes names p12 twice", "allowed: each problem once")
    assert list(tmp_path.iterdir()) == []


def test_report_sizes_refuse_a_notebook_without_a_parameters_cell(tmp_path, capsys, monkeypatch):
    quick, _ = tiny_notebooks(tmp_path / "nb", tmp_path / "kernel.pid")   # no parameters cell
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    out = tmp_path / "reports"
    assert main(["report", "--out", str(out), "--sizes", "p12:small", str(quick)]) == 2
    one_line(capsys.readouterr().err, "error: --sizes: 01_quick.ipynb has no parameters cell",
             "a code cell tagged 'parameters'")
    assert not out.exists()


@pytest.mark.parametrize("values,expected", [
    (["p12:small"], {"p12": {"batch_size": 17, "in_features": 33, "out_features": 65}}),
    (["p12:small,batch_size=64", "p45:kernelbench"],
     {"p12": {"batch_size": 64, "in_features": 33, "out_features": 65},
      "p45": {"batch_size": 16384, "input_size": 2048, "hidden_size": 4096, "output_size": 1024}}),
    (["p12:batch_size=64,in_features=128", "45:Small"],
     {"p12": {"batch_size": 64, "in_features": 128, "out_features": 8192},
      "p45": {"batch_size": 17, "input_size": 33, "hidden_size": 65, "output_size": 19}}),
])
def test_report_sizes_take_presets_and_overrides(values, expected, tmp_path, monkeypatch):
    """What reaches the reports: every dimension of each problem named, presets resolved."""
    got = {}
    monkeypatch.setattr("fusedkit.report.build_reports",
                        lambda out, notebooks, **kw: got.update(kw["sizes"]) or [])
    argv = ["report", "--out", str(tmp_path / "r")] + [a for v in values for a in ("--sizes", v)]
    assert main(argv) == 0
    assert got == expected


def test_report_help_names_the_presets(capsys):
    from fusedkit.problems import presets

    assert main(["report", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--sizes PROBLEM:SIZES" in text and "p12:batch_size=64,in_features=128" in text
    for p in presets.PRESETS:
        assert f"{p.name}: {p.label}" in text


# --- sizes -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,phrases", [
    ("", ["--sizes is empty", "omit --sizes for KernelBench's"]),
    (",", ["--sizes is empty"]),
    ("batch_size=8,,in_features=8", ["--sizes='batch_size=8,,in_features=8': size 2 is empty"]),
    ("batch_size=x", ["batch_size='x' is not an integer", "allowed: a whole number"]),
    ("batch_size", ["size 'batch_size' has no value", "allowed: name=value"]),
    ("batch_size=0", ["batch_size=0 is out of range", "allowed: an integer from 1 to 65536"]),
    ("nope=3", ["'nope' is not a size of p12", "valid: batch_size, in_features, out_features"]),
])
def test_sizes_are_refused_saying_what_is_allowed(value, phrases, tmp_path, capsys, no_measuring):
    """``--sizes ''`` silently ran KernelBench's full sizes; size errors did not say what is
    allowed."""
    argv = ["bench", "--problem", "p12", "--sizes", value, "--records", str(tmp_path / "r.csv")]
    assert main(argv) == 2
    one_line(capsys.readouterr().err, "error: ", *phrases)


@pytest.mark.skipif(GPU, reason="the CPU memory budget")
def test_sizes_whose_harness_copies_do_not_fit_are_refused_with_what_fits(tmp_path, capsys,
                                                                         no_measuring):
    """32768 x 32768 x 1 passed as "need 4.0 GiB" (eager alone) while the harness holds about four
    copies of x in one process at a time; it ended in a 31-line RuntimeError under a memory limit."""
    argv = ["bench", "--problem", "p12", "--sizes", "batch_size=32768,in_features=32768,out_features=1",
            "--records", str(tmp_path / "r.csv")]
    assert main(argv) == 2
    one_line(capsys.readouterr().err, "error: sizes batch_size=32768,in_features=32768,out_features=1 "
             "need 16.0 GiB while checked and timed", "allowed: at most 8.0 GiB in a CPU run",
             "e.g. batch_size<=16382 or in_features<=16381")


# --- paths written through links, read-only files and folders, as root too ---------------------

def test_records_through_a_symbolic_link_append_to_its_target(tmp_path, capsys):
    """The append's rename replaced the link with a file: the target never got the row."""
    target = tmp_path / "real" / "records.csv"
    target.parent.mkdir()
    before = valid_records(target)
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    argv = ["bench", *TINY, "--variants", "eager", "--seeds", "1", "--rep-ms", "2", "--records", str(link)]
    assert main(argv) == 0, capsys.readouterr().err
    assert link.is_symlink() and link.resolve() == target
    assert target.read_bytes().startswith(before) and len(records.read_records(target)) == 2


def test_a_dangling_records_link_creates_its_target(tmp_path, capsys):
    target = tmp_path / "real" / "records.csv"
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    argv = ["bench", *TINY, "--variants", "eager", "--seeds", "1", "--rep-ms", "2", "--records", str(link)]
    assert main(argv) == 0, capsys.readouterr().err
    assert link.is_symlink() and list(records.read_records(target)["variant"]) == ["eager"]


def exported(*extra: str) -> int:
    """``export`` of one kernel with ``extra`` options; its exit status."""
    return main(["export", "--problem", "p12", "--variant", "triton_fp16x3", *extra])


def test_export_force_keeps_a_read_only_file_and_the_mode_of_a_writable_one(tmp_path, capsys):
    """``export --force`` overwrote a read-only file and reset its mode to 0o644."""
    out = tmp_path / "solution.py"
    assert exported("-o", str(out)) == 0
    text = out.read_text()
    out.write_text("# mine\n")
    out.chmod(0o444)
    capsys.readouterr()
    assert exported("-o", str(out), "--force") == 2
    one_line(capsys.readouterr().err, "error: -o: ", str(out), "is read-only (mode 0o444)",
             "allowed: a writable file")
    assert out.read_text() == "# mine\n" and (out.stat().st_mode & 0o777) == 0o444
    out.chmod(0o640)
    assert exported("-o", str(out), "--force") == 0
    assert out.read_text() == text and (out.stat().st_mode & 0o777) == 0o640


@pytest.mark.parametrize("option,target,argv", [
    ("-o", "solution.py", ["--variant", "triton_fp16x3", "-o"]),
    ("--all", "kb", ["--all"]),
])
def test_export_into_a_read_only_folder_is_refused_as_root_too(option, target, argv, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        assert main(["export", "--problem", "p12", *argv, str(locked / target)]) == 2
        one_line(capsys.readouterr().err, f"error: {option}: ", str(locked / target),
                 "the folder", "is not writable (mode 0o555)")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def test_an_exported_file_through_a_link_keeps_the_link(tmp_path, capsys):
    target = tmp_path / "real.py"
    link = tmp_path / "solution.py"
    link.symlink_to(target)
    assert exported("-o", str(link)) == 0
    assert link.is_symlink() and "class ModelNew" in target.read_text()


@pytest.mark.parametrize("argv,phrase", [
    (["export", "--problem", "p12", "--variant", "triton_fp16x3", "-o", "{tmp}/no/such/solution.py"],
     "error: -o: "),
    (["export", "--problem", "p12", "--all", "{tmp}/afile"], "error: --all: "),
    (["export", "--problem", "p12", "--variant", "triton_fp16x3", "-o", ""], "error: -o='' is empty"),
])
def test_os_errors_name_the_option(argv, phrase, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    one_line(capsys.readouterr().err, phrase)


# --- the README's commands ---------------------------------------------------------------------

def test_the_readme_commands_parse_as_typed():
    """The README's command-line block, line by line, is what the parser accepts (the README
    said ``python -m fusedkit``, which fails as typed unless the environment is active: it
    names the command the set-up installs, .venv/bin/fusedkit)."""
    import shlex

    from fusedkit.cli import build_parser

    text = (REPO / "README.md").read_text()
    block = text.split("## Command line", 1)[1].split("```", 2)[1]
    commands = [ln.split("  #")[0] for ln in block.splitlines() if ln.strip()]
    assert len(commands) >= 6
    for line in commands:
        words = shlex.split(line)
        assert words[0] == ".venv/bin/fusedkit", line
        build_parser().parse_args(words[1:])   # a usage error exits
    assert "source .venv/bin/activate" in text
    assert "python -m fusedkit" not in block


# --- GPU-only variants on a machine without a GPU ---------------------------------------------

@pytest.mark.skipif(GPU, reason="needs a machine without a CUDA GPU")
@pytest.mark.parametrize("names", ["cublas_epilogue", "naive,cublas_epilogue"])
def test_only_gpu_variants_without_gpu_is_refused(names, tmp_path, capsys, no_measuring):
    assert main(["bench", *TINY, "--variants", names, "--records", str(tmp_path / "r.csv")]) == 2
    line = one_line(capsys.readouterr().err, "error: nothing ran: ", "a CUDA GPU and none is visible",
                    "allowed here (--variants): eager")
    assert all(n in line for n in names.split(","))
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.skipif(GPU, reason="needs a machine without a CUDA GPU")
def test_gpu_variants_beside_cpu_ones_are_skipped_and_the_rest_runs(tmp_path, capsys):
    path = tmp_path / "r.csv"
    argv = ["bench", *TINY, "--variants", "eager,cublas_epilogue", "--seeds", "1", "--rep-ms", "5",
            "--records", str(path)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "cublas_epilogue" in out + err and "Traceback" not in err
    assert list(records.read_records(path)["variant"]) == ["eager"]


# --- Hopper steps on a GPU that is not Hopper --------------------------------------------------

@pytest.fixture
def an_a100(monkeypatch):
    """torch sees one A100 (sm_80): enough for the refusals, which run before any measurement."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 * 2**30, 80 * 2**30))
    # what the bench's run context reads of it (fusedkit.mode.detect_mode)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: types.SimpleNamespace(
        name="NVIDIA A100-SXM4-80GB", major=8, minor=0, total_memory=80 * 2**30))


@pytest.mark.parametrize("names", ["wgmma_tma", "wgmma_persistent,wgmma_fp16x3"])
def test_only_hopper_variants_on_another_gpu_are_refused(names, an_a100, tmp_path, capsys, no_measuring):
    assert main(["bench", *TINY, "--variants", names, "--records", str(tmp_path / "r.csv")]) == 2
    line = one_line(capsys.readouterr().err, "error: nothing ran: ", "needs a Hopper (sm_90) GPU",
                    "A100", "is sm_80", "allowed here (--variants): eager")
    assert all(n in line for n in names.split(","))
    assert "wgmma_tma" not in line.split("allowed here")[1]
    assert not (tmp_path / "r.csv").exists()


def test_hopper_variants_beside_others_on_another_gpu_reach_the_runner(an_a100, tmp_path, monkeypatch):
    """A mix goes on to the runner, which skips the Hopper steps (fusedkit.runner.runnable)."""
    seen = {}

    def fake_run_ladder(problem, sizes, *, variants=None, **kwargs):
        from fusedkit.runner import runnable

        seen["runnable"] = runnable(problem, variants, sizes, torch.device("cuda"))
        import pandas as pd
        return pd.DataFrame({"variant": ["eager"], "median_ms": [1.0]})
    monkeypatch.setattr("fusedkit.runner.run_ladder", fake_run_ladder)
    assert main(["bench", *TINY, "--variants", "eager,wgmma_tma", "--records", str(tmp_path / "r.csv")]) == 0
    chosen, skipped = seen["runnable"]
    assert [v.slug for v in chosen] == ["eager"]
    (note,) = skipped
    assert note.startswith("wgmma_tma: needs a Hopper (sm_90) GPU") and "\n" not in note


# --- names that are not regular files: a rename over them would replace them ---------------------

def special(tmp_path: Path, kind: str) -> Path:
    """A name in ``tmp_path`` that is not a regular file: a FIFO, a character device (a twin of
    /dev/null, made with mknod) or a symbolic link that points to itself."""
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod needs CAP_MKNOD")
    else:
        path.symlink_to(path.name)
    return path


def kept_as_it_was(path: Path, kind: str) -> None:
    mode = os.lstat(path).st_mode
    assert {"fifo": stat.S_ISFIFO, "device": stat.S_ISCHR, "loop": stat.S_ISLNK}[kind](mode), kind
    if kind == "loop":
        assert os.readlink(path) == path.name


SPECIAL = [("fifo", "is a FIFO (named pipe), not a regular file"),
           ("device", "is a character device, not a regular file"),
           ("loop", "is a symbolic link that loops")]


@pytest.mark.parametrize("kind,phrase", SPECIAL)
@pytest.mark.parametrize("force", [False, True])
def test_export_refuses_a_name_that_is_not_a_regular_file(kind, phrase, force, tmp_path, capsys):
    """``export -o /dev/full --force`` (a device, a FIFO) exited 0 and the device became a regular
    file; a link to itself was replaced by a file, --force or not."""
    path = special(tmp_path, kind)
    assert exported("-o", str(path), *(["--force"] if force else [])) == 2
    one_line(capsys.readouterr().err, "error: -o: ", str(path), phrase, "allowed: a regular file")
    kept_as_it_was(path, kind)


@pytest.mark.parametrize("kind,phrase", SPECIAL)
def test_export_all_refuses_a_name_in_its_folder_that_is_not_a_regular_file(kind, phrase, tmp_path,
                                                                           capsys):
    folder = tmp_path / "kb"
    folder.mkdir()
    path = special(folder, kind).rename(folder / "p12_triton_fp16x3.py") if kind != "loop" else None
    if kind == "loop":
        path = folder / "p12_triton_fp16x3.py"
        path.symlink_to(path.name)
    assert main(["export", "--problem", "p12", "--all", str(folder), "--force"]) == 2
    one_line(capsys.readouterr().err, "error: --all: ", str(path), phrase)
    kept_as_it_was(path, kind)
    assert [p.name for p in folder.iterdir()] == [path.name]   # refused before the first write


@pytest.mark.parametrize("kind,phrase", SPECIAL)
def test_records_that_are_not_a_regular_file_are_refused_before_measuring(kind, phrase, tmp_path,
                                                                          capsys, no_measuring):
    """A link to itself as ``--records`` passed the preflight and was replaced by a file."""
    path = special(tmp_path, kind)
    assert main(["bench", *TINY, "--records", str(path)]) == 2
    one_line(capsys.readouterr().err, "error: --records: ", str(path), phrase)
    kept_as_it_was(path, kind)


def test_a_folder_named_as_the_records_lock_is_refused_before_measuring(tmp_path, capsys, no_measuring):
    """A folder ``r.csv.lock`` was found only by the first append, after the measurement: the row
    was lost."""
    (tmp_path / "r.csv.lock").mkdir()
    assert main(["bench", *TINY, "--records", str(tmp_path / "r.csv")]) == 2
    one_line(capsys.readouterr().err, "error: --records: ", "its lock file", "r.csv.lock is a folder",
             "allowed: ")
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.parametrize("kind,phrase", SPECIAL)
def test_report_refuses_an_output_that_is_not_a_regular_file(kind, phrase, tmp_path, capsys,
                                                            monkeypatch):
    quick, _ = tiny_notebooks(tmp_path / "nb", tmp_path / "kernel.pid")
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    out = tmp_path / "reports"
    out.mkdir()
    path = special(out, kind)
    path = path.rename(out / "01_quick.html") if kind != "loop" else path
    if kind == "loop":
        path.unlink()
        path = out / "01_quick.html"
        path.symlink_to(path.name)
    assert main(["report", "--out", str(out), str(quick)]) == 2
    one_line(capsys.readouterr().err, "error: --out: ", str(path), phrase)
    kept_as_it_was(path, kind)


def stale_readme(tmp_path: Path) -> tuple[Path, Path]:
    from fusedkit import readme

    doc, path = tmp_path / "README.md", tmp_path / "r.csv"
    valid_records(path)
    doc.write_text(f"# x\n\n{readme.BEGIN}\nold\n{readme.END}\n", encoding="utf-8")
    return doc, path


def test_readme_keeps_a_read_only_stale_copy(tmp_path, capsys):
    """``readme --readme`` rewrote a stale copy marked read-only (mode 444), as root."""
    doc, path = stale_readme(tmp_path)
    before = doc.read_bytes()
    doc.chmod(0o444)
    assert main(["readme", "--readme", str(doc), "--records", str(path)]) == 2
    one_line(capsys.readouterr().err, "error: --readme: ", str(doc), "is read-only (mode 0o444)",
             "allowed: a writable README")
    assert doc.read_bytes() == before and (doc.stat().st_mode & 0o777) == 0o444


# --- a full disk ---------------------------------------------------------------------------------

def disk_full_after(monkeypatch, n: int = 0) -> None:
    """Every os.write of more than ``n`` bytes writes ``n`` and fails as a full disk does."""
    real = os.write

    def write(fd, data):
        if len(data) > n:
            real(fd, bytes(data[:n]))
            raise OSError(28, "No space left on device")
        return real(fd, data)
    monkeypatch.setattr(os, "write", write)


def bench_on_a_full_disk(path: Path, monkeypatch) -> int:
    """``bench``, whose one row meets a full disk as it is appended to ``path``; its exit status."""
    def full_disk_at_the_append(*args, **kwargs):
        disk_full_after(monkeypatch, 16)
        records.append_rows(path, [records.make_row(
            records.RunContext.collect(), problem="p12", sizes="batch_size=4", variant="eager",
            timer="cpu-wall", median_ms=1.0)])
    monkeypatch.setattr("fusedkit.runner.run_ladder", full_disk_at_the_append)
    status = main(["bench", *TINY, "--records", str(path)])
    monkeypatch.undo()
    return status


def test_records_on_a_full_disk_name_the_file_and_keep_it_whole(tmp_path, capsys, monkeypatch):
    """A full disk while appending gave a bare ``error: [Errno 28] No space left on device``."""
    path = tmp_path / "r.csv"
    before = valid_records(path)
    assert bench_on_a_full_disk(path, monkeypatch) == 2
    one_line(capsys.readouterr().err, "error: [Errno 28] No space left on device: ", str(path),
             "was not written", "left as it was")
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["r.csv",
                                                                                         "r.csv.lock"]


def test_a_report_on_a_full_disk_leaves_no_partial_temporary_file(tmp_path, capsys, monkeypatch):
    """A full disk left ``01_quick.html.tmp``, half written, beside the reports."""
    from fusedkit import report

    out = tmp_path / "reports"
    out.mkdir()
    real = Path.write_text

    def write_text(self, text, *args, **kwargs):
        if self.name.endswith(".tmp"):
            real(self, text[:100], *args, **kwargs)
            raise OSError(28, "No space left on device")
        return real(self, text, *args, **kwargs)
    monkeypatch.setattr(Path, "write_text", write_text)
    with pytest.raises(OSError) as caught:
        report._atomic_write(out / "01_quick.html", "<html>" + "x" * 1000)
    monkeypatch.undo()
    assert "No space left on device: " in str(caught.value) and str(out / "01_quick.html") in str(caught.value)
    assert str(caught.value).endswith("was not written; nothing was left in its place")
    assert list(out.iterdir()) == []


def test_a_first_records_file_on_a_full_disk_says_none_was_made(tmp_path, capsys, monkeypatch):
    """It said "it is left as it was (rows appended before are kept)" of a file that was never there."""
    path = tmp_path / "r.csv"
    assert bench_on_a_full_disk(path, monkeypatch) == 2
    one_line(capsys.readouterr().err, "error: [Errno 28] No space left on device: ", str(path),
             "was not written; no file was made")
    assert not path.exists()


# --- an option given twice, an unknown option before the command -------------------------------

@pytest.mark.parametrize("argv,option,first,second", [
    (["bench", "--problem", "p12", "--problem", "p45"], "--problem", "p12", "p45"),
    (["bench", *TINY, "--sizes", "batch_size=8"], "--sizes",
     "batch_size=4,in_features=8,out_features=8", "batch_size=8"),
    (["bench", *TINY, "--variants", "eager", "--variants", "compile"], "--variants", "eager", "compile"),
    (["bench", *TINY, "--records", "{tmp}/a.csv", "--records={tmp}/b.csv"], "--records",
     "{tmp}/a.csv", "{tmp}/b.csv"),
    (["report", "--out", "{tmp}/a", "--out", "{tmp}/b"], "--out", "{tmp}/a", "{tmp}/b"),
    (["export", "--problem", "p12", "--variant", "triton_fp16x3", "-o", "{tmp}/a.py", "--output",
      "{tmp}/b.py"], "-o/--output", "{tmp}/a.py", "{tmp}/b.py"),
    (["bench", *TINY, "--seeds", "3", "--seeds", "0"], "--seeds", "3", "0"),
])
def test_an_option_given_twice_is_refused_naming_both_values(argv, option, first, second, tmp_path,
                                                            capsys, monkeypatch, no_measuring):
    """The last one was taken silently: ``--records a.csv --records b.csv`` appended to b.csv."""
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    fill = lambda text: text.replace("{tmp}", str(tmp_path))   # noqa: E731
    assert main([fill(a) for a in argv]) == 2
    one_line(capsys.readouterr().err, f"error: {option} is given twice ({fill(first)!r}, then "
             f"{fill(second)!r}); allowed: it once")
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_option_before_the_command_is_named(capsys):
    """``--frob bench`` said ``the following arguments are required: --problem``."""
    assert main(["--frob", "bench"]) == 2
    one_line(capsys.readouterr().err, "error: unrecognized arguments: --frob (before the command)")
    assert main(["--help"]) == 0
