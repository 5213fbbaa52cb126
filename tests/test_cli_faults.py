"""The command line answers bad input and faults with one ``error:`` line and exit status 2,
before anything is measured, and loses nothing.

Each rule is tested once, at its edge, in this process through ``cli.main`` (the
``no_measuring`` fixture fails a test whose bench gets as far as measuring); a few tests run
``fusedkit`` as a process of its own, where a real signal, the start-up or a kernel's stderr
is the point.
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

import nbformat
import pytest
import torch

from fusedkit import records
from fusedkit.cli import main
from fusedkit.harness import MAX_SEEDS

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


def refused(capsys, argv: list[str], *phrases: str, status: int = 2) -> str:
    """``main(argv)`` exits ``status`` with one stderr line saying each of ``phrases``."""
    assert main(argv) == status
    return one_line(capsys.readouterr().err, *phrases)


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


# --- argument values ---------------------------------------------------------------------------

HUGE = "a" * 100_000


@pytest.mark.parametrize("argv,phrases", [
    ([], ["arguments are required: command"]),
    (["bench"], ["arguments are required: --problem"]),
    (["bench", *TINY, "--bogus"], ["unrecognized arguments: --bogus"]),
    (["--frob", "bench"], ["unrecognized arguments: --frob (before the command)"]),
    (["bench", *TINY, "--records", ""], ["--records='' is empty"]),
    (["bench", *TINY, "--seeds", "0"], ["--seeds=0 is too small", f"allowed: an integer from 1 to {MAX_SEEDS}"]),
    (["bench", *TINY, "--seeds", "two"], ["--seeds='two' is not an integer"]),
    # a billion seeds was drawn as a list of a billion items and OOM-killed without a word
    (["bench", *TINY, "--seeds", "1000000000"], ["--seeds=1000000000 is too large"]),
    *[(["bench", *TINY, "--rep-ms", value], [f"--rep-ms={value} is out of range",
                                             "allowed: a finite number > 0, at most 60000"])
      for value in ("nan", "inf", "0", "-5", "1e12")],
    # "-inf" was read as an option: "argument --rep-ms: expected one argument"
    (["bench", *TINY, "--rep-ms", "-inf"], ["--rep-ms=-inf is out of range"]),
    (["bench", *TINY, "--rep-ms", "fast"], ["--rep-ms='fast' is not a number"]),
    (["bench", *TINY, "--variants", ","], ["--variants is empty", "allowed: "]),
    (["bench", *TINY, "--variants", "eager,,compile"], ["--variants='eager,,compile': name 2 is empty"]),
    (["bench", *TINY, "--variants", "eager,eager"], ["names eager twice", "each once"]),
    (["bench", "--problem", "p12", "--sizes", ""], ["--sizes is empty", "omit --sizes for KernelBench's"]),
    (["bench", "--problem", "p12", "--sizes", "batch_size=8,,in_features=8"], ["size 2 is empty"]),
    (["bench", "--problem", "p12", "--sizes", "batch_size=8,batch_size=16"], ["batch_size is given twice"]),
    (["bench", "--problem", "p12", "--sizes", "batch_size=x"], ["batch_size='x' is not an integer"]),
    (["bench", "--problem", "p12", "--sizes", "batch_size=0"], ["batch_size=0 is out of range",
                                                                "allowed: an integer from 1 to 65536"]),
    (["bench", "--problem", "p12", "--sizes", "nope=3"], ["'nope' is not a size of p12"]),
    (["bench", "--problem", "p99"], ["problem='p99' is not known; valid: p12, p45"]),
    (["bench", *TINY, "--variants", "eager,magic"], ["variant='magic' is not a variant"]),
    (["bench", "--problem", "p12", "--problem", "p45"], ["--problem is given twice ('p12', then 'p45')"]),
    (["bench", *TINY, "--seeds", "3", "--seeds", "0"], ["--seeds is given twice ('3', then '0'); allowed: it once"]),
    (["bench", *TINY, "--variants", HUGE], ["variant='aaaa", "...' (100000 characters)"]),
    (["bench", *TINY, "--variants", "eager", "--variants", HUGE], ["is given twice ('eager', then 'aaa",
                                                                   "(100000 characters)"]),
    (["report", "--timeout", "0"], ["--timeout=0 is too small", "allowed: an integer >= 1"]),
    (["report", "--out", ""], ["--out='' is empty", "allowed: a path"]),
    (["report", "--out", "a", "--out", "b"], ["--out is given twice ('a', then 'b')"]),
    (["report", "missing.ipynb"], ["notebook='missing.ipynb' does not exist", "allowed: "]),
    (["export", "--problem", "p12", "--variant", "triton_fp16x3", "-o", "a.py", "--output", "b.py"],
     ["-o/--output is given twice ('a.py', then 'b.py')"]),
    (["export", "--problem", "p12", "--variant", "triton_fp16x3", "-o", ""], ["-o='' is empty"]),
    (["export", "--problem", "p12", "--variant", "eager", "-o", "x.py"], ["variant='eager' is a baseline"]),
    (["export", "--problem", "p12", "--variant", "compile", "-o", "x.py"], ["is a baseline"]),
    (["export", "--problem", "p99", "--variant", "naive", "-o", "x.py"], ["problem='p99'", "valid: p12, p45"]),
    (["export", "--problem", "p12", "--variant", "fastest", "-o", "x.py"], ["variant='fastest'", "allowed: naive"]),
    (["export", "--problem", "p12"], ["exactly one of --variant", "--all"]),
    (["export", "--problem", "p12", "--variant", "naive", "--all", "d"], ["exactly one of --variant"]),
    (["export", "--problem", "p12", "--variant", "naive"], ["needs -o FILE"]),
    (["export", "--problem", "p12", "--all", "d", "-o", "x.py"], ["-o='x.py' goes with --variant"]),
    (["build", "--jobs", "0"], ["--jobs=0 is too small"]),
])
def test_bad_arguments_are_one_line_before_anything_runs(argv, phrases, tmp_path, capsys, monkeypatch,
                                                         no_measuring):
    """Nothing is written either: ``--out ''`` wrote three files into the current folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    line = refused(capsys, argv, "error: ", *phrases)
    assert "usage:" not in line and len(line) < 1000
    assert list(tmp_path.iterdir()) == []


def test_help_exits_zero_and_the_handlers_are_put_back(capsys):
    before = signal.getsignal(signal.SIGTERM)
    assert main(["bench", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--rep-ms" in text and "--allow-slow" in text and "at most 60000" in text
    assert signal.getsignal(signal.SIGTERM) is before
    assert main(["--help"]) == 0


# --- the records file, checked before the first measurement ------------------------------------

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


SPECIAL = [("fifo", "is a FIFO (named pipe), not a regular file"),
           ("device", "is a character device, not a regular file"),
           ("loop", "is a symbolic link that loops")]


def kept_as_it_was(path: Path, kind: str) -> None:
    mode = os.lstat(path).st_mode
    assert {"fifo": stat.S_ISFIFO, "device": stat.S_ISCHR, "loop": stat.S_ISLNK}[kind](mode), kind
    if kind == "loop":
        assert os.readlink(path) == path.name


def read_only_mount(monkeypatch, under: Path) -> None:
    """``under`` and everything in it reads as a read-only file system (statvfs's ST_RDONLY)."""
    real = os.statvfs

    def statvfs(path):
        got = real(path)
        if not str(Path(path).resolve()).startswith(str(under.resolve())):
            return got
        return types.SimpleNamespace(f_flag=got.f_flag | os.ST_RDONLY)
    monkeypatch.setattr(os, "statvfs", statvfs)


def torn(path: Path) -> bytes:
    """The records of :func:`valid_records`, cut inside the last field of the last row."""
    data = valid_records(path)[:-3]
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("make,phrases", [
    (lambda t: t, ["is a folder, not a regular file"]),
    # a trailing slash made a file of that name, exit 0, existing or not
    (lambda t: f"{t}/fresh-dir/", ["fresh-dir/ ends in '/', so it names a folder"]),
    (lambda t: f"{valid_records(t / 'r.csv') and t}/r.csv/", ["r.csv/ ends in '/'"]),
    (lambda t: "-", ["'-' names no file here"]),   # it wrote a file named '-' (and '-.lock')
    (lambda t: (t / "afile").write_text("x") and t / "afile" / "r.csv", ["afile is a file, not a folder"]),
    (lambda t: (valid_records(t / "r.csv"), (t / "r.csv").chmod(0o444)) and t / "r.csv",
     ["r.csv is read-only (mode 0o444) and is left as it is"]),
    (lambda t: (t / "ro").mkdir(mode=0o555) or t / "ro" / "r.csv", ["the folder", "is not writable (mode 0o555)"]),
    (lambda t: (t / "r.csv.lock").mkdir() or t / "r.csv", ["r.csv.lock is a folder", "move r.csv.lock aside"]),
    *[(lambda t, k=k: special(t, k), [phrase]) for k, phrase in SPECIAL],
    # the header: one short line, not the 2.5 kB list of every column and the garbage echoed
    (lambda t: (t / "g.csv").write_text("x" * 3000 + ",y\n1,2\n") and t / "g.csv",
     ["g.csv:1: not a records file: column 1 is 'xxxx", "expected 'run_id'"]),
    (lambda t: (valid_records(t / "r.csv"), (t / "r.csv").open("a").write("a,b,c\n")) and t / "r.csv",
     ["r.csv:3: wrong field count: 3 fields"]),
    # a last row cut inside its last field was appended to, the torn row kept as a record
    (lambda t: torn(t / "r.csv") and t / "r.csv", ["r.csv:2: the last line has no final newline"]),
    (lambda t: (t / "u.csv").write_bytes(b"run_id\n\xff\xfe\n") and t / "u.csv", ["u.csv:2: not UTF-8 text"]),
])
def test_a_records_path_an_append_would_refuse_is_refused_before_measuring(make, phrases, tmp_path,
                                                                            capsys, no_measuring):
    """As root too: a read-only file or folder is one someone wants kept as it is."""
    path = make(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()
              and stat.S_ISREG(p.stat().st_mode)}
    try:
        refused(capsys, ["bench", *TINY, "--records", str(path)], "error: --records: ", *phrases)
    finally:
        for p in tmp_path.rglob("*"):
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
    after = {p: p.read_bytes() for p in before}
    assert after == before and not (tmp_path / "fresh-dir").exists() and not Path("-").exists()
    for kind, _ in SPECIAL:
        if (tmp_path / kind).is_symlink() or (tmp_path / kind).exists():
            kept_as_it_was(tmp_path / kind, kind)


def test_a_read_only_file_system_is_named_so(tmp_path, capsys, monkeypatch, no_measuring):
    """It said "not writable (mode 0o1777)" of a read-only mount, whose mode allows writing."""
    read_only_mount(monkeypatch, tmp_path)
    refused(capsys, ["bench", *TINY, "--records", str(tmp_path / "x.csv")],
            "error: --records: ", f"{tmp_path} is on a read-only file system")


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs /sys (Linux)")
def test_a_folder_where_no_file_can_be_made_is_refused_before_measuring(capsys, no_measuring):
    """``--records /sys/kernel/x.csv`` measured, then failed with [Errno 13] at the append."""
    refused(capsys, ["bench", *TINY, "--records", "/sys/kernel/x.csv"], "error: --records: ", "/sys/kernel")


def test_records_named_by_the_environment_name_the_variable(tmp_path, capsys, monkeypatch, no_measuring):
    (tmp_path / "g.csv").write_text("garbage\n")
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(tmp_path / "g.csv"))
    refused(capsys, ["bench", *TINY], "error: FUSEDKIT_RECORDS: ", "g.csv:1: not a records file")


@pytest.mark.parametrize("commit", ["abc\ndef", "a\tb\rc"])
def test_a_commit_of_more_than_one_line_is_refused_before_measuring(commit, tmp_path, capsys,
                                                                   monkeypatch, no_measuring):
    """It was refused only after measuring, as ``make_row: commit=...``, the variable unnamed."""
    monkeypatch.setenv("FUSEDKIT_COMMIT", commit)
    refused(capsys, ["bench", *TINY, "--records", str(tmp_path / "r.csv")],
            "error: FUSEDKIT_COMMIT=", "holds a line break, tab or other control character")


# --- what can run here, and how long it would take ---------------------------------------------

@pytest.mark.skipif(GPU, reason="needs a machine without a CUDA GPU")
@pytest.mark.parametrize("argv,phrases", [
    (["--variants", "naive,cublas_epilogue"], ["nothing ran: ", "variant='naive' on cpu needs a CUDA GPU",
                                               "variant='cublas_epilogue'", "allowed here (--variants): eager"]),
    # 32768 x 32768 x 1 passed as "need 4.0 GiB" while the harness holds about four copies of x
    (["--sizes", "batch_size=32768,in_features=32768,out_features=1"],
     ["need 16.0 GiB while checked and timed", "allowed: at most 8.0 GiB in a CPU run"]),
    (["--sizes", "batch_size=65536"], ["GiB while checked and timed"]),
    # KernelBench's sizes ran for minutes in silence when piped (ten builds: surely over the limit)
    (["--seeds", "10"], ["this bench would take about", "on this CPU by the harness's estimate (",
          "allowed: at most 120 s without --allow-slow"]),
    # the README's own sweep example
    (["--problem", "p45", "--sweep", "batch_size=16..16384x4"], ["this bench would take about",
                                                                 "without --allow-slow"]),
])
def test_what_cannot_run_here_or_would_take_minutes_is_refused(argv, phrases, tmp_path, capsys,
                                                               no_measuring):
    problem = [] if "--problem" in argv else ["--problem", "p12"]
    refused(capsys, ["bench", *problem, *argv, "--records", str(tmp_path / "r.csv")], "error: ", *phrases)
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.skipif(GPU, reason="the CPU estimate")
def test_a_slow_bench_runs_with_allow_slow_saying_its_estimate_and_progress(tmp_path, capsys, monkeypatch):
    seen = {}

    def run_ladder(problem, sizes, **kwargs):
        import pandas as pd
        seen.update(kwargs)
        return pd.DataFrame({"variant": ["eager"], "median_ms": [1.0]})
    monkeypatch.setattr("fusedkit.runner.run_ladder", run_ladder)
    assert main(["bench", "--problem", "p12", "--allow-slow", "--records", str(tmp_path / "r.csv")]) == 0
    one_line(capsys.readouterr().err, "estimate: about ", "eager")
    assert seen["progress"] is True   # a bar on stderr, even in a pipe


@pytest.fixture
def an_a100(monkeypatch):
    """torch sees one A100 (sm_80): enough for the refusals, which run before any measurement."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 * 2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: types.SimpleNamespace(
        name="NVIDIA A100-SXM4-80GB", major=8, minor=0, total_memory=80 * 2**30))


def test_hopper_variants_on_another_gpu_are_refused_alone_and_skipped_beside_others(
        an_a100, tmp_path, capsys, monkeypatch, no_measuring):
    line = refused(capsys, ["bench", *TINY, "--variants", "wgmma_tma,wgmma_fp16x3",
                            "--records", str(tmp_path / "r.csv")],
                   "error: nothing ran: ", "needs a Hopper (sm_90) GPU", "A100", "is sm_80",
                   "allowed here (--variants): eager")
    assert "wgmma_tma" not in line.split("allowed here")[1]
    seen = {}

    def run_ladder(problem, sizes, *, variants=None, **kwargs):
        import pandas as pd
        seen["variants"] = variants
        return pd.DataFrame({"variant": ["eager"], "median_ms": [1.0]})
    monkeypatch.setattr("fusedkit.runner.run_ladder", run_ladder)
    assert main(["bench", *TINY, "--variants", "eager,wgmma_tma", "--records", str(tmp_path / "r.csv")]) == 0
    assert seen["variants"] == ["eager", "wgmma_tma"]   # the runner skips the Hopper step


# --- faults while benching -----------------------------------------------------------------------

@pytest.mark.parametrize("fault", [
    PermissionError(13, "Permission denied", "/data/records.csv"),
    OSError(28, "No space left on device"),
    records.RecordsError("/data/records.csv:7: wrong field count: 3 fields"),
    ValueError("first line\n  second line of a library's message"),
    ChildProcessError("the worker process for cpu did not start: RuntimeError: Cannot re-initialize CUDA"),
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                 "memory: you tried to allocate 4294967296 bytes. Error code 12"),
    MemoryError("no room"),
])
@pytest.mark.parametrize("debug", ["", "0", "false"])
def test_faults_under_bench_are_one_line(fault, debug, tmp_path, capsys, monkeypatch):
    """A failed allocation was a 31-line traceback; FUSEDKIT_DEBUG=0 or false turned debugging on."""
    def fails(*args, **kwargs):
        raise fault
    monkeypatch.setattr("fusedkit.runner.run_ladder", fails)
    monkeypatch.setenv("FUSEDKIT_DEBUG", debug)
    line = refused(capsys, ["bench", *TINY, "--records", str(tmp_path / "r.csv")], "error: ")
    assert (getattr(fault, "strerror", None) or " ".join(t.strip() for t in str(fault).splitlines())) in line


def test_debug_setting_shows_the_traceback(tmp_path, monkeypatch):
    def fails(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/data/records.csv")
    monkeypatch.setattr("fusedkit.runner.run_ladder", fails)
    monkeypatch.setenv("FUSEDKIT_DEBUG", "1")
    with pytest.raises(PermissionError):
        main(["bench", *TINY, "--records", str(tmp_path / "r.csv")])


def disk_full_after(monkeypatch, n: int = 0) -> None:
    """Every os.write of more than ``n`` bytes writes ``n`` and fails as a full disk does."""
    real = os.write

    def write(fd, data):
        if len(data) > n:
            real(fd, bytes(data[:n]))
            raise OSError(28, "No space left on device")
        return real(fd, data)
    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("existed", [True, False])
def test_records_on_a_full_disk_name_the_file_and_keep_it_whole(existed, tmp_path, capsys, monkeypatch):
    """A full disk gave a bare ``[Errno 28] No space left on device``."""
    path = tmp_path / "r.csv"
    before = valid_records(path) if existed else None

    def full_disk_at_the_append(*args, ctx, **kwargs):
        disk_full_after(monkeypatch, 16)
        records.append_rows(path, [records.make_row(ctx, problem="p12", sizes="batch_size=4",
                                                    variant="eager", timer="cpu-wall", median_ms=1.0)])
    monkeypatch.setattr("fusedkit.runner.run_ladder", full_disk_at_the_append)
    refused(capsys, ["bench", *TINY, "--records", str(path)], "error: [Errno 28] No space left on device: ",
            f"{path} was not written; " + ("it is left as it was" if existed else "no file was made"))
    monkeypatch.undo()
    assert (path.read_bytes() if existed else path.exists()) == (before if existed else False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.csv.lock"][1 - existed:]


# --- signals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("signum,how", [(signal.SIGINT, "interrupted: "),
                                        (signal.SIGTERM, "interrupted by SIGTERM: "),
                                        (signal.SIGHUP, "interrupted by SIGHUP: ")])
def test_a_signal_during_a_bench_counts_the_rows_of_its_own_run(signum, how, tmp_path, capsys,
                                                                monkeypatch):
    """A signal once a row is on disk: one line, exit 2, that row counted; a row another bench
    appended meanwhile to the same file is not (it said "2 rows"). SIGTERM ended the bench
    silently, SIGHUP with exit status 129."""
    path = tmp_path / "r.csv"

    def one_row_then_a_signal(*args, ctx, **kwargs):
        valid_records(path)   # another run's row
        records.append_rows(path, [records.make_row(ctx, problem="p12", sizes="batch_size=4",
                                                    variant="eager", timer="cpu-wall", median_ms=1.0)])
        os.kill(os.getpid(), signum)
        time.sleep(5)
        pytest.fail("the signal did not stop the bench")
    monkeypatch.setattr("fusedkit.runner.run_ladder", one_row_then_a_signal)
    refused(capsys, ["bench", *TINY, "--records", str(path)], how,
            f"1 row measured before the interrupt is kept in {path}")


def test_an_interrupt_before_the_first_measurement_says_nothing_was_written(tmp_path, capsys,
                                                                           monkeypatch):
    """A Ctrl-C while the bench checked its records file said only "interrupted"."""
    def ctrl_c(path):
        raise KeyboardInterrupt
    monkeypatch.setattr("fusedkit.records.preflight", ctrl_c)
    refused(capsys, ["bench", *TINY, "--records", str(tmp_path / "r.csv")],
            "interrupted before the first measurement: nothing was measured or written")
    assert not (tmp_path / "r.csv").exists()


def fusedkit_child(*args: str, env: dict | None = None) -> subprocess.Popen:
    """``python -m fusedkit ARGS`` in a process of its own, its output captured."""
    return subprocess.Popen([sys.executable, "-m", "fusedkit", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "FUSEDKIT_DEBUG": "", "PYTHONPATH": str(REPO), **(env or {})})


def stop(child: subprocess.Popen, signum: int, timeout: float = 60) -> tuple[str, str]:
    """Send ``signum`` to ``child`` and collect its output (killing it if it does not end)."""
    try:
        child.send_signal(signum)
        return child.communicate(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_real_bench_stopped_by_sigterm_then_ctrl_c_keeps_its_rows_in_one_line(tmp_path):
    """Signals reach a real bench, its worker and fork server: one line, exit 2, the rows kept,
    the file whole; a second signal while it stops changes nothing (it ended with exit status
    130, or added "interrupted while starting")."""
    path = tmp_path / "r.csv"
    child = fusedkit_child("bench", "--problem", "p12", "--sizes", "batch_size=64,in_features=256,out_features=256",
                           "--variants", "eager,addmm_alpha_beta", "--seeds", "20", "--rep-ms", "1500",
                           "--records", str(path))
    deadline = time.monotonic() + 90
    while not (path.exists() and len(records.read_records(path)) >= 1):
        if child.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no row was recorded within 90 s: {stop(child, signal.SIGKILL)}")
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
    out, err = stop(child, signal.SIGINT, timeout=30)
    assert child.returncode == 2, (out, err)
    n = len(records.read_records(path))
    one_line(err, "interrupted by SIGTERM: ", f"{n} row{'' if n == 1 else 's'} measured", str(path))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_signal_while_the_command_starts_is_one_line():
    """SIGTERM in the first second (while torch is imported) printed a 24-37 line traceback.
    Once the child catches SIGTERM (Python itself never does) it is still importing."""
    child = fusedkit_child("info")
    deadline = time.monotonic() + 20
    while True:
        status = Path(f"/proc/{child.pid}/status").read_text()
        caught = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("SigCgt:")), 16)
        if caught >> (signal.SIGTERM - 1) & 1:
            break
        if child.poll() is not None or time.monotonic() > deadline:
            stop(child, signal.SIGKILL)
            pytest.fail("python -m fusedkit installed no handler for SIGTERM while starting")
        time.sleep(0.001)
    out, err = stop(child, signal.SIGTERM)
    assert child.returncode == 2 and out == "", (out, err)
    one_line(err, "interrupted by SIGTERM while starting: nothing was done")


def test_the_console_script_is_the_command_and_starts_guarded(monkeypatch):
    """``.venv/bin/fusedkit`` runs fusedkit.cli:main and gets the start-up handler; a notebook or
    a test that imports fusedkit does not."""
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


# --- report ----------------------------------------------------------------------------------------

def notebooks(folder: Path, **cells: list[str]) -> list[Path]:
    """One notebook per keyword, ``name=[code cells]``, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, sources in cells.items():
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}"),
                                             *map(nbformat.v4.new_code_cell, sources)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, folder / f"{name}.ipynb")
        out.append(folder / f"{name}.ipynb")
    return out


@pytest.fixture
def no_notebook_runs(monkeypatch):
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))


def test_report_takes_a_folder_of_notebooks_and_each_name_once(tmp_path, capsys, monkeypatch,
                                                               no_notebook_runs):
    """``report notebooks`` (a folder) said "does not exist"; the same notebook given twice ran
    twice; two notebooks of one name from two folders said ok twice, one report over the other."""
    quick, slow = notebooks(tmp_path / "nb", **{"01_quick": ["1"], "02_slow": ["2"]})
    (twin,) = notebooks(tmp_path / "twin", **{"01_quick": ["3"]})
    (tmp_path / "empty").mkdir()
    got = []
    real = __import__("fusedkit.report", fromlist=["x"]).build_reports
    monkeypatch.setattr("fusedkit.report.build_reports", lambda out, nbs, **kw: got.append(nbs) or [])
    assert main(["report", "--out", str(tmp_path / "r"), str(tmp_path / "nb")]) == 0
    assert got == [[quick, slow]]
    monkeypatch.setattr("fusedkit.report.build_reports", real)
    capsys.readouterr()
    for argv, phrase in [([quick, quick], f"notebook={str(quick)!r} is given twice;"),
                         ([tmp_path / "nb", slow], f"notebook={str(slow)!r} is given twice"),
                         ([quick, twin], f"notebook={str(twin)!r} has the same name as {str(quick)!r}: "
                                         "both would write 01_quick.html"),
                         ([tmp_path / "empty"], "is a folder without numbered notebooks")]:
        refused(capsys, ["report", "--out", str(tmp_path / "r"), *map(str, argv)], "error: ", phrase, "allowed: ")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("how,phrases", [
    ("a file", ["afile is a file; allowed: a folder"]),
    ("in a read-only folder", ["the folder", "is not writable (mode 0o555)"]),
    ("on a read-only file system", ["is on a read-only file system"]),
    *[(kind, ["01_quick.html", phrase]) for kind, phrase in SPECIAL],
])
def test_report_out_that_cannot_hold_reports_is_refused_before_any_notebook_runs(
        how, phrases, tmp_path, capsys, monkeypatch, no_notebook_runs):
    (quick,) = notebooks(tmp_path / "nb", **{"01_quick": ["1"]})
    out = tmp_path / "reports"
    out.mkdir()
    if how == "a file":
        out = tmp_path / "afile"
        out.write_text("x")
    elif how == "in a read-only folder":
        out.chmod(0o555)
        out = out / "sub"
    elif how == "on a read-only file system":
        read_only_mount(monkeypatch, out)
    else:
        special(out, how).rename(out / "01_quick.html") if how != "loop" else (
            out / "01_quick.html").symlink_to("01_quick.html")
    try:
        refused(capsys, ["report", "--out", str(out), str(quick)], "error: --out: ", *phrases)
    finally:
        (tmp_path / "reports").chmod(0o755)
    if how in dict(SPECIAL):
        kept_as_it_was(out / "01_quick.html", how)


ALLOWED = "allowed: PROBLEM:NAME=VALUE,... or PROBLEM:PRESET (presets: kernelbench, small)"


@pytest.mark.parametrize("values,phrases", [
    ([""], ["--sizes is empty ('' names no problem)", ALLOWED]),
    (["batch_size=64"], ["--sizes='batch_size=64' names no problem before a colon", ALLOWED]),
    (["p99:batch_size=64"], ["problem 'p99' is not known", "allowed: p12 or p45 before the colon"]),
    (["p12:"], ["--sizes='p12:' names no sizes for p12", ALLOWED]),
    (["p12:batch_size=64,,in_features=8"], ["--sizes='p12:batch_size=64,,in_features=8': item 2 is empty"]),
    (["p12:nope=3"], ["'nope' is not a size of p12", "valid: batch_size, in_features, out_features"]),
    (["p45:small,output_size=70000"], ["output_size=70000 is out of range", "from 1 to 65536"]),
    (["p12:batch_size"], ["size 'batch_size' has no value", "allowed: name=value"]),
    (["p12:tiny"], ["'tiny' is neither a preset nor NAME=VALUE", "allowed: a preset (kernelbench, small)"]),
    (["p12:small", "12:batch_size=64"], ["--sizes names p12 twice", "allowed: each problem once"]),
])
def test_report_sizes_are_refused_in_one_line_before_any_notebook_runs(values, phrases, tmp_path, capsys,
                                                                      monkeypatch, no_notebook_runs):
    monkeypatch.chdir(tmp_path)
    refused(capsys, ["report", *[a for v in values for a in ("--sizes", v)]], "error: ", *phrases)
    assert list(tmp_path.iterdir()) == []


def test_report_sizes_refuse_a_notebook_without_a_parameters_cell(tmp_path, capsys, no_notebook_runs):
    (quick,) = notebooks(tmp_path / "nb", **{"01_quick": ["1"]})
    refused(capsys, ["report", "--out", str(tmp_path / "r"), "--sizes", "p12:small", str(quick)],
            "error: --sizes: 01_quick.ipynb has no parameters cell", "a code cell tagged 'parameters'")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("values,expected", [
    (["p12:small,batch_size=64", "p45:kernelbench"],
     {"p12": {"batch_size": 64, "in_features": 33, "out_features": 65},
      "p45": {"batch_size": 16384, "input_size": 2048, "hidden_size": 4096, "output_size": 1024}}),
    (["p12:batch_size=64,in_features=128", "45:Small"],
     {"p12": {"batch_size": 64, "in_features": 128, "out_features": 8192},
      "p45": {"batch_size": 17, "input_size": 33, "hidden_size": 65, "output_size": 19}}),
])
def test_report_sizes_take_presets_and_overrides(values, expected, tmp_path, capsys, monkeypatch):
    """What reaches the reports: every dimension of each problem named, presets resolved; the
    help names every preset."""
    from fusedkit.problems import presets

    got = {}
    monkeypatch.setattr("fusedkit.report.build_reports", lambda out, nbs, **kw: got.update(kw["sizes"]) or [])
    assert main(["report", "--out", str(tmp_path / "r"), *[a for v in values for a in ("--sizes", v)]]) == 0
    assert got == expected
    assert main(["report", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert all(f"{p.name}: {p.label}" in text for p in presets.PRESETS)


# --- export -----------------------------------------------------------------------------------------

def exported(*extra: str) -> int:
    return main(["export", "--problem", "p12", "--variant", "triton_fp16x3", *extra])


def test_export_force_keeps_a_read_only_file_and_the_mode_of_a_writable_one(tmp_path, capsys):
    """``export --force`` overwrote a read-only file and reset its mode to 0o644."""
    out = tmp_path / "solution.py"
    assert exported("-o", str(out)) == 0
    text = out.read_text()
    out.write_text("# mine\n")
    assert exported("-o", str(out)) == 2
    one_line(capsys.readouterr().err, "error: -o: ", "exists; pass --force")
    out.chmod(0o444)
    assert exported("-o", str(out), "--force") == 2
    one_line(capsys.readouterr().err, "error: -o: ", str(out), "is read-only (mode 0o444)")
    assert out.read_text() == "# mine\n" and (out.stat().st_mode & 0o777) == 0o444
    out.chmod(0o640)
    assert exported("-o", str(out), "--force") == 0
    assert out.read_text() == text and (out.stat().st_mode & 0o777) == 0o640


@pytest.mark.parametrize("make,phrases", [
    # -o DIR/ made a file of that name (with --force it overwrote one)
    (lambda t: f"{t}/fresh/", ["fresh/ ends in '/', so it names a folder"]),
    (lambda t: (t / "old.py").write_text("# mine\n") and f"{t}/old.py/", ["old.py/ ends in '/'"]),
    (lambda t: "-", ["'-' names no file here"]),
    (lambda t: (t / "ro").mkdir(mode=0o555) or t / "ro" / "s.py", ["the folder", "is not writable (mode 0o555)"]),
    *[(lambda t, k=k: special(t, k), [phrase]) for k, phrase in SPECIAL],
])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_export_refuses_a_path_it_may_not_write_force_or_not(make, phrases, force, tmp_path, capsys,
                                                            monkeypatch):
    """``export -o /dev/full --force`` exited 0 and the device became a regular file."""
    monkeypatch.chdir(tmp_path)
    path = make(tmp_path)
    try:
        assert exported("-o", str(path), *force) == 2
    finally:
        (tmp_path / "ro").exists() and (tmp_path / "ro").chmod(0o755)
    one_line(capsys.readouterr().err, "error: -o: ", *phrases)
    assert not (tmp_path / "fresh").exists() and not (tmp_path / "-").exists()
    assert not (tmp_path / "old.py").exists() or (tmp_path / "old.py").read_text() == "# mine\n"
    for kind, _ in SPECIAL:
        if os.path.lexists(tmp_path / kind):
            kept_as_it_was(tmp_path / kind, kind)


@pytest.mark.parametrize("how,phrases", [
    ("loop", ["kb is a symbolic link that loops"]),   # it said "cannot be created: File exists"
    ("afile", ["kb is a file"]),
    ("read-only file system", ["is on a read-only file system"]),   # it said "(mode 0o1777)"
    ("fifo", ["p12_triton_fp16x3.py is a FIFO"]),
])
def test_export_all_refuses_a_folder_or_a_file_in_it_before_the_first_write(how, phrases, tmp_path,
                                                                            capsys, monkeypatch):
    folder = tmp_path / "kb"
    if how == "loop":
        folder.symlink_to("kb")
    elif how == "afile":
        folder.write_text("x")
    elif how == "read-only file system":
        read_only_mount(monkeypatch, tmp_path)
    else:
        folder.mkdir()
        os.mkfifo(folder / "p12_triton_fp16x3.py")
    refused(capsys, ["export", "--problem", "p12", "--all", str(folder), "--force"], "error: --all: ", *phrases)
    assert not folder.is_dir() or folder.is_symlink() or [p.name for p in folder.iterdir()] == ["p12_triton_fp16x3.py"]


def test_an_exported_file_through_a_link_keeps_the_link(tmp_path):
    target, link = tmp_path / "real.py", tmp_path / "solution.py"
    link.symlink_to(target)
    assert exported("-o", str(link)) == 0
    assert link.is_symlink() and "class ModelNew" in target.read_text()


# --- the README's commands ---------------------------------------------------------------------

def test_the_readme_commands_parse_as_typed():
    """The README's command-line block, line by line, is what the parser accepts, as the command
    the set-up installs (.venv/bin/fusedkit)."""
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
    assert "python -m fusedkit" not in block
