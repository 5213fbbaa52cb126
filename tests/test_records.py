"""Tests of fusedkit.records: the data/ CSV schema, durable appends and strict reading."""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fusedkit import clocks, counters, records
from fusedkit.paths import PathError
from fusedkit.records import (
    COLUMNS,
    PREVIOUS_SCHEMAS,
    RecordsError,
    RunContext,
    append_rows,
    csv_line,
    default_path,
    make_row,
    read_records,
)

FORK = multiprocessing.get_context("fork")  # other processes, each with a lock of its own, started at once


def fake_context(tag: str = "") -> RunContext:
    """A GPU-looking context without touching torch (fast, and usable in child processes)."""
    token = os.urandom(3).hex()
    return RunContext(run_id=f"20261129T091500Z-{token}{tag}", timestamp="2026-11-29T09:15:00Z",
                      commit="1a2b3c4+dirty", device="NVIDIA H200", driver="550.54.15",
                      cuda="12.8", torch="2.11.0+cu128", triton="3.6.0")


def random_fields(rng: np.random.Generator, variant: str) -> dict:
    """One row's measurements: fresh random values of realistic magnitude."""
    med = float(rng.uniform(0.3, 9.0))
    return dict(
        problem=str(rng.choice(["p12", "p45"])),
        sizes={"batch": int(rng.integers(1, 16384)), "in_features": 8192, "out_features": 8192},
        variant=variant,
        tier=str(rng.choice(["reference", "fp32-faithful", "kb-pass", "fast", ""])),
        timer=str(rng.choice(["cuda-events", "cpu-wall"])),
        median_ms=med,
        p10_ms=med * float(rng.uniform(0.9, 1.0)),
        p90_ms=med * float(rng.uniform(1.0, 1.2)),
        repeats=int(rng.integers(1, 500)),
        tflops=float(rng.uniform(1, 900)),
        gbps=float(rng.uniform(10, 4800)),
        pct_of_floor=float(rng.uniform(1, 100)),
        max_abs_error=float(10 ** rng.uniform(-8, -2)),
        rel_error=np.float64(10 ** rng.uniform(-8, -3)),   # numpy scalars are accepted
        allclose=bool(rng.integers(0, 2)) if rng.random() < 0.8 else None,
        peak_mem_mb=float(rng.uniform(1, 4000)) if rng.random() < 0.5 else None,
        notes=f'tile 128x128, "stages"={int(rng.integers(2, 5))}, W split once',
    )


def write_valid_file(path: Path, n: int = 3) -> list[dict]:
    rng = np.random.default_rng()
    ctx = fake_context()
    rows = [make_row(ctx, **random_fields(rng, f"v{i}")) for i in range(n)]
    append_rows(path, rows)
    return rows


def temp_leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.endswith(".tmp"))


# --- round trip -----------------------------------------------------------------------------

def test_round_trip_keeps_every_value_and_types_the_columns(tmp_path):
    rng = np.random.default_rng()
    ctx = fake_context()
    given = [random_fields(rng, f"step{i:02d}") for i in range(6)]
    path = tmp_path / "records.csv"
    append_rows(path, [make_row(ctx, **g) for g in given])

    df = read_records(path)
    assert list(df.columns) == list(COLUMNS)
    assert len(df) == len(given)
    assert str(df["timestamp"].dtype) == "datetime64[ns, UTC]"
    assert df["timestamp"].iloc[0] == pd.Timestamp("2026-11-29T09:15:00Z")
    assert str(df["repeats"].dtype) == "Int64"
    assert str(df["allclose"].dtype) == "boolean"
    for c in ("median_ms", "p10_ms", "p90_ms", "tflops", "gbps", "pct_of_floor",
              "max_abs_error", "rel_error", "peak_mem_mb"):
        assert df[c].dtype == np.float64, c

    for (_, got), want in zip(df.iterrows(), given):
        for c in ("median_ms", "p10_ms", "p90_ms", "tflops", "gbps", "max_abs_error", "rel_error"):
            assert got[c] == float(want[c]), c          # bit for bit, not approximately
        if want["peak_mem_mb"] is None:
            assert math.isnan(got["peak_mem_mb"])
        else:
            assert got["peak_mem_mb"] == want["peak_mem_mb"]
        assert got["repeats"] == want["repeats"]
        assert (got["allclose"] is pd.NA) if want["allclose"] is None else got["allclose"] == want["allclose"]
        assert got["sizes"] == ",".join(f"{k}={v}" for k, v in want["sizes"].items())
        assert got["notes"] == want["notes"]
        assert got["tier"] == want["tier"] and got["variant"] == want["variant"]
        assert got["device"] == "NVIDIA H200" and got["commit"] == "1a2b3c4+dirty"

    # Commas and quotes are quoted properly: a plain CSV reader agrees.
    plain = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert list(plain["sizes"]) == list(df["sizes"]) and list(plain["notes"]) == list(df["notes"])


def test_missing_and_empty_files_read_as_empty_frames(tmp_path):
    assert read_records(tmp_path / "absent.csv").empty
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    df = read_records(empty)
    assert df.empty and list(df.columns) == list(COLUMNS)
    write_valid_file(empty, n=2)   # an empty file gets its header on the first append
    assert empty.read_text().splitlines()[0] == ",".join(COLUMNS)
    assert len(read_records(empty)) == 2


def test_appending_twice_keeps_earlier_rows(tmp_path):
    path = tmp_path / "records.csv"
    first = write_valid_file(path, n=3)
    before = path.read_bytes()
    second = write_valid_file(path, n=2)
    assert path.read_bytes().startswith(before)      # earlier bytes untouched
    df = read_records(path)
    assert list(df["run_id"]) == [r["run_id"] for r in first + second]
    assert list(df["median_ms"]) == [float(r["median_ms"]) for r in first + second]


def test_duplicate_run_and_variant_is_refused(tmp_path):
    path = tmp_path / "records.csv"
    rows = write_valid_file(path, n=2)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="already recorded at line 2"):
        append_rows(path, [rows[0]])
    with pytest.raises(ValueError, match="earlier row of this call"):
        extra = make_row(fake_context(), **random_fields(np.random.default_rng(), "x"))
        append_rows(path, [extra, extra])
    assert path.read_bytes() == before


# --- crashes --------------------------------------------------------------------------------

def test_failed_rename_leaves_original_intact(tmp_path, monkeypatch):
    path = tmp_path / "records.csv"
    rows = write_valid_file(path, n=3)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(records.os, "replace", broken_replace)
    with pytest.raises(OSError, match="simulated crash"):
        write_valid_file(path, n=2)
    assert path.read_bytes() == before
    assert temp_leftovers(path) == []
    assert list(read_records(path)["variant"]) == [r["variant"] for r in rows]


def test_partial_temp_write_leaves_original_intact(tmp_path, monkeypatch):
    """A full disk half-way through the temporary file: the file is left as it was, and said so."""
    path = tmp_path / "records.csv"
    write_valid_file(path, n=3)
    before = path.read_bytes()
    real = os.write

    def half_then_fail(fd, data):
        real(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(PathError, match=f"No space left on device: {path} was not written; it is left as it was"):
        write_valid_file(path, n=4)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert temp_leftovers(path) == []
    assert len(read_records(path)) == 3


def _die_mid_write(path: str) -> None:
    """Child process: start an append and die (no cleanup, no exception) half-way through."""
    real = os.write

    def half_then_die(fd, data):
        real(fd, data[: len(data) // 2])
        os._exit(3)

    os.write = half_then_die
    write_valid_file(Path(path), n=2)


def test_process_killed_mid_write_leaves_original_and_lock_usable(tmp_path):
    path = tmp_path / "records.csv"
    first = write_valid_file(path, n=3)
    before = path.read_bytes()
    child = FORK.Process(target=_die_mid_write, args=(str(path),))
    child.start()
    child.join(60)
    assert child.exitcode == 3
    assert path.read_bytes() == before
    assert len(temp_leftovers(path)) == 1                 # the dead writer's half file
    assert len(read_records(path)) == 3
    later = write_valid_file(path, n=2)                   # the lock died with the process
    assert temp_leftovers(path) == []                     # and its leftover is swept
    assert list(read_records(path)["run_id"]) == [r["run_id"] for r in first + later]


# --- concurrency ----------------------------------------------------------------------------

def _append_many(path: str, worker: int, calls: int, per_call: int) -> None:
    rng = np.random.default_rng()
    ctx = fake_context(tag=f"w{worker}")
    for call in range(calls):
        rows = [make_row(ctx, **random_fields(rng, f"w{worker}-c{call}-r{i}")) for i in range(per_call)]
        append_rows(path, rows)


def test_concurrent_appends_lose_no_rows(tmp_path):
    path = tmp_path / "records.csv"
    workers, calls, per_call = 4, 8, 3
    procs = [FORK.Process(target=_append_many, args=(str(path), w, calls, per_call))
             for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * workers
    df = read_records(path)
    want = {f"w{w}-c{c}-r{i}" for w in range(workers) for c in range(calls) for i in range(per_call)}
    assert len(df) == len(want) and set(df["variant"]) == want
    # Each worker's own rows stay in the order it wrote them.
    for w in range(workers):
        mine = [v for v in df["variant"] if v.startswith(f"w{w}-")]
        assert mine == [f"w{w}-c{c}-r{i}" for c in range(calls) for i in range(per_call)]
    assert temp_leftovers(path) == []


# --- malformed files ------------------------------------------------------------------------

def _set(column: str, value: str):
    def edit(cells: list[str]) -> list[str]:
        cells[COLUMNS.index(column)] = value
        return cells
    return edit


@pytest.mark.parametrize(("edit", "message"), [
    (lambda cells: cells[:-2], f"wrong field count: {len(COLUMNS) - 2} fields, expected {len(COLUMNS)}"),
    (lambda cells: cells + ["extra"], f"wrong field count: {len(COLUMNS) + 1} fields"),
    (_set("median_ms", "fast"), "median_ms='fast' is not a number"),
    (_set("median_ms", "nan"), "median_ms='nan': expected a finite number > 0"),
    (_set("median_ms", ""), "median_ms is empty"),
    (_set("tier", "good-enough"), "tier='good-enough': expected one of 'reference'"),
    (_set("timer", "stopwatch"), "timer='stopwatch': expected one of 'cuda-events', 'cpu-wall'"),
    (_set("allclose", "yes"), "allclose='yes'"),
    (_set("notes", "x" * 5000), ""),      # valid: the row itself is kept as it is
    (_set("repeats", "2.5"), "repeats='2.5': expected a whole number"),
    (_set("timestamp", "yesterday"), "timestamp='yesterday'"),
    (_set("sizes", "1024x8192"), "sizes='1024x8192'"),
])
def test_malformed_line_names_file_and_line(tmp_path, edit, message):
    import csv
    import io

    path = tmp_path / "records.csv"
    write_valid_file(path, n=4)
    lines = path.read_text().splitlines(keepends=True)
    broken = 3                                            # header is line 1
    cells = next(csv.reader([lines[broken - 1]]))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(edit(cells))
    lines[broken - 1] = buf.getvalue()
    path.write_text("".join(lines))
    before = path.read_bytes()

    if not message:
        assert len(read_records(path)) == 4
        return
    with pytest.raises(RecordsError, match=re.escape(f"{path}:{broken}: {message}")):
        read_records(path)
    with pytest.raises(RecordsError, match=re.escape(f"{path}:{broken}: {message}")):
        records.preflight(path)                           # found before anything is measured
    with pytest.raises(RecordsError, match=re.escape(f"{path}:{broken}:")):
        write_valid_file(path, n=1)                       # appends refuse a broken file ...
    assert path.read_bytes() == before                    # ... and leave it as it was


@pytest.mark.parametrize("damage,message", [
    # another header: one short line naming the first column that differs
    (lambda text: ",".join([c for c in COLUMNS if c != "peak_mem_mb"] + ["gpu_clock_mhz"]) + "\n"
     + text.split("\n", 1)[1], ":1: not a records file: column 24 is 'build_s', expected 'peak_mem_mb'"),
    (lambda text: "\x00garbage" * 500 + "\n" + text, ":1: not a records file: column 1 is "),
    # a last row cut inside its last field was read and appended to as a valid-looking record
    (lambda text: text[:-3], ":3: the last line has no final newline, so its row may be cut short"),
])
def test_a_damaged_file_is_refused_by_every_reader_and_writer_and_kept(tmp_path, damage, message):
    path = tmp_path / "records.csv"
    write_valid_file(path, n=2)
    path.write_text(damage(path.read_text()))
    before = path.read_bytes()
    for action in (lambda: read_records(path), lambda: write_valid_file(path, n=1),
                   lambda: records.preflight(path)):
        with pytest.raises(RecordsError) as info:
            action()
        assert str(info.value).startswith(f"{path}{message}") and len(str(info.value)) < 300
    assert path.read_bytes() == before


@pytest.mark.parametrize("reader,good", [(counters.read_counters, counters.default_path()),
                                         (clocks.read_clocks, clocks.default_path())])
@pytest.mark.parametrize("damage,message", [
    (lambda lines: [*lines[:2], lines[2][:-7]], ":3: the last line has no final newline"),
    (lambda lines: [lines[0], b"\xff" + lines[1], lines[2]], ":2: not UTF-8 text"),
    (lambda lines: [lines[0], lines[1].rsplit(b",", 1)[0] + b",fast\n", lines[2]], ":2: "),
])
def test_the_counters_and_clocks_are_read_as_strictly_as_the_records(reader, good, damage, message,
                                                                     tmp_path):
    """A counters.csv cut mid-row was read without a word (and notebook 04 built "ok" from it);
    garbage gave a bare UnicodeDecodeError, a bad number "Unable to parse string 'fast' at
    position 141": no file, line or column."""
    head = good.read_bytes().splitlines(keepends=True)[:3]
    path = tmp_path / good.name
    path.write_bytes(b"".join(damage(head)))
    with pytest.raises(RecordsError, match=re.escape(f"{path}{message}")) as info:
        reader(path)
    assert "\n" not in str(info.value)
    path.write_bytes(b"".join(head))
    assert len(reader(path)) == 2


# --- make_row -------------------------------------------------------------------------------

def test_make_row_unknown_column_lists_valid_ones():
    fields = random_fields(np.random.default_rng(), "eager")
    with pytest.raises(ValueError, match="median_time") as info:
        make_row(fake_context(), median_time=1.0, **fields)
    assert all(c in str(info.value) for c in COLUMNS)


@pytest.mark.parametrize(("change", "error", "message"), [
    ({"median_ms": None}, ValueError, "missing required column(s) median_ms"),
    ({"median_ms": float("inf")}, ValueError, "median_ms='inf'"),
    ({"median_ms": -1.0}, ValueError, "median_ms='-1.0'"),
    ({"tflops": float("nan")}, ValueError, "tflops='nan'"),
    ({"median_ms": "2.7"}, TypeError, "median_ms='2.7': expected a number"),
    ({"allclose": "true"}, TypeError, "allclose='true'"),
    ({"tier": "faithful"}, ValueError, "tier='faithful': expected one of"),
    ({"notes": "two\nlines"}, ValueError, "line break"),
    ({"device": "GPU"}, ValueError, "device come(s) from the RunContext"),
    ({"p10_ms": 50.0}, ValueError, "expected p10 <= median <= p90"),
])
def test_make_row_rejects_bad_values(change, error, message):
    fields = random_fields(np.random.default_rng(), "eager")
    fields.update(change)
    with pytest.raises(error, match=re.escape(message)):
        make_row(fake_context(), **fields)


def test_append_rows_checks_rows_it_did_not_get_from_make_row(tmp_path):
    row = make_row(fake_context(), **random_fields(np.random.default_rng(), "eager"))
    with pytest.raises(ValueError, match=re.escape("rows[0]: missing ['notes']")):
        append_rows(tmp_path / "r.csv", [{k: v for k, v in row.items() if k != "notes"}])
    with pytest.raises(ValueError, match="rows\\[0\\]: median_ms='-3'"):
        append_rows(tmp_path / "r.csv", [{**row, "median_ms": "-3"}])
    assert not (tmp_path / "r.csv").exists()


# --- context and paths ----------------------------------------------------------------------

def test_collect_on_this_machine(tmp_path):
    import torch

    ctx = RunContext.collect(repo_root=tmp_path)          # tmp_path is not a git checkout
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", ctx.run_id)
    stamp = pd.Timestamp(ctx.timestamp).to_pydatetime()
    assert ctx.timestamp.endswith("Z") and abs(datetime.now(timezone.utc) - stamp) < timedelta(minutes=2)
    assert ctx.run_id[:16] == stamp.strftime("%Y%m%dT%H%M%SZ")
    assert ctx.commit == "unknown"
    assert ctx.torch == torch.__version__
    assert ctx.cuda == (torch.version.cuda or "")
    if torch.cuda.is_available():
        assert not ctx.device.startswith("cpu")
    else:
        assert ctx.device.startswith("cpu: ") and len(ctx.device) > len("cpu: ")
        assert ctx.driver == ""
    assert RunContext.collect(repo_root=tmp_path).run_id != ctx.run_id
    # The context makes rows that can be written and read back.
    append_rows(tmp_path / "r.csv", [make_row(ctx, **random_fields(np.random.default_rng(), "eager"))])
    assert read_records(tmp_path / "r.csv")["device"].iloc[0] == ctx.device


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_commit_is_short_hash_with_dirty_suffix(tmp_path, monkeypatch):
    monkeypatch.delenv("FUSEDKIT_COMMIT", raising=False)
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t",
                               "-c", "commit.gpgsign=false", *args],
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "kernel.cu").write_text("// step 1\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "records.csv").write_text("old\n")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    head = git("rev-parse", "--short", "HEAD")
    assert records._git_commit(tmp_path) == head
    (tmp_path / "data" / "records.csv").write_text("old\nnew\n")   # new records: still clean
    (tmp_path / "data" / "records.csv.lock").write_text("")
    assert records._git_commit(tmp_path) == head
    (tmp_path / "kernel.cu").write_text("// step 2\n")               # source changed: dirty
    assert records._git_commit(tmp_path) == head + "+dirty"
    # A caller that knows better (a copied tree with a stale .git) names the commit itself.
    monkeypatch.setenv("FUSEDKIT_COMMIT", "abc1234")
    assert records._git_commit(tmp_path) == "abc1234"


def test_default_path_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("FUSEDKIT_RECORDS", raising=False)
    repo = Path(records.__file__).resolve().parents[1]
    assert default_path() == repo / "data" / "records.csv"
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(tmp_path / "trial.csv"))
    assert default_path() == tmp_path / "trial.csv"


def test_readme_documents_every_column_in_order():
    readme = Path(records.__file__).resolve().parents[1] / "data" / "README.md"
    documented = re.findall(r"^\| \d+ \| `([a-z0-9_]+)` \|", readme.read_text(), flags=re.M)
    assert tuple(documented) == COLUMNS


def test_import_records_appends_once(tmp_path):
    ctx = records.RunContext.collect()
    src, dst = tmp_path / "gpu.csv", tmp_path / "data.csv"
    rows = [records.make_row(ctx, problem="p12", sizes="batch_size=3", variant=v,
                             timer="cuda-events", median_ms=1.0 + i) for i, v in enumerate(["a", "b"])]
    records.append_rows(src, rows)
    assert records.import_records(src, dst) == 2
    assert list(records.read_records(dst)["variant"]) == ["a", "b"]
    assert records.import_records(src, dst) == 0          # nothing twice
    assert len(records.read_records(dst)) == 2
    # a different measurement under a recorded key is refused, and dst is left as it was
    changed = src.read_text().replace(",1.0,", ",9.0,", 1)
    assert changed != src.read_text()
    src.write_text(changed)
    with pytest.raises(ValueError, match="already recorded"):
        records.import_records(src, dst)
    assert len(records.read_records(dst)) == 2


# --- read-only files and the preflight check ------------------------------------------------

def test_append_refuses_a_read_only_file_and_leaves_it_unchanged(tmp_path):
    path = tmp_path / "records.csv"
    write_valid_file(path, n=2)
    path.chmod(0o444)
    before = path.read_bytes()
    with pytest.raises(PathError) as info:
        write_valid_file(path, n=1)    # as root too: the rename would ignore the file's mode
    text = str(info.value)
    assert str(path) in text and "read-only" in text and "0o444" in text and "\n" not in text
    assert path.read_bytes() == before and (path.stat().st_mode & 0o777) == 0o444
    assert temp_leftovers(path) == []


def test_preflight_accepts_new_and_valid_files_and_creates_nothing(tmp_path):
    records.preflight(tmp_path / "new" / "deeper" / "records.csv")   # folders to be created
    assert list(tmp_path.iterdir()) == []
    path = tmp_path / "records.csv"
    write_valid_file(path, n=2)
    before = sorted(p.name for p in tmp_path.iterdir())
    records.preflight(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("dangling", [False, True])
def test_an_append_through_a_symbolic_link_writes_its_target_and_keeps_the_link(tmp_path, dangling):
    """The append's rename replaced the link with a file: the target never got the row."""
    target, link = tmp_path / "real" / "records.csv", tmp_path / "link.csv"
    target.parent.mkdir()
    first = [] if dangling else write_valid_file(target, n=1)
    link.symlink_to(target)
    records.preflight(link)
    later = write_valid_file(link, n=1)
    assert link.is_symlink() and link.resolve() == target
    assert list(read_records(target)["run_id"]) == [r["run_id"] for r in first + later]


@pytest.mark.parametrize("old_columns", PREVIOUS_SCHEMAS)
def test_a_previous_schema_is_read_and_rewritten_by_the_next_append(tmp_path, old_columns):
    # Records written before the newer columns (build_s and seconds on 2026-12-04, the timed
    # window on 2026-12-05) still read, those columns empty, and the next append rewrites the
    # file in the current schema.
    path = tmp_path / "records.csv"
    ctx = RunContext(run_id="20261201T000000Z-00000a", timestamp="2026-12-01T00:00:00Z",
                     commit="abc1234", device="NVIDIA H200", driver="580", cuda="13.0",
                     torch="2.11.0", triton="3.6.0")
    old = make_row(ctx, problem="p12", sizes="batch_size=8", variant="eager", timer="cuda-events",
                   median_ms=1.0)
    path.write_text(csv_line(old_columns) + csv_line(old[c] for c in old_columns))
    frame = read_records(path)
    assert len(frame) == 1 and frame["seconds"].isna().all() and frame["timed_to"].isna().all()
    new = make_row(ctx, problem="p12", sizes="batch_size=9", variant="eager", timer="cuda-events",
                   median_ms=1.0, build_s=2.5, seconds=4.25, timed_from="2026-12-01T00:00:01.250Z",
                   timed_to="2026-12-01T00:00:02.500Z")
    append_rows(path, [new])
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    frame = read_records(path)
    assert list(frame["seconds"].fillna(-1)) == [-1, 4.25] and frame["build_s"].iloc[1] == 2.5
    assert (frame["timed_to"].iloc[1] - frame["timed_from"].iloc[1]).total_seconds() == 1.25
    assert frame["median_ms"].tolist() == [1.0, 1.0]
