"""``python -m fusedkit bench`` answers bad input and faults with one ``error:`` line and exit 2.

Every refusal here must come before anything is measured: the ``no_measuring`` fixture
makes the runner and the sweep fail the test if they are reached at all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fusedkit import records
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
                                          ("two", "--seeds='two'")])
def test_seeds_must_be_a_positive_integer(value, phrase, tmp_path, capsys, no_measuring):
    assert main(["bench", *TINY, "--seeds", value, "--records", str(tmp_path / "r.csv")]) == 2
    one_line(capsys.readouterr().err, "error: ", phrase, "allowed: an integer >= 1")


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
def test_unwritable_records_location_is_refused(how, tmp_path, capsys, monkeypatch, no_measuring):
    folder = tmp_path / "locked"
    folder.mkdir()
    if how == "path under a file":
        (tmp_path / "afile").write_text("not a folder\n")
        path, phrase = tmp_path / "afile" / "records.csv", "is a file, not a folder"
    elif os.geteuid() == 0:   # root writes through chmod 0o555: make os.access say what it would
        path, phrase = folder / "records.csv", "is not writable"
        real = os.access
        monkeypatch.setattr(records.os, "access",
                            lambda p, mode, **kw: False if Path(p) == folder else real(p, mode, **kw))
    else:
        path, phrase = folder / "records.csv", "is not writable"
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
])
def test_faults_under_bench_are_one_line(fault, tmp_path, capsys, monkeypatch):
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
    """In process: a Ctrl-C after one row was appended reports that row, exit 2."""
    path = tmp_path / "r.csv"

    def one_row_then_ctrl_c(*args, **kwargs):
        valid_records(path)
        raise KeyboardInterrupt
    monkeypatch.setattr("fusedkit.runner.run_ladder", one_row_then_ctrl_c)
    try:
        rc = main(["bench", *TINY, "--records", str(path)])
    except KeyboardInterrupt:   # escaping, it would stop the whole pytest session
        pytest.fail("main let KeyboardInterrupt escape")
    assert rc == 2
    one_line(capsys.readouterr().err, "interrupted: 1 row measured before the interrupt is kept in",
             str(path))


def test_sigint_during_a_bench_keeps_measured_rows(tmp_path):
    """A real Ctrl-C (SIGINT) once the first row is on disk: one line, exit 2, rows kept."""
    path = tmp_path / "r.csv"
    argv = [sys.executable, "-m", "fusedkit", "bench", "--problem", "p12",
            "--sizes", "batch_size=64,in_features=256,out_features=256",
            "--variants", "eager,addmm_alpha_beta", "--seeds", "50", "--rep-ms", "2000",
            "--records", str(path)]
    child = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "FUSEDKIT_DEBUG": ""})
    try:
        deadline = time.monotonic() + 60
        while not (path.exists() and len(records.read_records(path)) >= 1):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "no row was recorded within 60 s"
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 2, (out, err)
    kept = records.read_records(path)   # still a valid file
    assert len(kept) >= 1 and kept["variant"].iloc[0] == "eager"
    n = len(kept)
    one_line(err, "interrupted: ", f"{n} row{'' if n == 1 else 's'} measured", str(path))


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
