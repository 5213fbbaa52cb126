"""The ``data/`` records: one CSV row per (run, variant) with its timing, accuracy and origin.

Appends lock, validate and replace the whole file; :func:`parse_table` reads every file of
``data/``, naming the file and line of a fault. The schema is in ``data/README.md``.
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
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from fusedkit import paths
from fusedkit.mode import detect_mode
from fusedkit.precision import TIERS as PRECISION_TIERS

COLUMNS: tuple[str, ...] = (
    "run_id", "timestamp", "commit", "device", "driver", "cuda", "torch", "triton",
    "problem", "sizes", "variant", "tier", "timer",
    "median_ms", "p10_ms", "p90_ms", "repeats", "tflops", "gbps", "pct_of_floor",
    "max_abs_error", "rel_error", "allclose", "peak_mem_mb", "build_s", "seconds",
    "timed_from", "timed_to", "notes",
)

PREVIOUS_SCHEMAS: tuple[tuple[str, ...], ...] = (   # read, rewritten in COLUMNS by an append
    tuple(c for c in COLUMNS if c not in ("timed_from", "timed_to")),                 # 2026-12-05
    tuple(c for c in COLUMNS if c not in ("timed_from", "timed_to", "build_s", "seconds")),   # -04
)
CONTEXT_COLUMNS: tuple[str, ...] = COLUMNS[:8]   # from RunContext: the same for every row of a run

REQUIRED: tuple[str, ...] = ("problem", "sizes", "variant", "timer", "median_ms")
TIERS: tuple[str, ...] = (*PRECISION_TIERS, "")   # "": not judged (see data/README.md)
TIMERS: tuple[str, ...] = ("cuda-events", "cpu-wall")
_TIMES = ("median_ms", "p10_ms", "p90_ms")
_FLOATS = _TIMES + ("tflops", "gbps", "pct_of_floor", "max_abs_error", "rel_error", "peak_mem_mb",
                    "build_s", "seconds")
_NON_EMPTY = ("run_id", "timestamp", "commit", "device", "torch", "problem", "sizes", "variant")
_KEY = ("run_id", "problem", "sizes", "variant")   # a run may time one variant at several sizes
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_SIZES_RE = re.compile(rf"{_NAME}=[^,=\s]+(,{_NAME}=[^,=\s]+)*")


class RecordsError(ValueError):
    """A data file is malformed; the message names the file, the line and the fault."""


@dataclass
class RunContext:
    """Where and when one run was measured: the first eight columns of each of its rows."""

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
        """This process's clock, commit (of ``repo_root``, default fusedkit's), device and versions."""
        now = datetime.now(timezone.utc).replace(microsecond=0)
        mode = detect_mode()  # device "NVIDIA H200" or "cpu: <processor>", Triton version
        return cls(run_id=f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}",
                   timestamp=f"{now:%Y-%m-%dT%H:%M:%SZ}",
                   commit=_git_commit(Path(repo_root) if repo_root is not None else _REPO),
                   device=mode.device, driver=_nvidia_driver() if mode.gpu else "",
                   cuda=torch.version.cuda or "", torch=torch.__version__, triton=mode.triton)


_REPO = Path(__file__).resolve().parent.parent


def default_path() -> Path:
    """The records file: ``$FUSEDKIT_RECORDS`` if set, else ``<repo>/data/records.csv``."""
    override = os.environ.get("FUSEDKIT_RECORDS", "").strip()
    return Path(override).expanduser() if override else _REPO / "data" / "records.csv"


def path_for(device: torch.device, path: str | os.PathLike[str] | None = None) -> Path:
    """``path`` or ``$FUSEDKIT_RECORDS``, else the history on a GPU, ``data/local/`` on a CPU."""
    if path or device.type == "cuda" or os.environ.get("FUSEDKIT_RECORDS", "").strip():
        return Path(path) if path else default_path()
    return default_path().parent / "local" / "records.csv"


def make_row(ctx: RunContext, **fields: object) -> dict[str, str]:
    """One validated row, as CSV texts: the run's context plus ``fields`` (the other columns,
    :data:`REQUIRED` given, the rest "" for not measured); ValueError or TypeError naming it."""
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
    if fault := _check_row(row):
        raise ValueError(f"make_row: {fault}")
    return row


def append_rows(path: str | os.PathLike[str], rows: list[dict]) -> None:
    """Append ``rows`` (from :func:`make_row`) to the records file at ``path``, durably."""
    texts = []
    for i, row in enumerate(rows):   # exactly the columns, as text, valid
        if not isinstance(row, Mapping):
            raise TypeError(f"rows[{i}] is a {type(row).__name__}; expected a dict from make_row")
        if set(row) != set(COLUMNS):
            missing, extra = [c for c in COLUMNS if c not in row], sorted(set(row) - set(COLUMNS))
            raise ValueError(f"rows[{i}]: missing {missing or 'none'}, unknown {extra or 'none'}; "
                             "build rows with make_row")
        texts.append({c: row[c] if isinstance(row[c], str) else _to_text(c, row[c]) for c in COLUMNS})
        if fault := _check_row(texts[-1]):
            raise ValueError(f"rows[{i}]: {fault}")
    _refuse_repeats(Path(path), [], texts)   # within this call, whatever the file holds

    def check(p: Path, text: str) -> str | None:
        recorded = _parse(p, text)
        _refuse_repeats(p, recorded, texts)
        if text.startswith(csv_line(COLUMNS)):
            return None
        # A previous schema: the whole file again in the current one, values unchanged.
        return csv_line(COLUMNS) + "".join(csv_line(r[c] for c in COLUMNS) for _, r in recorded)

    append_lines(path, csv_line(COLUMNS), "".join(csv_line(r[c] for c in COLUMNS) for r in texts),
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
                 check: Callable[[Path, str], str | None]) -> None:
    """Append CSV ``lines`` to a file of ``data/`` under a lock; ``check(path, old text)`` raises, or
    returns the text anew (a previous schema), or None; a new file starts with ``header``."""
    if not lines:
        return
    path = paths.check(path, "a CSV file of data/, existing or new")   # a link: its target
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)   # released by closing, or by the OS if the process dies
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            stale.unlink(missing_ok=True)   # left by a writer that died; we hold the lock
        old = _text(path)
        anew = check(path, old) if old.strip() else header
        old = anew if isinstance(anew, str) else old
        paths.replace(path, old + lines)
    finally:
        os.close(lock)


def preflight(path: str | os.PathLike[str]) -> None:
    """Refuse now, in one line and before anything is measured, what an append would refuse."""
    path = paths.check(path, "a records CSV file, existing or new")
    lock = path.with_name(path.name + ".lock")
    if lock.exists():
        paths.check(lock, f"a lock file an append can open (move {lock.name} aside), or "
                          "another records path")
    _parse(path, _text(path))


def read_records(path: str | os.PathLike[str]) -> pd.DataFrame:
    """All rows of the records file, typed (dtypes in data/README.md); empty for a missing file."""
    path = Path(path)
    frame = pd.DataFrame([r for _, r in _parse(path, _text(path))], columns=list(COLUMNS), dtype=str)
    for c in _FLOATS:
        frame[c] = pd.to_numeric(frame[c].replace("", np.nan)).astype("float64")
    frame["repeats"] = pd.to_numeric(frame["repeats"].replace("", np.nan)).astype("Int64")
    frame["allclose"] = frame["allclose"].map({"true": True, "false": False, "": pd.NA}).astype("boolean")
    for c in ("timestamp", "timed_from", "timed_to"):   # one resolution, whatever pandas infers
        frame[c] = pd.to_datetime(frame[c].replace("", None), utc=True, format="ISO8601").astype(
            "datetime64[ns, UTC]")
    return frame


def import_records(src: str | os.PathLike[str], dst: str | os.PathLike[str] | None = None) -> int:
    """Append the rows of another records file (a GPU machine's) that ``dst`` lacks; how many."""
    src, dst = Path(src), Path(dst) if dst is not None else default_path()
    if not src.is_file():
        raise FileNotFoundError(f"src={str(src)!r} is not a file")
    have = {tuple(r.values()) for _, r in _parse(dst, _text(dst))}
    new = [r for _, r in _parse(src, _text(src)) if tuple(r.values()) not in have]
    append_rows(dst, new)
    return len(new)


def _short(text: str, limit: int = 40) -> str:
    """``repr(text)``, cut to about ``limit`` characters: a garbage file is not echoed whole."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def _text(path: Path) -> str:
    """The file's text ("" when it is missing), or RecordsError naming the line that is not UTF-8."""
    data = path.read_bytes() if path.exists() else b""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise RecordsError(f"{path}:{line}: not UTF-8 text ({e.reason})") from None


def read_table(path: str | os.PathLike[str], what: str, schemas: Sequence[Sequence[str]],
               row_fault: Callable[[dict[str, str]], str]) -> list[tuple[int, dict[str, str]]]:
    """:func:`parse_table` of the file at ``path`` ([] when it is missing or empty)."""
    return parse_table(Path(path), _text(Path(path)), what, schemas, row_fault)


def parse_table(path: Path, text: str, what: str, schemas: Sequence[Sequence[str]],
                row_fault: Callable[[dict[str, str]], str]) -> list[tuple[int, dict[str, str]]]:
    """(line number, row keyed by ``schemas[0]``) of each row of ``text``, a ``what`` file of ``data/``
    from ``path`` (a header of ``schemas``, no ``row_fault(row)``); else RecordsError, one line."""
    if not text.strip():
        return []
    if not text.endswith("\n"):
        raise RecordsError(f"{path}:{text.count(chr(10)) + 1}: the last line has no final newline, "
                           "so its row may be cut short (a torn write); allowed: whole lines, each "
                           "ending in a newline (remove or complete that line)")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        header = next(reader)
        if header not in [list(s) for s in schemas]:
            want = schemas[0]
            i = next(i for i, (a, b) in enumerate(zip([*header, ""], [*want, ""])) if a != b)
            got = _short(header[i]) if i < len(header) else "missing"
            raise RecordsError(f"{path}:1: not a {what} file: column {i + 1} is {got}, "
                               f"expected {want[i] if i < len(want) else 'no more'!r}; the file is "
                               "left as it is (see data/README.md)")
        for cells in reader:
            if not cells:
                continue  # a blank line holds no row
            if len(cells) != len(header):
                raise RecordsError(f"{path}:{reader.line_num}: wrong field count: {len(cells)} "
                                   f"fields, expected {len(header)}")
            row = dict.fromkeys(schemas[0], "") | dict(zip(header, cells))
            if fault := row_fault(row):
                raise RecordsError(f"{path}:{reader.line_num}: {fault}")
            rows.append((reader.line_num, row))
    except csv.Error as e:
        raise RecordsError(f"{path}:{reader.line_num}: unreadable CSV ({e})") from None
    return rows


def _parse(path: Path, text: str) -> list[tuple[int, dict[str, str]]]:
    """The rows of a records file, validated, none repeating another's key."""
    rows = parse_table(path, text, "records", (COLUMNS, *PREVIOUS_SCHEMAS), _check_row)
    seen: dict[tuple[str, ...], int] = {}
    for line, row in rows:
        key = tuple(row[c] for c in _KEY)
        if key in seen:
            raise RecordsError(f"{path}:{line}: {dict(zip(_KEY, key))} repeats line {seen[key]}")
        seen[key] = line
    return rows


def csv_line(cells: object) -> str:
    """One CSV line ending in "\\n", quoted where a cell holds a comma or a quote."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return buf.getvalue()


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
    if column in _FLOATS or column == "repeats":
        try:
            if isinstance(value, (str, bytes, bool, np.bool_)):
                raise TypeError
            number = float(value)  # type: ignore[arg-type]  # also numpy scalars, 1-element tensors
        except (TypeError, ValueError):
            raise TypeError(f"{column}={value!r}: expected a number") from None
        if column == "repeats" and number.is_integer():
            return str(int(number))
        return repr(number)  # the shortest text that reads back as the same float
    if not isinstance(value, str):
        raise TypeError(f"{column}={value!r}: expected a string")
    return value


def number_fault(column: str, text: str, low: float = 0.0, *, above: bool = False) -> str:
    """"" when ``text`` is empty or a finite number >= ``low`` (> when ``above``), else the fault."""
    kind = f"a finite number {'>' if above else '>='} {low:g}"
    try:
        x = float(text) if text else low + 1
    except ValueError:
        return f"{column}={_short(text)} is not a number; expected {kind}"
    return "" if math.isfinite(x) and (x > low if above else x >= low) else f"{column}={text!r}: expected {kind}"


def _check_row(row: Mapping[str, str]) -> str:
    """The first fault of a row of CSV texts, as one sentence, or "" if it is valid."""
    for c, v in row.items():
        if "\n" in v or "\r" in v:
            return f"{c}={_short(v)} contains a line break; one record must be one line"
    for c in _NON_EMPTY:
        if not row[c].strip():
            return f"{c} is empty; it is required"
    for c in ("timestamp", "timed_from", "timed_to"):
        if (row[c] or c == "timestamp") and (fault := timestamp_fault(row[c], c)):
            return fault
    if not _SIZES_RE.fullmatch(row["sizes"]):
        return f"sizes={_short(row['sizes'])} is not of the form name=value,name=value"
    for c, allowed in (("tier", TIERS), ("timer", TIMERS), ("allclose", ("true", "false", ""))):
        if row[c] not in allowed:
            return f"{c}={_short(row[c])}: expected one of {', '.join(map(repr, allowed))}"
    if row["median_ms"] == "":
        return "median_ms is empty; it is required"
    for c in _FLOATS:
        if fault := number_fault(c, row[c], above=c in _TIMES):
            return fault
    if row["repeats"] and (number_fault("repeats", row["repeats"], 1) or not float(row["repeats"]).is_integer()):
        return f"repeats={_short(row['repeats'])}: expected a whole number >= 1"
    med, p10, p90 = (float(row[c]) if row[c] else None for c in _TIMES)
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
        return f"{column}={_short(text)} is not an ISO 8601 time with a UTC offset"
    return ""


def _run(*args: str) -> str | None:
    """stdout of a short command, or None if it is missing or fails."""
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=15, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def current_commit() -> str:
    """The commit a record made now would name (``$FUSEDKIT_COMMIT`` first, see _git_commit)."""
    return _git_commit(_REPO)


def _git_commit(root: Path) -> str:
    """``$FUSEDKIT_COMMIT`` (a copied tree can carry a stale ``.git``), else HEAD's, "+dirty"."""
    told = os.environ.get("FUSEDKIT_COMMIT", "").strip()
    if re.search(r"[\x00-\x1f\x7f]", told):
        raise ValueError(f"FUSEDKIT_COMMIT={_short(told)} holds a line break, tab or other control "
                         "character; allowed: a commit name on one line, e.g. 1a2b3c4, or unset")
    if told:
        return told
    commit = _run("git", "-C", str(root), "rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown"
    status = _run("git", "-C", str(root), "status", "--porcelain", "--", ".", ":(exclude)data")
    return commit + "+dirty" if status is None or status else commit   # unread is not clean


def _nvidia_driver() -> str:
    """The NVIDIA driver version ("550.54.15"), from nvidia-smi or the kernel module, or ""."""
    out = _run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
    if out:
        return out.splitlines()[0].strip()
    with contextlib.suppress(OSError):
        found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)",
                          Path("/proc/driver/nvidia/version").read_text())
        if found:
            return found.group(1)
    return ""
