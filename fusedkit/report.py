"""Execute the notebooks headless and export each as a self-contained HTML report.

nbclient runs every cell (widget state stored, so widgets render in the HTML); nbconvert
exports it, with figures inlined as data URIs. Each report is written as soon as its
notebook finishes, so a run that dies half-way keeps what it finished; a notebook that
fails still gets a report, showing the failing cell and its error, and is marked FAILED
in ``index.html``.
"""

from __future__ import annotations

import html
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbconvert import HTMLExporter
from tqdm.auto import tqdm

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")   # colour codes in tracebacks


@dataclass
class ReportResult:
    """One executed notebook: where its report is, how long it took, and any error."""

    notebook: Path
    html: Path
    title: str
    seconds: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def notebook_paths(folder: Path = NOTEBOOKS) -> list[Path]:
    """Notebooks in ``folder`` in their numbered order."""
    paths = sorted(Path(folder).glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"notebooks={folder}: no numbered notebooks (NN_name.ipynb) found")
    return paths


def _title(nb: nbformat.NotebookNode, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return fallback


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def execute_notebook(path: Path, out_dir: Path, *, timeout: int = 600) -> ReportResult:
    """Run one notebook top to bottom in its own folder and write ``out_dir/<name>.html``.

    ``timeout`` is the limit per cell, in seconds.
    """
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            store_widget_state=True)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    bar = tqdm(total=len(cells), desc=path.stem, unit="cell", leave=False)
    client.on_cell_executed = lambda **_: bar.update(1)
    t0, error = time.perf_counter(), ""
    try:
        client.execute()
    except CellExecutionError as e:
        lines = _ANSI.sub("", str(e)).strip().splitlines()
        error = lines[-1] if lines else repr(e)
    except Exception as e:  # a dead kernel or a timeout: still write what ran
        error = f"{type(e).__name__}: {e}"
    finally:
        bar.close()
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    out = out_dir / f"{path.stem}.html"
    _atomic_write(out, body)
    return ReportResult(path, out, _title(nb, path.stem), time.perf_counter() - t0, error)


def write_index(results: list[ReportResult], out_dir: Path) -> Path:
    """``index.html``: one line per report with its title, status and run time."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    def item(r: ReportResult) -> str:
        status = f"{r.seconds:.0f} s"
        if r.error:
            status += f", <b style='color:#b00'>FAILED</b>: {html.escape(r.error)}"
        return f"<li><a href='{html.escape(r.html.name)}'>{html.escape(r.title)}</a> <small>({status})</small></li>"

    items = "\n".join(item(r) for r in results)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fusedkit reports</title>
<style>body{{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;line-height:1.5}}</style>
</head><body>
<h1>fusedkit reports</h1>
<p>Executed notebooks of the fusedkit workbook, generated {when}.</p>
<ol>
{items}
</ol>
</body></html>
"""
    index = out_dir / "index.html"
    _atomic_write(index, page)
    (out_dir / "index.json").write_text(json.dumps(
        [{"notebook": r.notebook.name, "html": r.html.name, "title": r.title,
          "seconds": round(r.seconds, 1), "error": r.error} for r in results], indent=1))
    return index


def build_reports(out_dir: str | Path = REPO / "reports", notebooks: list[Path] | None = None,
                  *, timeout: int = 600) -> list[ReportResult]:
    """Execute ``notebooks`` (default: all) and write their reports and the index."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = notebooks or notebook_paths()
    results: list[ReportResult] = []
    for path in tqdm(paths, desc="notebooks", unit="nb"):
        results.append(execute_notebook(Path(path), out_dir, timeout=timeout))
        write_index(results, out_dir)   # after each, so a crash keeps the finished ones
    return results
