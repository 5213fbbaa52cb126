"""The GPU's SM clock, power and temperature while a run measures: ``nvidia-smi`` read every
50 ms beside the run, the readings kept in ``data/clocks.csv`` under the run's ``run_id``
(schema in ``data/README.md``; appends are locked and atomic, as ``records.csv``'s).

A datasheet's tensor rate holds at one clock (1.83 GHz on the H200, see
:meth:`fusedkit.hardware.GpuSpec.implied_clock_ghz`); the GPU boosts above it when cool and
drops below it when its power cap bites under a long tensor-core load. These readings say
which happened during a run. Nothing here changes a clock or a power setting: nvidia-smi is
only asked to report (``--query-gpu``).

``python -m fusedkit.clocks import FILE`` brings readings home: a ``clocks.csv`` written on a
GPU machine (rows already here are skipped), or a raw ``nvidia-smi --format=csv`` log, which
is given the run whose start lies inside its time span (or ``--run-id``).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from fusedkit import records

COLUMNS: tuple[str, ...] = ("run_id", "timestamp", "sm_mhz", "max_sm_mhz", "mem_mhz", "power_w",
                            "power_limit_w", "temperature_c", "util_pct", "event_reasons")
"""Column names of ``clocks.csv``, in file order."""
NUMBERS: tuple[str, ...] = COLUMNS[2:9]
BUSY_UTIL_PCT = 50.0
"""A reading is *busy* when nvidia-smi saw a kernel running at least this share of its sample
period (``utilization.gpu``); where that was not read, when the GPU was not flagged idle."""

# nvidia-smi --query-gpu field (driver 580 spelling) -> our column; older names beside.
QUERY: dict[str, str] = {"timestamp": "timestamp", "clocks.sm": "sm_mhz",
                         "clocks.max.sm": "max_sm_mhz", "clocks.mem": "mem_mhz",
                         "power.draw": "power_w", "power.limit": "power_limit_w",
                         "temperature.gpu": "temperature_c", "utilization.gpu": "util_pct",
                         "clocks_event_reasons.active": "event_reasons"}
ALIASES: dict[str, str] = {"clocks.current.sm": "clocks.sm", "clocks.current.memory": "clocks.mem",
                           "clocks.max.sm": "clocks.max.sm", "clocks.max.graphics": "clocks.max.sm",
                           "clocks_throttle_reasons.active": "clocks_event_reasons.active",
                           "enforced.power.limit": "power.limit"}

# Bits of clocks_event_reasons.active (NVML's nvmlClocksEventReason*).
IDLE = 0x1
CAPS: dict[int, str] = {0x4: "software power cap", 0x8: "hardware slowdown",
                        0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
                        0x80: "hardware power brake"}
"""The reasons that hold the clock below what the load asks for: a power or thermal cap."""

_STAMP = re.compile(r"\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?")
_HEX = re.compile(r"0x[0-9A-Fa-f]+")


def default_path() -> Path:
    """``clocks.csv`` beside the records file (``data/clocks.csv``)."""
    return path_for(records.default_path())


def path_for(records_path: str | Path) -> Path:
    """The clocks file beside a records file: a run's readings go where its rows go."""
    return Path(records_path).parent / "clocks.csv"


def parse_smi(text: str, columns: list[str], *, local_time: bool = False,
              tz: timezone = timezone.utc) -> pd.DataFrame:
    """Readings from nvidia-smi's CSV lines, a column of :data:`COLUMNS` per field in ``columns``: units
    dropped, "[N/A]" empty, local times (this machine's zone, or ``tz``) as UTC, a cut line dropped."""
    zone = datetime.now().astimezone().tzinfo if local_time else tz
    rows = []
    for cells in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in cells]
        if len(cells) != len(columns) or not _STAMP.fullmatch(cells[columns.index("timestamp")]):
            continue
        row = dict.fromkeys(COLUMNS[1:], "")
        for name, cell in zip(columns, cells):
            if name == "timestamp":
                stamp = datetime.strptime(cell, "%Y/%m/%d %H:%M:%S.%f" if "." in cell
                                          else "%Y/%m/%d %H:%M:%S").replace(tzinfo=zone)
                row[name] = _iso(stamp)
            elif name == "event_reasons":
                row[name] = cell if _HEX.fullmatch(cell) else ""
            elif name:
                number = re.match(r"[-+]?\d+(\.\d+)?", cell)
                row[name] = repr(float(number.group())) if number else ""
        rows.append(row)
    return readings_frame(rows)


def _iso(stamp: datetime) -> str:
    utc = stamp.astimezone(timezone.utc)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def empty_readings() -> pd.DataFrame:
    return readings_frame([])


def readings_frame(rows: list[dict[str, str]]) -> pd.DataFrame:
    """Text rows (columns of :data:`COLUMNS`, with or without ``run_id``) as a typed frame:
    ``timestamp`` a UTC datetime, the numbers float64 (NaN when not read), the rest text."""
    cols = list(COLUMNS) if rows and "run_id" in rows[0] else list(COLUMNS[1:])
    df = pd.DataFrame(rows, columns=cols, dtype=str)
    for c in NUMBERS:
        df[c] = pd.to_numeric(df[c].replace("", np.nan)).astype("float64")
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, format="ISO8601").astype(
        "datetime64[ns, UTC]")
    return df


# --- the file ----------------------------------------------------------------------------

def _text_rows(run_id: str, readings: pd.DataFrame) -> list[dict[str, str]]:
    return [{"run_id": run_id, "timestamp": _iso(r.timestamp.to_pydatetime()),
             **{c: "" if pd.isna(getattr(r, c)) else repr(float(getattr(r, c))) for c in NUMBERS},
             "event_reasons": "" if pd.isna(r.event_reasons) else str(r.event_reasons)}
            for r in readings.itertuples(index=False)]


def _check_row(row: dict[str, str]) -> str:
    """The first fault of one row of text, as a sentence; "" when it is valid."""
    if not row["run_id"].strip():
        return "run_id is empty; it is required"
    faults = [records.timestamp_fault(row["timestamp"]), *(records.number_fault(c, row[c]) for c in NUMBERS)]
    if row["event_reasons"] and not _HEX.fullmatch(row["event_reasons"]):
        faults.append(f"event_reasons={row['event_reasons']!r} is not a hex bit mask such as 0x4")
    return next((f for f in faults if f), "")


def _parse_file(path: Path, text: str) -> list[dict[str, str]]:
    return [row for _, row in records.parse_table(path, text, "clocks", [COLUMNS], _check_row)]


def _append(path: Path, rows: list[dict[str, str]]) -> None:
    records.append_lines(path, records.csv_line(list(COLUMNS)),
                         "".join(records.csv_line([r[c] for c in COLUMNS]) for r in rows), _parse_file)


def record(run_id: str, readings: pd.DataFrame, path: str | Path | None = None) -> int:
    """Append ``readings`` under ``run_id`` to the clocks file (locked, atomic; a malformed file is
    refused, never rewritten); the number of rows appended."""
    rows = _text_rows(run_id, readings)
    for i, row in enumerate(rows):
        fault = _check_row(row)
        if fault:
            raise ValueError(f"readings[{i}]: {fault}")
    _append(Path(path or default_path()), rows)
    return len(rows)


def read_clocks(path: str | Path | None = None) -> pd.DataFrame:
    """Every recorded reading, typed (see :func:`readings_frame`); empty when there is none.
    Raises :class:`fusedkit.records.RecordsError` naming the file and line of a malformed row."""
    rows = [r for _, r in records.read_table(path or default_path(), "clocks", [COLUMNS], _check_row)]
    return readings_frame(rows or [dict.fromkeys(COLUMNS, "")]).iloc[0:len(rows)]


# --- what a run's readings say, in one line (the sampler's) ------------------------------------

def _bits(reasons: pd.Series) -> pd.Series:
    return reasons.fillna("").map(lambda h: int(h, 16) if h else 0)


def busy_readings(readings: pd.DataFrame) -> pd.DataFrame:
    """The readings taken while kernels ran (see :data:`BUSY_UTIL_PCT`)."""
    util = readings["util_pct"]
    not_idle = (_bits(readings["event_reasons"]) & IDLE) == 0
    return readings[(util >= BUSY_UTIL_PCT) | (util.isna() & not_idle)]


def capped(readings: pd.DataFrame) -> pd.Series:
    """True for each reading where a power or thermal cap (:data:`CAPS`) held the clock."""
    return (_bits(readings["event_reasons"]) & sum(CAPS)) != 0


def summary_line(readings: pd.DataFrame) -> str:
    """One run's readings in one line: "SM clock median 1755 MHz (1350 to 1980) over 812 busy
    readings, ..."; the clock, cap and power figures over the busy readings (:func:`busy_readings`)."""
    if readings.empty:
        return "no readings"
    busy = busy_readings(readings)
    bits, sm = _bits(busy["event_reasons"]), busy["sm_mhz"]
    seen = [name for bit, name in CAPS.items() if (bits & bit).any()]
    cap = (f"a power or thermal cap active in {100 * capped(busy).mean():.0f}% of them"
           + (f" ({', '.join(seen)})" if seen else ""))
    limit, top = readings["power_limit_w"].median(), readings["max_sm_mhz"].median()
    return (f"SM clock median {sm.median():.0f} MHz ({sm.min():.0f} to {sm.max():.0f}"
            + (f", highest allowed {top:.0f} MHz" if math.isfinite(top) else "")
            + f") over {len(busy)} busy readings, {cap}; median power {busy['power_w'].median():.0f} W"
            + (f" of a {limit:.0f} W limit" if math.isfinite(limit) else ""))


# --- the clock over a timed loop --------------------------------------------------------------

@dataclass(frozen=True)
class Window:
    """The readings over one measurement's timed calls: how many, the median SM clock (MHz), and
    the share with a power or thermal cap active (:data:`CAPS`)."""

    readings: int
    sm_median_mhz: float
    capped_share: float


def over_window(row: pd.Series | dict, clocks: pd.DataFrame | None = None) -> Window | None:
    """The readings of ``row``'s run between its ``timed_from`` and ``timed_to``; None where it has no
    window or no reading falls in it: never another run's readings, nor the whole run's."""
    start, end = row.get("timed_from"), row.get("timed_to")
    if start is None or end is None or pd.isna(start) or pd.isna(end):
        return None
    clocks = read_clocks() if clocks is None else clocks
    inside = clocks[(clocks["run_id"] == row["run_id"]) & (clocks["timestamp"] >= start)
                    & (clocks["timestamp"] <= end)]
    if inside.empty:
        return None
    return Window(len(inside), float(inside["sm_mhz"].median()), float(capped(inside).mean()))


# --- bringing readings home ----------------------------------------------------------------

def parse_smi_log(text: str, *, tz: timezone = timezone.utc) -> pd.DataFrame:
    """Readings of a raw ``nvidia-smi --format=csv`` log (a header naming the fields, units allowed,
    matched by name), written in the zone ``tz``; ValueError when the header names no timestamp."""
    lines = text.splitlines()
    if not lines:
        raise ValueError("the nvidia-smi log is empty")
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in next(csv.reader([lines[0]]))]
    names = [QUERY.get(ALIASES.get(h, h), "") for h in header]
    if "timestamp" not in names:
        raise ValueError(f"the first line {lines[0]!r} is not an nvidia-smi CSV header with a "
                         "timestamp field")
    return parse_smi("\n".join(lines[1:]), names, tz=tz)


def match_run(readings: pd.DataFrame, runs: pd.DataFrame) -> str:
    """The one GPU run (of a records frame) that started inside the readings' time span: the
    honest owner of a log recorded beside it. ValueError naming the candidates otherwise."""
    if readings.empty:
        raise ValueError("no readings: nothing to match to a run")
    lo, hi = readings["timestamp"].min(), readings["timestamp"].max()
    starts = (runs[~runs["device"].str.startswith("cpu")].groupby("run_id")["timestamp"].min())
    inside = starts[(starts >= lo) & (starts <= hi)]
    if len(inside) != 1:
        found = ", ".join(inside.index) or "none"
        raise ValueError(f"readings from {lo:%Y-%m-%d %H:%M:%S} to {hi:%H:%M:%S} UTC: {len(inside)} "
                         f"recorded runs started inside ({found}); expected exactly one "
                         "(pass --run-id to name it)")
    return str(inside.index[0])


def import_file(src: str | Path, dst: str | Path | None = None, *, run_id: str | None = None,
                records_path: str | Path | None = None, tz: timezone = timezone.utc) -> tuple[str, int]:
    """Bring readings home into ``dst``: a clocks file (rows already there skipped) or a raw
    nvidia-smi log, whose run is ``run_id`` or :func:`match_run`'s; (what, in words; rows added)."""
    src, dst = Path(src), Path(dst) if dst is not None else default_path()
    if not src.is_file():
        raise FileNotFoundError(f"src={str(src)!r} is not a file")
    text = src.read_text(encoding="utf-8")
    if text.startswith(",".join(COLUMNS)):
        rows = _parse_file(src, text)
        have = {tuple(r.values()) for _, r in records.read_table(dst, "clocks", [COLUMNS], _check_row)}
        new = [r for r in rows if tuple(r.values()) not in have]
        _append(dst, new)
        return f"{len({r['run_id'] for r in new})} run(s) from {src}", len(new)
    readings = parse_smi_log(text, tz=tz)
    if run_id is None:
        run_id = match_run(readings, records.read_records(records_path or records.default_path()))
    if run_id in set(read_clocks(dst)["run_id"]):
        return f"run {run_id} (already in {dst})", 0
    return f"run {run_id}", record(run_id, readings, dst)


def main(argv: list[str] | None = None) -> int:
    """``python -m fusedkit.clocks import FILE [--run-id ID]``; a fault is one ``error:`` line, exit 2."""
    p = argparse.ArgumentParser(prog="python -m fusedkit.clocks", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    i = sub.add_parser("import", help="bring a clocks.csv or a raw nvidia-smi log into data/clocks.csv")
    i.add_argument("file")
    i.add_argument("--run-id", help="the run a raw nvidia-smi log belongs to (default: matched by time)")
    i.add_argument("--records", help="records file to match runs in (default: data/records.csv)")
    sub.add_parser("summary", help="one line per recorded run")
    args = p.parse_args(argv)
    try:
        if args.command == "import":
            what, n = import_file(args.file, run_id=args.run_id, records_path=args.records)
            print(f"{n} readings of {what} added to {default_path()}")
        else:
            for run_id, group in read_clocks().groupby("run_id", sort=True):
                print(f"{run_id}: {summary_line(group)}")
    except (ValueError, OSError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
