"""The ``data/`` records: one CSV row per (run, variant) with its timing, accuracy and origin.

The file is append-only and is never edited in place. An append takes an exclusive lock,
re-reads and validates the whole file, writes old + new rows to a temporary file in the
same folder, syncs it to disk and atomically renames it over the original; a process that
dies at any point leaves either the old file or the new one, never a torn mix. Readers
take no lock: a rename is atomic, so they see one version or the other.

The schema, column by column with units, is documented in ``data/README.md``.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import math
import os
import re
import secrets
import stat
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fusedkit.paths import file_fault, folder_fault, mode_text, read_only, write_failed, write_target
from fusedkit.precision import TIERS as PRECISION_TIERS

if TYPE_CHECKING:
    import torch

COLUMNS: tuple[str, ...] = (
    "run_id", "timestamp", "commit", "device", "driver", "cuda", "torch", "triton",
    "problem", "sizes", "variant", "tier", "timer",
    "median_ms", "p10_ms", "p90_ms", "repeats", "tflops", "gbps", "pct_of_floor",
    "max_abs_error", "rel_error", "allclose", "peak_mem_mb", "build_s", "seconds",
    "timed_from", "timed_to", "notes",
)
"""Column names, in file order."""

PREVIOUS_SCHEMAS: tuple[tuple[str, ...], ...] = (
    tuple(c for c in COLUMNS if c not in ("timed_from", "timed_to")),
    tuple(c for c in COLUMNS if c not in ("timed_from", "timed_to", "build_s", "seconds")),
)
"""Earlier schemas (before ``timed_from``/``timed_to``, 2026-12-05; before ``build_s`` and
``seconds``, 2026-12-04): still read, their new columns empty, and rewritten in the current
one by the next append."""

CONTEXT_COLUMNS: tuple[str, ...] = COLUMNS[:8]
"""Columns filled from :class:`RunContext`; the same for every row of one run."""

REQUIRED: tuple[str, ...] = ("problem", "sizes", "variant", "timer", "median_ms")
"""Per-row columns that :func:`make_row` must be given."""

TIERS: tuple[str, ...] = (*PRECISION_TIERS, "")
"""Precision tiers (:data:`fusedkit.precision.TIERS`); "" means not judged (unchecked, or a
tf32 / fp16 variant run in Triton's CPU interpreter, which computes in fp32)."""

TIMERS: tuple[str, ...] = ("cuda-events", "cpu-wall")
"""How ``median_ms`` was measured."""

# Value kinds. Times must be > 0; other measurements >= 0; "" means not measured.
_TIMES = ("median_ms", "p10_ms", "p90_ms")
_FLOATS = _TIMES + ("tflops", "gbps", "pct_of_floor", "max_abs_error", "rel_error", "peak_mem_mb",
                    "build_s", "seconds")
_INTS = ("repeats",)
_NON_EMPTY = ("run_id", "timestamp", "commit", "device", "torch", "problem", "sizes", "variant")
# A row is identified by these: the same run may time one variant at several sizes.
_KEY = ("run_id", "problem", "sizes", "variant")

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_SIZES_RE = re.compile(rf"{_NAME}=[^,=\s]+(,{_NAME}=[^,=\s]+)*")


class RecordsError(ValueError):
    """A records file is malformed; the message names the file, the line and the fault."""


class RecordsNotWritable(RecordsError, PermissionError):
    """A records file or folder that may not be written; the message names the path.

    Both a RecordsError and a PermissionError, so either ``except`` catches it.
    """


@dataclass
class RunContext:
    """Where and when one run was measured: the first eight columns of each of its rows.

    ``timestamp`` is ISO 8601 in UTC (``2026-11-29T09:15:00Z``); ``run_id`` sorts by time
    and ends in 6 random hex digits so that two runs in the same second differ.
    """

    run_id: str
    timestamp: str
    commit: str
    device: str
    driver: str
    cuda: str
    torch: str
    triton: str

    @classmethod
    def collect(cls, repo_root: str | os.PathLike[str] | None = None) -> RunContext:
        """Gather the context of this process: clock, git commit, device and versions.

        ``repo_root`` is the git checkout whose commit is recorded (default: the folder
        holding the ``fusedkit`` package). Nothing here fails for lack of a GPU or of git:
        missing facts are recorded as "" (``commit`` as "unknown").
        """
        import torch  # noqa: PLC0415 - heavy; only needed here

        from fusedkit.mode import detect_mode  # noqa: PLC0415 - imports torch and triton

        now = datetime.now(timezone.utc).replace(microsecond=0)
        root = Path(repo_root) if repo_root is not None else _repo_root()
        mode = detect_mode()  # device "NVIDIA H200" or "cpu: <processor>", Triton version
        return cls(
            run_id=f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}",
            timestamp=f"{now:%Y-%m-%dT%H:%M:%SZ}",
            commit=_git_commit(root),
            device=mode.device,
            driver=_nvidia_driver() if mode.gpu else "",
            cuda=torch.version.cuda or "",
            torch=torch.__version__,
            triton=mode.triton,
        )


def default_path() -> Path:
    """The records file: ``$FUSEDKIT_RECORDS`` if set, else ``<repo>/data/records.csv``."""
    override = os.environ.get("FUSEDKIT_RECORDS", "").strip()
    if override:
        return Path(override).expanduser()
    return _repo_root() / "data" / "records.csv"


def local_path() -> Path:
    """Where runs without a GPU (or in Triton's interpreter) record by default: an ignored file
    beside the tracked history, so a laptop's CPU timings never enter ``data/records.csv``."""
    return default_path().parent / "local" / "records.csv"


def path_for(device: torch.device, path: str | os.PathLike[str] | None = None) -> Path:
    """The records file a run on ``device`` appends to: ``path`` when given (or
    ``$FUSEDKIT_RECORDS``), else the tracked history on a GPU and :func:`local_path`
    on a CPU."""
    if path:
        return Path(path)
    if device.type == "cuda" or os.environ.get("FUSEDKIT_RECORDS", "").strip():
        return default_path()
    return local_path()


def make_row(ctx: RunContext, **fields: object) -> dict[str, str]:
    """One validated row: the run's context plus ``fields``, every value as its CSV text.

    ``fields`` are columns of :data:`COLUMNS` other than the context ones; :data:`REQUIRED`
    must be present, the rest default to "" (not measured). Units: times in ms, ``tflops``
    in 1e12 FLOP/s, ``gbps`` in 1e9 bytes/s, ``pct_of_floor`` in percent,
    ``peak_mem_mb`` in 1e6 bytes. ``sizes`` may be a mapping such as ``{"batch": 1024}``;
    ``allclose`` a bool or None; numbers must be finite. Raises ValueError or TypeError.
    """
    unknown = sorted(set(fields) - set(COLUMNS))
    if unknown:
        raise ValueError(f"make_row: unknown column(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(COLUMNS)}")
    from_ctx = [c for c in CONTEXT_COLUMNS if c in fields]
    if from_ctx:
        raise ValueError(f"make_row: {', '.join(from_ctx)} come(s) from the RunContext; "
                         f"pass only: {', '.join(COLUMNS[len(CONTEXT_COLUMNS):])}")
    missing = [c for c in REQUIRED if fields.get(c) is None]
    if missing:
        raise ValueError(f"make_row: missing required column(s) {', '.join(missing)}")
    if not isinstance(ctx, RunContext):
        raise TypeError(f"make_row: ctx={ctx!r} is not a RunContext; use RunContext.collect()")
    row = {c: _to_text(c, v) for c, v in asdict(ctx).items()}
    row.update({c: _to_text(c, fields.get(c)) for c in COLUMNS if c not in row})
    fault = _check_row(row)
    if fault:
        raise ValueError(f"make_row: {fault}")
    return row


def append_rows(path: str | os.PathLike[str], rows: list[dict]) -> None:
    """Append ``rows`` (from :func:`make_row`) to the records file at ``path``, durably.

    Creates the file, with its header, if missing. The existing file is validated first
    and left untouched if it is read-only (RecordsNotWritable), malformed, has another
    schema (RecordsError), or if a new row repeats the (run_id, problem, sizes, variant)
    of a recorded one (ValueError).
    """
    path = Path(path)
    texts = [_row_text(i, r) for i, r in enumerate(rows)]
    if not texts:
        return
    _refuse_repeats(path, [], texts)   # within this call, whatever the file holds

    def check(p: Path, text: str) -> str | None:
        recorded = _parse(p, text)
        _refuse_repeats(p, recorded, texts)
        if text.startswith(csv_line(COLUMNS)):
            return None
        # The previous schema: the whole file again in the current one, values unchanged.
        return csv_line(COLUMNS) + "".join(csv_line(r[c] for c in COLUMNS) for _, r in recorded)

    append_lines(path, csv_line(COLUMNS), "".join(csv_line(row[c] for c in COLUMNS) for row in texts),
                 check)


def _refuse_repeats(path: Path, recorded: list[tuple[int, dict[str, str]]],
                    texts: list[dict[str, str]]) -> None:
    """ValueError naming the first new row whose key is recorded, or repeats an earlier new row."""
    seen = {tuple(r[c] for c in _KEY): line for line, r in recorded}
    for i, row in enumerate(texts):
        key = tuple(row[c] for c in _KEY)
        if key in seen:
            where = f"line {seen[key]} of {path}" if seen[key] else "an earlier row of this call"
            raise ValueError(f"rows[{i}]: {dict(zip(_KEY, key))} is already recorded at {where}; "
                             "each (run_id, problem, sizes, variant) is recorded once")
        seen[key] = 0


def append_lines(path: str | os.PathLike[str], header: str, lines: str,
                 check: Callable[[Path, str], object]) -> None:
    """Append ``lines`` (whole CSV lines) to another file of ``data/`` with the same care as
    :func:`append_rows`: an exclusive lock, the existing text validated by ``check(path, text)``
    (which raises to refuse it; the file is then left as it is, or returns the old text anew in
    the current schema, or None to keep it), old + new written to a temporary file and renamed
    over the original. A missing or empty file starts with ``header`` (one line)."""
    path = write_target(path)   # through a symbolic link: the target gets the rows, the link stays
    if not lines:
        return
    _refuse_unwritable(path)
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            _remove_stale_temps(path)  # left by writers that died; we hold the lock, so no one else is writing
            old = path.read_bytes() if path.exists() else b""
            if old.strip():
                anew = check(path, _decode(path, old))
                if isinstance(anew, str):
                    old = anew.encode()
                if not old.endswith(b"\n"):
                    old += b"\n"
            else:
                old = header.rstrip("\n").encode() + b"\n"
            _replace_durably(path, old + (lines if lines.endswith("\n") else lines + "\n").encode())
    except RecordsError:
        raise
    except OSError as e:   # a full disk, an I/O error: say which file, and that it is whole
        raise write_failed(e, path, "it is left as it was (rows appended before are kept)" if existed
                           else "no file was made") from None


def preflight(path: str | os.PathLike[str]) -> None:
    """Refuse now, before anything is measured, a records file that an append would refuse later.

    A symbolic link is followed: its target is what an append writes. Checks that the target
    is not a folder; that its folder exists, or its nearest existing ancestor is a folder, and
    is writable (an append writes a temporary file beside the records and renames it); that
    an existing file and its folder are writable by their mode bits (:mod:`fusedkit.paths`:
    root bypasses permissions, and a rename ignores the file's own mode); and that the whole
    existing file parses, with the same checks as :func:`append_rows`. Creates and changes
    nothing. Raises RecordsError (RecordsNotWritable for permissions) with one line naming
    the path and the fault.
    """
    path = write_target(path)
    try:
        _preflight(path)
    except RecordsError:
        raise
    except OSError as e:  # a folder on the way that cannot be searched, an I/O error
        raise RecordsNotWritable(f"{path} cannot be checked ({e.strerror or e})") from None


def _preflight(path: Path) -> None:
    if path.is_dir():
        raise RecordsError(f"{path} is a folder; allowed: a records CSV file, existing or new")
    _refuse_unwritable(path)
    lock = path.with_name(path.name + ".lock")
    fault = file_fault(lock)   # a folder of that name: the first append would fail to open it
    if fault:
        raise RecordsNotWritable(f"{path}: its lock file {lock} {fault}; allowed: a lock file "
                                 f"an append can open (move {lock} aside), or another records path")
    if lock.exists() and not os.access(lock, os.R_OK | os.W_OK):
        raise RecordsNotWritable(f"{path}: its lock file {lock} is not writable; allowed: a lock "
                                 "this user may open, or another records path")
    if not path.exists():
        return
    if not path.is_file():
        raise RecordsError(f"{path} is not a regular file; allowed: a records CSV file")
    data = path.read_bytes()
    if data.strip():
        _parse(path, _decode(path, data))


def read_records(path: str | os.PathLike[str]) -> pd.DataFrame:
    """All rows of the records file, typed: one DataFrame row per CSV row, columns :data:`COLUMNS`.

    ``timestamp`` is a UTC datetime; times, rates, errors and memory are float64 (NaN when
    not measured); ``repeats`` is Int64; ``allclose`` is boolean with NA when not checked;
    the rest are strings ("" when empty). A missing or empty file gives an empty frame.
    Raises RecordsError naming the file and line of the first malformed row.
    """
    path = Path(path)
    text = _decode(path, path.read_bytes()) if path.exists() else ""
    rows = [r for _, r in _parse(path, text)] if text.strip() else []
    frame = pd.DataFrame(rows, columns=list(COLUMNS), dtype=str)
    for c in _FLOATS:
        frame[c] = pd.to_numeric(frame[c].replace("", np.nan), errors="raise").astype("float64")
    frame["repeats"] = pd.to_numeric(frame["repeats"].replace("", np.nan)).astype("Int64")
    frame["allclose"] = frame["allclose"].map({"true": True, "false": False, "": pd.NA}).astype("boolean")
    for c in ("timestamp", "timed_from", "timed_to"):   # one resolution, whatever pandas infers
        frame[c] = pd.to_datetime(frame[c].replace("", None), utc=True, format="ISO8601").astype(
            "datetime64[ns, UTC]")
    return frame


# --- values to text and back ---------------------------------------------------------------

def _to_text(column: str, value: object) -> str:
    """The CSV text of one value (None -> ""), or TypeError naming the column."""
    if value is None:
        return ""
    if column == "allclose":
        if isinstance(value, (bool, np.bool_)):
            return "true" if value else "false"
        if value == "":
            return ""
        raise TypeError(f"allclose={value!r}: expected True, False or None")
    if column == "sizes" and isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if column in _FLOATS or column in _INTS:
        if isinstance(value, (str, bytes, bool, np.bool_)):
            raise TypeError(f"{column}={value!r}: expected a number")
        try:
            number = float(value)  # type: ignore[arg-type]  # also numpy scalars, 1-element tensors
        except (TypeError, ValueError):
            raise TypeError(f"{column}={value!r}: expected a number") from None
        if column in _INTS:
            return str(int(number)) if number.is_integer() else repr(number)
        return repr(number)  # shortest text that reads back as the same float
    if not isinstance(value, str):
        raise TypeError(f"{column}={value!r}: expected a string")
    return value


def _check_row(row: Mapping[str, str]) -> str:
    """The first fault of a row of CSV texts, as one sentence, or "" if it is valid."""
    for c, v in row.items():
        if "\n" in v or "\r" in v:
            return f"{c}={v!r} contains a line break; one record must be one line"
    for c in _NON_EMPTY:
        if not row[c].strip():
            return f"{c} is empty; it is required"
    for c in ("timestamp", "timed_from", "timed_to"):
        fault = timestamp_fault(row[c], c) if row[c] or c == "timestamp" else ""
        if fault:
            return fault
    if not _SIZES_RE.fullmatch(row["sizes"]):
        return f"sizes={row['sizes']!r} is not of the form name=value,name=value"
    if row["tier"] not in TIERS:
        return f"tier={row['tier']!r} is not a tier; valid: {', '.join(map(repr, TIERS))}"
    if row["timer"] not in TIMERS:
        return f"timer={row['timer']!r} is not a timer; valid: {', '.join(TIMERS)}"
    if row["allclose"] not in ("true", "false", ""):
        return f"allclose={row['allclose']!r}: expected 'true', 'false' or ''"
    numbers: dict[str, float] = {}
    for c in _FLOATS + _INTS:
        if row[c] == "":
            continue
        low = 1 if c in _INTS else 0
        kind = "a whole number >= 1" if c in _INTS else ("a finite number > 0" if c in _TIMES
                                                          else "a finite number >= 0")
        try:
            x = float(row[c])
        except ValueError:
            return f"{c}={row[c]!r} is not a number; expected {kind}"
        bad_int = c in _INTS and not x.is_integer()
        if not math.isfinite(x) or x < low or (c in _TIMES and x <= 0) or bad_int:
            return f"{c}={row[c]!r}: expected {kind}"
        numbers[c] = x
    if row["median_ms"] == "":
        return "median_ms is empty; it is required"
    med, p10, p90 = (numbers.get(c) for c in _TIMES)
    if (p10 is not None and p10 > med) or (p90 is not None and p90 < med):
        return f"p10_ms={p10}, median_ms={med}, p90_ms={p90}: expected p10 <= median <= p90"
    return ""


def timestamp_fault(text: str, column: str = "timestamp") -> str:
    """"" when ``text`` is an ISO 8601 time with a UTC offset ("Z" allowed), else the fault."""
    try:
        # Python 3.10's fromisoformat does not take the "Z" suffix; spell it as an offset.
        stamp = datetime.fromisoformat(re.sub(r"Z$", "+00:00", text))
    except ValueError:
        stamp = None
    if stamp is None or stamp.utcoffset() is None:
        return f"{column}={text!r} is not an ISO 8601 time with a UTC offset"
    return ""


def _row_text(index: int, row: object) -> dict[str, str]:
    """A row for append_rows, checked: exactly the columns, as text, valid."""
    if not isinstance(row, Mapping):
        raise TypeError(f"rows[{index}] is a {type(row).__name__}; expected a dict from make_row")
    if set(row) != set(COLUMNS):
        missing = [c for c in COLUMNS if c not in row]
        extra = sorted(set(row) - set(COLUMNS))
        raise ValueError(f"rows[{index}]: missing {missing or 'none'}, unknown {extra or 'none'}; "
                         "build rows with make_row")
    # make_row's rows are text already; values are accepted too and checked the same way.
    text = {c: row[c] if isinstance(row[c], str) else _to_text(c, row[c]) for c in COLUMNS}
    fault = _check_row(text)
    if fault:
        raise ValueError(f"rows[{index}]: {fault}")
    return text


# --- the file -----------------------------------------------------------------------------

def csv_line(cells: object) -> str:
    """One CSV line, quoted where a cell holds a comma or a quote, ending in "\\n" (for every
    file of ``data/``)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return buf.getvalue()


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise RecordsError(f"{path}:{line}: not UTF-8 text ({e.reason})") from None


def _parse(path: Path, text: str) -> list[tuple[int, dict[str, str]]]:
    """Validate every line of a records file; return (line number, row) pairs."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[int, dict[str, str]]] = []
    seen: dict[tuple[str, ...], int] = {}
    try:
        header = next(reader)
        _check_header(path, header)
        columns = tuple(header)
        for cells in reader:
            line = reader.line_num
            if not cells:
                continue  # a blank line holds no record
            if len(cells) != len(columns):
                raise RecordsError(f"{path}:{line}: wrong field count: {len(cells)} fields, "
                                   f"expected {len(columns)} ({', '.join(columns)})")
            row = dict.fromkeys(COLUMNS, "") | dict(zip(columns, cells))
            fault = _check_row(row)
            if fault:
                raise RecordsError(f"{path}:{line}: {fault}")
            key = tuple(row[c] for c in _KEY)
            if key in seen:
                raise RecordsError(f"{path}:{line}: {dict(zip(_KEY, key))} repeats line {seen[key]}")
            seen[key] = line
            rows.append((line, row))
    except csv.Error as e:
        raise RecordsError(f"{path}:{reader.line_num}: unreadable CSV ({e})") from None
    return rows


def _check_header(path: Path, header: list[str]) -> None:
    if tuple(header) == COLUMNS or tuple(header) in PREVIOUS_SCHEMAS:
        return
    missing = [c for c in COLUMNS if c not in header]
    extra = [c for c in header if c not in COLUMNS]
    what = (f"missing {missing or 'none'}, unexpected {extra or 'none'}" if missing or extra
            else f"same columns in another order: {', '.join(header)}")
    raise RecordsError(f"{path}:1: header is not the current schema ({what}). The file is "
                       "left as it is: move it aside or convert it (see data/README.md)")


def _refuse_unwritable(path: Path) -> None:
    """Refuse a records file, or a folder for it, that is marked read-only, although root could
    write it and the rename of an append would replace the file whatever its own mode: a file
    or folder someone made read-only (chmod a-w) is one they want kept as it is."""
    fault = folder_fault(path.parent)
    if fault:
        raise RecordsNotWritable(f"{path}: {fault}, and an append writes a temporary file there; "
                                 "allowed: a path in a writable folder, existing or created")
    fault = file_fault(path)   # the append's rename would replace a device, a FIFO, a looping link
    if fault:
        raise RecordsNotWritable(f"{path} {fault}, and is left as it is; allowed: a records CSV "
                                 "file, existing or new")
    if path.exists() and read_only(path):
        raise RecordsNotWritable(f"{path} is read-only (mode {mode_text(path)}) and is left as "
                                 "it is; allowed: a writable records file (chmod u+w) or another path")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<path>.lock`` (released by the OS if the process dies)."""
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def _remove_stale_temps(path: Path) -> None:
    for stale in path.parent.glob(_temp_prefix(path) + "*.tmp"):
        stale.unlink(missing_ok=True)


def _write_temp(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` and force it to disk."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def _replace_durably(path: Path, data: bytes) -> None:
    """Make ``data`` the content of ``path`` in one atomic step that survives a crash."""
    tmp = path.with_name(f"{_temp_prefix(path)}{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
    try:
        try:
            if path.exists():
                os.fchmod(fd, stat.S_IMODE(path.stat().st_mode))
            _write_temp(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)  # readers see the old file or the new one, never a mix
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    # Make the rename itself durable: sync the folder's entry list.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# --- context helpers ----------------------------------------------------------------------

def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _run(*args: str) -> str | None:
    """stdout of a short command, or None if it is missing or fails."""
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=15, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def current_commit() -> str:
    """The commit a record made now would name (``$FUSEDKIT_COMMIT`` first, see _git_commit):
    for diagnostics that print their commit beside recorded runs."""
    return _git_commit(_repo_root())


def _git_commit(root: Path) -> str:
    """``$FUSEDKIT_COMMIT`` when set; else the short hash of HEAD, "+dirty" if tracked or
    untracked files differ; outside git, "unknown".

    The variable wins because a copied working tree (a lent GPU machine) can carry a stale
    ``.git``: there, git named the session's first commit, not the one that ran (2026-11-29).
    Changes under ``data/`` do not count: appending a record must not make the next run dirty.
    """
    told = os.environ.get("FUSEDKIT_COMMIT", "").strip()
    if told:
        return told
    commit = _run("git", "-C", str(root), "rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown"
    status = _run("git", "-C", str(root), "status", "--porcelain", "--", ".", ":(exclude)data")
    # A status that cannot be read is not proof of a clean tree.
    return commit + "+dirty" if status is None or status else commit


def _nvidia_driver() -> str:
    """The NVIDIA driver version ("550.54.15"), from nvidia-smi or the kernel module, or ""."""
    out = _run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
    if out:
        return out.splitlines()[0].strip()
    with contextlib.suppress(OSError):
        text = Path("/proc/driver/nvidia/version").read_text()
        found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
        if found:
            return found.group(1)
    return ""


def import_records(src: str | os.PathLike[str], dst: str | os.PathLike[str] | None = None) -> int:
    """Append every row of another records file (say, one fetched from a GPU machine) to ``dst``.

    Rows keep their own run context; both files are validated. Rows already in ``dst``
    verbatim are skipped (so importing twice, or importing a copy that began as ``dst``,
    adds nothing twice); a different row under a recorded key is refused (ValueError).
    Returns the number of rows imported.
    """
    src = Path(src)
    if not src.is_file():
        raise FileNotFoundError(f"src={str(src)!r} is not a file")
    dst = Path(dst) if dst is not None else default_path()
    rows = [r for _, r in _parse(src, _decode(src, src.read_bytes()))]
    have = ({tuple(r[c] for c in COLUMNS) for _, r in _parse(dst, _decode(dst, dst.read_bytes()))}
            if dst.exists() and dst.read_bytes().strip() else set())
    # Rows already there verbatim (src began as a copy of dst) are skipped; a different row
    # under a recorded key is still refused by append_rows.
    new = [r for r in rows if tuple(r[c] for c in COLUMNS) not in have]
    append_rows(dst, new)
    return len(new)
