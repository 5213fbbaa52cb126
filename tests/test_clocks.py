"""The clocks file (round trip, refusals), nvidia-smi's output parsed (the committed log
included), the sampler around a fake nvidia-smi, and the clock figure."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fusedkit import clocks, records  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "data"
LOG = DATA / "logs" / "smi_p45_bench_h200_96996dc.csv"
LOG_RUN = "20261130T170105Z-718309"
FIELDS = [clocks.QUERY[f] for f in clocks.QUERY]   # nounits lines in QUERY's order


def readings(n: int = 4, capped_every: int = 2) -> pd.DataFrame:
    lines = [f"2026/12/02 10:00:0{i}.{50 * i:03d}, {1980 - 100 * i}, 1980, 2619, {400.5 + i}, 700.00, "
             f"{40 + i}, 100, {'0x0000000000000004' if i % capped_every == 0 else '0x0000000000000000'}"
             for i in range(n)]
    return clocks.parse_smi("\n".join(lines), FIELDS)


def test_parse_nounits_lines_drops_a_cut_line_and_reads_na():
    text = ("2026/12/02 10:00:00.000, 1755, 1980, 2619, 650.25, 700.00, 61, 100, 0x0000000000000004\n"
            "2026/12/02 10:00:00.050, 1980, 1980, 2619, [N/A], 700.00, 61, 0, 0x0000000000000001\n"
            "2026/12/02 10:00:00.100, 19")
    df = clocks.parse_smi(text, FIELDS)
    assert len(df) == 2 and df["sm_mhz"].tolist() == [1755.0, 1980.0]
    assert math.isnan(df["power_w"].iloc[1]) and df["power_limit_w"].iloc[0] == 700.0
    assert str(df["timestamp"].iloc[1]) == "2026-12-02 10:00:00.050000+00:00"


def test_round_trip_through_the_file(tmp_path):
    path = tmp_path / "clocks.csv"
    r = readings()
    assert clocks.record("20261202T100000Z-aaaaaa", r, path) == 4
    clocks.record("20261202T100500Z-bbbbbb", r.iloc[:2], path)
    back = clocks.read_clocks(path)
    assert list(back.columns) == list(clocks.COLUMNS) and len(back) == 6
    first = back[back["run_id"] == "20261202T100000Z-aaaaaa"].drop(columns="run_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(first, r)
    assert path.read_text().splitlines()[0] == ",".join(clocks.COLUMNS)


@pytest.mark.parametrize("text,phrase", [
    ("run_id,timestamp,sm_mhz\nx,2026-12-02T10:00:00Z,1980\n", ":1: not a clocks file"),
    (",".join(clocks.COLUMNS) + "\nr,2026-12-02 10:00,1980,,,,,,,\n", ":2: timestamp="),
    (",".join(clocks.COLUMNS) + "\nr,2026-12-02T10:00:00Z,fast,,,,,,,\n", ":2: sm_mhz='fast' is not a number"),
    (",".join(clocks.COLUMNS) + "\nr,2026-12-02T10:00:00Z,1980,,,,,,,4\n", "is not a hex bit mask"),
    (",".join(clocks.COLUMNS) + "\nr,2026-12-02T10:00:00Z,1980\n", ":2: wrong field count"),
])
def test_malformed_file_is_refused_and_left_alone(tmp_path, text, phrase):
    path = tmp_path / "clocks.csv"
    path.write_text(text)
    with pytest.raises(records.RecordsError, match=phrase.replace("(", r"\(")):
        clocks.read_clocks(path)
    with pytest.raises(records.RecordsError, match="not a clocks file|timestamp=|is not a|wrong field"):
        clocks.record("20261202T100000Z-aaaaaa", readings(), path)
    assert path.read_text() == text


def test_the_committed_log_parses():
    df = clocks.parse_smi_log(LOG.read_text())
    assert len(df) == 1976 and df["sm_mhz"].max() == 1980.0 and df["sm_mhz"].min() == 345.0   # idle
    assert clocks.busy_readings(df)["sm_mhz"].min() == 1350.0
    assert df["power_w"].max() > 600 and df["max_sm_mhz"].isna().all()
    bits = df["event_reasons"].map(lambda h: int(h, 16))
    assert (bits == 0x4).sum() == 213 and (bits == 0x1).sum() == 47
    # notebook 02's reading: the power cap held the clock in 28% of readings above 300 W
    hot = df[df["power_w"] > 300]
    assert clocks.capped(hot).mean() == pytest.approx(0.28, abs=0.01)
    assert df["timestamp"].min() == pd.Timestamp("2026-11-30 17:01:00.695", tz="UTC")


def test_the_committed_log_belongs_to_one_run_and_is_imported():
    df = clocks.parse_smi_log(LOG.read_text())
    assert clocks.match_run(df, records.read_records(DATA / "records.csv")) == LOG_RUN
    kept = clocks.read_clocks(DATA / "clocks.csv")
    assert len(kept[kept["run_id"] == LOG_RUN]) == len(df)
    line = clocks.summary_line(kept[kept["run_id"] == LOG_RUN])
    assert "(1350 to 1980)" in line and "(software power cap)" in line


def test_match_run_refuses_none_or_two():
    df = readings()
    runs = pd.DataFrame({"run_id": ["a", "b"], "device": ["NVIDIA H200"] * 2,
                         "timestamp": pd.to_datetime(["2026-12-02T10:00:01Z", "2026-12-02T10:00:02Z"])})
    with pytest.raises(ValueError, match="2 recorded runs started inside"):
        clocks.match_run(df, runs)
    with pytest.raises(ValueError, match="0 recorded runs"):
        clocks.match_run(df, runs.assign(timestamp=pd.to_datetime(["2026-12-03T00:00:00Z"] * 2)))


def test_import_skips_rows_already_here(tmp_path):
    src, dst = tmp_path / "out" / "clocks.csv", tmp_path / "clocks.csv"
    clocks.record("20261202T100000Z-aaaaaa", readings(), src)
    assert clocks.import_file(src, dst)[1] == 4
    assert clocks.import_file(src, dst)[1] == 0
    assert clocks.import_file(LOG, dst, run_id="20261130T170105Z-718309")[1] == 1976
    assert clocks.import_file(LOG, dst, run_id="20261130T170105Z-718309")[1] == 0


def test_summary_counts_busy_and_capped_readings():
    r = readings(4)
    r.loc[3, "util_pct"] = 0.0   # one reading with no kernel running: not busy
    line = clocks.summary_line(r)
    assert "(1780 to 1980, highest allowed 1980 MHz) over 3 busy readings" in line
    assert "a power or thermal cap active in 67% of them (software power cap)" in line
    assert line.endswith(" W of a 700 W limit") and clocks.summary_line(r.iloc[0:0]) == "no readings"


def test_readme_documents_every_clocks_column_in_order():
    import re
    text = (DATA / "README.md").read_text()
    section = text[text.index("## `clocks.csv`"):text.index("## Other files here")]
    assert tuple(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)) == clocks.COLUMNS


def test_the_clock_of_a_measurement_is_read_over_its_timed_window_alone():
    """Audit H1, M1, M2: never another run's readings nor the whole run's; no window, no clock."""
    r = readings(4)
    r["run_id"] = "run-a"
    other = r.assign(run_id="run-b", sm_mhz=1000.0)
    kept = pd.concat([r, other], ignore_index=True)
    t = r["timestamp"]
    row = {"run_id": "run-a", "timed_from": t.iloc[1], "timed_to": t.iloc[2]}
    w = clocks.over_window(row, kept)
    assert w.readings == 2 and w.sm_median_mhz == r["sm_mhz"].iloc[1:3].median()
    assert w.capped_share == clocks.capped(r.iloc[1:3]).mean()
    assert clocks.over_window({**row, "timed_from": None}, kept) is None
    assert clocks.over_window({**row, "timed_to": pd.NaT}, kept) is None
    later = t.iloc[-1] + pd.Timedelta(seconds=10)
    assert clocks.over_window({**row, "timed_from": later, "timed_to": later}, kept) is None
