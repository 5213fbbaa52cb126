"""The README's measured state is generated from the records, and kept current."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fusedkit import readme, records
from fusedkit.cli import main
from fusedkit.problems import fmt_sizes, get

REPO = Path(__file__).resolve().parent.parent
P12 = get("p12")


def test_the_readme_is_current_with_the_records():
    """Regenerate the block from data/records.csv: a README that says otherwise is stale."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme.current_block(text) == readme.measured_state(REPO / "data" / "records.csv"), (
        "README.md's measured state is stale: run python -m fusedkit readme")


def test_the_block_names_the_best_of_each_tier_from_the_newest_rows():
    block = readme.measured_state()
    assert "| p12 | fp32-faithful | `wgmma_fp16x3` |" in block
    assert "| p12 | fast | `wgmma_persistent` |" in block
    assert "| p45 | kb-pass | `triton_fused_lse_fp16` |" in block   # the 2026-12-04 run
    assert "| p12 | fp32-faithful | `faithful_by_batch` |" in block   # the H100's (2026-12-05)
    assert "`faithful_by_batch`, from 1 to 1024 rows" in block   # the sweep that timed its routed steps (M6)


def _ctx(i, commit):
    return records.RunContext(run_id=f"2026010{i}T000000Z-00000{i}", timestamp=f"2026-01-0{i}T00:00:00Z",
                              commit=commit, device="NVIDIA H200", driver="", cuda="",
                              torch="2.11.0", triton="3.6.0")


@pytest.fixture
def small_records(tmp_path):
    """An older full run and a newer partial one, and a README with the markers."""
    path = tmp_path / "records.csv"
    at = fmt_sizes(P12.defaults)
    for ctx, timed in ((_ctx(1, "c000001"), [("eager", "reference", 3.0), ("tiled", "fp32-faithful", 2.5),
                                            ("triton_fp16x3", "fp32-faithful", 1.0)]),
                       (_ctx(2, "c000002"), [("eager", "reference", 2.9), ("wgmma_fp16x3", "fp32-faithful", 0.7)]),
                       (_ctx(3, "c000003+dirty"), [("eager", "reference", 2.9),
                                                   ("wgmma_persistent", "fast", 0.01)])):
        records.append_rows(path, [records.make_row(ctx, problem="p12", sizes=at, variant=v, tier=t,
                                                    timer="cuda-events", median_ms=ms, rel_error=2.5e-7)
                                   for v, t, ms in timed])
    doc = tmp_path / "README.md"
    doc.write_text(f"# x\n\nbefore\n\n{readme.BEGIN}\nold\n{readme.END}\n\nafter\n", encoding="utf-8")
    return path, doc


def test_update_writes_between_the_markers_only(small_records):
    path, doc = small_records
    assert readme.update(doc, path)
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# x\n\nbefore\n\n") and text.endswith(f"{readme.END}\n\nafter\n")
    block = readme.current_block(text)
    assert "| p12 | fp32-faithful | `wgmma_fp16x3` | 0.700 | 4.14x | 2.5e-07 | NVIDIA H200 | 2026-01-02 |" in block
    assert "wgmma_persistent" not in block                 # a dirty tree's row is no result
    assert "| p45 | – | nothing recorded" in block
    assert not readme.update(doc, path)                    # current: nothing to write


def test_the_command_updates_and_checks(small_records, capsys, monkeypatch):
    path, doc = small_records
    assert main(["readme", "--readme", str(doc), "--records", str(path), "--check"]) == 1
    assert "stale" in capsys.readouterr().err
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(path))   # honoured as bench honours it
    assert main(["readme", "--readme", str(doc)]) == 0
    assert "updated" in capsys.readouterr().out
    assert main(["readme", "--readme", str(doc), "--check"]) == 0
    assert "current" in capsys.readouterr().out


def one_line_error(capsys, argv: list[str], *phrases: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert all(p in err for p in phrases), (phrases, err)


@pytest.mark.parametrize("make,phrase", [
    (lambda t: t / "none.csv", "none.csv is missing"),
    (lambda t: (t / "loop.csv").symlink_to("loop.csv") or t / "loop.csv", "is a symbolic link that loops"),
    (lambda t: (t / "empty.csv").write_text("") or t / "empty.csv", "empty.csv holds no rows"),
    (lambda t: (t / "h.csv").write_text(",".join(records.COLUMNS) + "\n") and t / "h.csv", "h.csv holds no rows"),
])
@pytest.mark.parametrize("check", [[], ["--check"]])
def test_records_without_rows_are_refused_and_the_readme_kept(make, phrase, check, small_records,
                                                              tmp_path, capsys):
    """``readme`` rewrote the measured state to "nothing recorded" (2,137 characters became 1,021)
    and exited 0; ``readme --check`` said "stale" and sent the user to that command."""
    _, doc = small_records
    before = doc.read_bytes()
    one_line_error(capsys, ["readme", "--readme", str(doc), "--records", str(make(tmp_path)), *check],
                   "error: --records: ", phrase, "the README's measured state is left as it is")
    assert doc.read_bytes() == before


def test_a_readme_that_cannot_be_written_is_kept_whole(small_records, capsys, monkeypatch):
    """On a full disk README.md was cut at 36,864 bytes (written in place); a stale copy marked
    read-only was rewritten, as root."""
    path, doc = small_records
    before = doc.read_bytes()
    doc.chmod(0o444)
    one_line_error(capsys, ["readme", "--readme", str(doc), "--records", str(path)],
                   "error: --readme: ", "is read-only (mode 0o444)", "allowed: a writable README")
    doc.chmod(0o644)
    real = os.write

    def full(fd, data):
        real(fd, bytes(data[:100]))
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "write", full)
    one_line_error(capsys, ["readme", "--readme", str(doc), "--records", str(path)],
                   "error: --readme: ", f"No space left on device: {doc} was not written; it is left as it was")
    monkeypatch.undo()
    assert doc.read_bytes() == before and [p.name for p in doc.parent.iterdir() if p.suffix == ".tmp"] == []
    for args, said in ((["--readme", str(doc.parent / "none.md")], "none.md is not a file"),
                       (["--readme", str(doc), "--records", ""], "--records=''")):
        one_line_error(capsys, ["readme", *args], said)
    doc.write_text("# no markers\n", encoding="utf-8")
    one_line_error(capsys, ["readme", "--readme", str(doc), "--records", str(path)], "no measured-state block")


def test_listed_best_reads_the_tiers_back_from_the_block(small_records):
    path, doc = small_records
    readme.update(doc, path)
    listed = readme.listed_best(doc)
    assert listed[("p12", "fp32-faithful")] == "wgmma_fp16x3" and listed[("p12", "reference")] == "eager"
    assert not any(k[0] == "p45" for k in listed)            # "nothing recorded" names no variant
    assert readme.listed_best()[("p45", "kb-pass")] == "triton_fused_lse_fp16"   # the repository's
