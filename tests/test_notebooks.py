"""Notebooks are committed clean, execute on this machine, and export to HTML reports."""

import json
import re
import time
from pathlib import Path

import pytest

from fusedkit import report

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS][:2] == ["01_gemm_multiply_leakyrelu.ipynb",
                                             "02_linear_sigmoid_linear_logsumexp.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_opens_with_the_size_widgets(path):
    nb = json.loads(path.read_text())
    first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    assert "SizePicker" in "".join(first_code["source"])


@pytest.mark.slow
def test_reports_execute_and_contain_plots(tmp_path):
    t0 = time.perf_counter()
    results = report.build_reports(tmp_path, NOTEBOOKS, timeout=300)
    elapsed = time.perf_counter() - t0
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert elapsed < 420, f"notebooks took {elapsed:.0f} s; the budget on 2 cores is 7 minutes"
    index = (tmp_path / "index.html").read_text()
    for r in results:
        page = r.html.read_text()
        assert r.html.name in index
        assert len(re.findall(r"<img[^>]+src=\"data:image/png;base64,", page)) >= 1, r.html.name
        assert "application/vnd.jupyter.widget-state+json" in page   # widget state embedded
        assert "Traceback" not in page


def test_a_failing_notebook_still_gets_a_report(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Broken"),
                nbformat.v4.new_code_cell("print('before')"),
                nbformat.v4.new_code_cell("1 / 0")]
    src = tmp_path / "09_broken.ipynb"
    nbformat.write(nb, src)
    (res,) = report.build_reports(tmp_path / "out", [src], timeout=60)
    assert not res.ok and "ZeroDivisionError" in res.error
    assert "before" in res.html.read_text()
    assert "FAILED" in (tmp_path / "out" / "index.html").read_text()


@pytest.mark.slow
def test_problem_notebook_runs_with_no_records_at_all(tmp_path, monkeypatch):
    # A fresh GPU machine, or a fork with an empty data/: every cell must still run.
    empty = tmp_path / "records.csv"
    monkeypatch.setenv("FUSEDKIT_RECORDS", str(empty))
    (res,) = report.build_reports(tmp_path / "out", [NOTEBOOKS[0]], timeout=300)
    assert res.ok, res.error
    assert "no recorded run" in res.html.read_text()
