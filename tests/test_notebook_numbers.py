"""No measured-looking number is typed into the notebooks' prose.

A number with a unit of time, rate, size or ratio (ms, µs, %, 3.1x, TFLOP/s, GB/s, MB ...) in a
markdown cell drifts from the records the moment a kernel is re-measured. Such numbers belong in
cells that print them from ``data/`` (``fusedkit.lesson.say``), unless the sentence says plainly
that the number is a prediction, a datasheet value, or a definition. This test finds the others.

A sentence is exempt when it (or the paragraph it opens, for a paragraph that starts with
"Prediction") carries one of :data:`LABELS`; a few fixed phrases are allowed by
:data:`ALLOWED`, each with its reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# Every notebook of the workbook; a new one is covered from the start.
COVERED = tuple(p.name for p in NOTEBOOKS)

UNITS = r"(?:ms|µs|us|%|TFLOP/s|TFLOPS|GFLOP/s|GB/s|TB/s|GiB|MiB|KiB|MB|GB|KB)"
NUMBER = r"\d+(?:\.\d+)?(?:\s*(?:-|–|to)\s*\d+(?:\.\d+)?)?"
MEASURED = re.compile(
    rf"(?<![\w.^⁻])(?:{NUMBER}\s?{UNITS}(?![\w/])"       # 2.7 ms, 70-80%, 4.8 TB/s, 64 MB
    rf"|\d+(?:\.\d+)?[x×](?![\w\d]))")                    # 3.18x, 2x (not 128x128, not 2 × 3)

LABELS = re.compile(r"predict|expect|should|datasheet|peak", re.IGNORECASE)
# A sentence that also reports a result is not exempt by its label ("predicted at 15 µs and
# measured 40 µs" carries a measurement).
REPORTS = re.compile(r"measured|recorded|landed|took|timed", re.IGNORECASE)

# (notebook, exact phrase) -> why a number there is not a measurement.
ALLOWED: dict[tuple[str, str], str] = {}


def _strip_code(text: str) -> str:
    """Markdown without fenced code and inline code spans (code is not prose)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    return re.sub(r"`[^`]*`", " ", text)


def _blocks(text: str) -> list[str]:
    """Paragraphs, list items and table rows of a markdown cell, each on one line."""
    blocks, cur = [], []
    for line in text.splitlines():
        s = line.strip()
        starts = (not s or s.startswith(("#", "- ", "* ", "|")) or re.match(r"\d+\.\s", s))
        if starts and cur:
            blocks.append(" ".join(cur))
            cur = []
        if s.startswith("|"):
            blocks.append(s)
        elif s:
            cur.append(s)
    if cur:
        blocks.append(" ".join(cur))
    return blocks


def _sentences(block: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?:;])\s+(?=[A-Z*(\"'])", block) if s.strip()]


def unlabelled_numbers(nb_path: Path) -> list[tuple[int, str, str]]:
    """(cell index, number, sentence) for every measured-looking number in the markdown
    cells of ``nb_path`` whose sentence is neither labelled nor allowed."""
    nb = json.loads(nb_path.read_text())
    hits = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for block in _blocks(_strip_code("".join(cell["source"]))):
            plain = block.lstrip("*_ ")
            whole = bool(re.match(r"(prediction|predictions)\b", plain, re.IGNORECASE))
            for sentence in _sentences(block):
                for m in MEASURED.finditer(sentence):
                    if (whole or LABELS.search(sentence)) and not REPORTS.search(sentence):
                        continue
                    if any(nb_path.name == nb and phrase in sentence
                           for (nb, phrase) in ALLOWED):
                        continue
                    hits.append((i, m.group(0), sentence))
    return hits


def test_the_pattern_finds_measured_numbers_and_nothing_else():
    found = lambda s: [m.group(0) for m in MEASURED.finditer(s)]   # noqa: E731
    assert found("it took 2.724 ms, 75% of the floor, 3.12x eager, 157.7 TFLOP/s") == [
        "2.724 ms", "75%", "3.12x", "157.7 TFLOP/s"]
    assert found("64 MB at 4.8 TB/s in 28.8 µs, 3174 GB/s, 70-80%") == [
        "64 MB", "4.8 TB/s", "28.8 µs", "3174 GB/s", "70-80%"]
    assert found("a 2 × 3 example, 128x128 tiles, 1024 × 8192, sm_90a, 1e-4, 2⁻¹¹") == []
    assert found("x2 and 10 msec") == []


def test_a_typed_in_number_is_caught(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": [
        "Step 6 reaches 3.12x eager. Prediction: about 0.9 ms.\n\n",
        "Prediction: the floor is 0.42 ms. Then 1.0 ms follows.\n\n",
        "It was predicted at 15 µs and measured 40 µs.\n\n",
        "The H200 datasheet gives 4.8 TB/s."]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps(nb))
    assert [h[1] for h in unlabelled_numbers(path)] == ["3.12x", "15 µs", "40 µs"]


@pytest.mark.parametrize("name", COVERED)
def test_prose_carries_no_typed_in_measurements(name):
    hits = unlabelled_numbers(ROOT / "notebooks" / name)
    lines = [f"cell {i}: {num!r} in: {sentence[:160]}" for i, num, sentence in hits]
    assert not hits, (f"{name}: {len(hits)} measured-looking numbers in markdown; print them from "
                      f"a cell (fusedkit.lesson.say) or label the sentence a prediction or a "
                      f"datasheet value:\n" + "\n".join(lines))
