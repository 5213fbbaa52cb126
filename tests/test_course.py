"""The course's shape: each notebook one path a learner can follow.

At most 60 cells, about 5,000 words of prose, a contents list that matches the headings, no lab
history on the page (commit ids, run ids, session command lines, versions of a kernel stay out of
the prose; provenance is a caption printed by a cell, history lives in data/logs/lab_notes.md and
git, not in a "Lab notes" section).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

MAX_CELLS = 60
MAX_PROSE_WORDS = 5000     # markdown and the sentence templates of lesson.say
# Notebooks still to be rewritten into the course's shape (strict: a rewritten one leaves the set).
NOT_YET_REWRITTEN: set[str] = set()

HASH = re.compile(r"(?<![\w/.#-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}(?![\w-])")
RUN_ID = re.compile(r"\b20\d{6}T\d{6}Z-[0-9a-f]{6}\b|\b(?:sweep|run) [0-9a-f]{6}\b")
LAB_LOG = re.compile(r"gpu_session\.sh|STAGES=|first version \(|second version \(|"
                     r"\bversion \d \(|as first written \(|\bbuilt twice\b|"
                     r"\bcommit [0-9a-f]{7}", re.IGNORECASE)
LAB_NOTES = re.compile(r"<details>\s*<summary>\s*Lab notes", re.IGNORECASE)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _say_templates(code: str) -> list[str]:
    """The string literals of a cell's lesson.say(...) calls: prose the page shows."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("say", "md") and node.args):
            out += [n.value for n in ast.walk(node.args[0])
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return out


def _prose(path: Path) -> list[str]:
    """The page's prose: markdown cells and lesson.say templates."""
    out = []
    for c in _cells(path):
        src = _source(c)
        if c["cell_type"] == "markdown":
            out.append(src)
        elif c["cell_type"] == "code":
            out += _say_templates(src)
    return out


def _words(text: str) -> int:
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    text = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("|"))  # tables
    return len(re.findall(r"[A-Za-z][\w'’-]*", text))


def _params():
    for p in NOTEBOOKS:
        marks = [pytest.mark.xfail(strict=False, reason="not yet rewritten into the course's shape")] \
            if p.stem in NOT_YET_REWRITTEN else []
        yield pytest.param(p, marks=marks, id=p.stem)


@pytest.mark.parametrize("path", list(_params()))
def test_a_notebook_is_one_path_of_at_most_60_cells_and_5000_words(path):
    cells = _cells(path)
    assert len(cells) <= MAX_CELLS, f"{path.name}: {len(cells)} cells, at most {MAX_CELLS}"
    words = sum(_words(t) for t in _prose(path))
    assert words <= MAX_PROSE_WORDS, f"{path.name}: {words} words of prose, about {MAX_PROSE_WORDS} at most"


@pytest.mark.parametrize("path", list(_params()))
def test_the_contents_list_matches_the_headings(path):
    cells = [_source(c) for c in _cells(path) if c["cell_type"] == "markdown"]
    first = cells[0]
    assert first.startswith("# ") and "**You will learn**" in first and "**Contents**" in first
    listed = re.findall(r"^\s*(\d+)\.\s+(.+?)\s*$", first.split("**Contents**", 1)[1], flags=re.MULTILINE)
    headings = [m for src in cells[1:] for m in re.findall(r"^## (\d+)\. (.+?)\s*$", src, flags=re.MULTILINE)]
    assert listed == headings, f"{path.name}: contents {listed} against headings {headings}"


@pytest.mark.parametrize("path", list(_params()))
def test_no_lab_history_in_the_lesson_body(path):
    found = []
    for text in _prose(path):
        found += HASH.findall(text) + RUN_ID.findall(text) + LAB_LOG.findall(text)
    assert not found, f"{path.name}: lab history in the prose (captions and data/logs hold it): {found}"
    notes = [i for i, c in enumerate(_cells(path)) if LAB_NOTES.search(_source(c)) or
             re.search(r"\bLab notes\b", _source(c))]
    assert not notes, (f"{path.name}: cells {notes} hold or cite Lab notes; history is in "
                       "data/logs/lab_notes.md")


# Sentences an expert audit (2026-12-04) found wrong, each gone from the page: (notebook, phrase).
WRONG = [
    ("03_p45", "all H columns of h before GEMM2 can use them"),     # a contraction streams; the
    ("03_p45", "which FlashAttention keeps in shared memory"),      # accumulator is what stays
    ("01_p12_simt", "is what this GPU sustains"),                   # a library's rate, a reference
    ("01_p12_simt", "the headroom a kernel can win"),
    ("02_p12_hopper", "compares like with like"),                   # ceilings of another run
    ("06_results", "every run also measures the device's own ceilings"),
    ("04_small_batches", "within the factor of 1.25"),              # a band, not a verdict
    ("05_precision_lab", "which lies below fp32's own rounding"),   # lo·lo is near it
    ("05_precision_lab", "whose own error is thousands of times smaller"),  # truncation: 20-30x
    ("04_small_batches", "whatever the precision"),                 # W in 2 bytes halves it
    ("02_p12_hopper", "each in a bit field, in 16-byte units"),     # the mode is a code
    ("06_results", "in small ways"),                                # KernelBench's timing differs
]


@pytest.mark.parametrize("stem, phrase", WRONG)
def test_an_audited_wrong_sentence_is_gone(stem, phrase):
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    text = " ".join(" ".join(_source(c).split()) for c in _cells(path))
    assert phrase not in text, f"{path.name}: still says {phrase!r}"


def test_the_two_gemm_fusion_limit_is_the_accumulator_rows_by_n():
    # Notebook 03 computes the fit on GEMM2's accumulator (rows x N fp32), not on h's rows x H.
    cells = _cells(ROOT / "notebooks" / "03_p45.ipynb")
    src = "\n".join(_source(c) for c in cells if c["cell_type"] == "code")
    assert "tile_rows * N * 4" in src and "tile_rows * H * 4" not in src and "// (H * 4)" not in src


def test_the_exercise_hint_labels_the_whole_cublas_call():
    hint = (ROOT / "fusedkit" / "exercises" / "p12_predict_speedup.py").read_text()
    assert "cuBLAS's own fp16 GEMM reached" not in hint and "below fp32's" not in hint


def _template_texts(code: str) -> list[str]:
    """The text of each lesson.say / present.md template of a cell, its fields as "{...}"
    (an f-string's expressions too)."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []

    def text(node) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(text(v) if isinstance(v, ast.Constant) else "{}" for v in node.values)
        if isinstance(node, ast.BinOp):
            return text(node.left) + text(node.right)
        if isinstance(node, ast.IfExp):
            return text(node.body) + " " + text(node.orelse)
        return "{}"

    return [text(node.args[0]) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("say", "md") and node.args]


@pytest.mark.parametrize("path", list(_params()))
def test_a_sentence_without_a_number_is_markdown_not_a_template(path):
    # A reader of the .ipynb sees the explanation, not code: a template keeps only the sentences
    # that carry a generated number; the others live in Markdown cells.
    bare = []
    for i, c in enumerate(_cells(path)):
        if c["cell_type"] != "code":
            continue
        for t in _template_texts(_source(c)):
            for s in re.split(r"(?<=[.;!?])\s+(?=[A-Z`(*])", t):
                if "{" not in s and len(s.split()) > 3 and not s.lstrip().startswith("*"):
                    bare.append((i, s[:80]))
    assert not bare, f"{path.name}: sentences with no number in code-cell templates: {bare}"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if not p.stem.startswith("06")], ids=lambda p: p.stem)
def test_a_lesson_reads_the_ceilings_of_one_run_not_the_newest_of_each(path):
    # ceilings.newest mixes runs (each ceiling its newest value, from whichever run measured it):
    # a lesson's ceilings come from one run, the run of the steps they judge (ceilings.of_run).
    code = [i for i, c in enumerate(_cells(path))
            if c["cell_type"] == "code" and "ceilings.newest(" in _source(c)]
    assert not code, f"{path.name}: cells {code} read ceilings.newest"
