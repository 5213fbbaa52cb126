"""Execute the notebooks headless and export each as an HTML report that opens offline.

Each report is written as soon as its notebook finishes, a failed one too; the index lists every
notebook of the folder and the records' headline numbers. Sizes are injected papermill-style after
each notebook's ``parameters`` cell. nbformat, nbclient and nbconvert are imported where used, so
that importing this module (the command line does) stays cheap.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import signal
import site
import subprocess
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import pandas as pd
from tqdm.auto import tqdm

from fusedkit import interrupts, paths, problems, static_widgets
from fusedkit.precision import KERNEL_TIERS as TIERS
from fusedkit.problems import Sizes, fmt_sizes, presets
from fusedkit.records import RecordsError
from fusedkit.results import best_by_tier, caption, recorded
from fusedkit.static_widgets import WIDGET_VIEW, widget_models

if TYPE_CHECKING:
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    from nbformat import NotebookNode

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"

# JupyterLab's template with every block that loads a script from the network empty: require.js,
# MathJax (the maths is Unicode), mermaid.js and the widget manager (widgets are static HTML).
_OFFLINE_TEMPLATE = "offline.html.j2"
_OFFLINE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def offline_exporter() -> HTMLExporter:
    """An HTML exporter in JupyterLab's look whose pages load nothing from the network."""
    from jinja2 import DictLoader  # noqa: PLC0415 - nbconvert's, as heavy
    from nbconvert import HTMLExporter  # noqa: PLC0415 - heavy (1 s)

    exporter = HTMLExporter(template_name="lab", template_file=_OFFLINE_TEMPLATE,
                            extra_loaders=[DictLoader({_OFFLINE_TEMPLATE: _OFFLINE})],
                            embed_images=True)
    exporter.register_preprocessor(static_widgets.StaticWidgetsPreprocessor(), enabled=True)  # nbconvert's
    return exporter


@dataclass
class ReportResult:
    """One executed notebook: where its report is, how long it took, and any error."""

    notebook: Path
    html: Path
    title: str
    seconds: float
    error: str = ""
    summary: str = ""          # one line of markdown: what the notebook is about
    status: str = "built"      # built (this run), kept (an earlier run's report), missing
    built_at: str = ""         # when the report was written, "YYYY-mm-dd HH:MM UTC"
    sizes: dict[str, Sizes] = field(default_factory=dict)   # its pickers', where not KernelBench's

    @property
    def ok(self) -> bool:
        return not self.error


def relative_paths(text: str) -> str:
    """``text`` with this machine's absolute paths made relative (``.``, ``~``, ``$TMPDIR``, ...)."""
    repo = {str(REPO), os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))}
    roots = [(r, ".") for r in repo]
    inside = tuple(r + os.sep for r in repo)
    libs = {*site.getsitepackages(), site.getusersitepackages(),
            sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    roots += [(p, "site-packages") for p in libs if p and not p.startswith(inside)]
    stdlib = sysconfig.get_paths()["stdlib"]
    if not stdlib.startswith(inside):
        roots.append((stdlib, os.path.basename(stdlib)))          # e.g. python3.11/json/...
    roots += [(t, "$TMPDIR") for t in {tempfile.gettempdir(), os.path.realpath(tempfile.gettempdir())}]
    roots += [(h, "~") for h in {os.path.expanduser("~"), str(Path.home())}]
    lookup: dict[str, str] = {}   # absolute folder -> what a report says instead, first wins
    for path, short in roots:
        if len(path.rstrip(os.sep)) > 1:   # never "/" itself
            lookup.setdefault(path.rstrip(os.sep), short)
    longest_first = sorted(lookup, key=len, reverse=True)
    pattern = re.compile(r"(?:file://|(?<![\w.~/-]))(" + "|".join(map(re.escape, longest_first))
                         + r")(?![\w.-])")
    parts = re.split(r"(data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+)", text)   # odd items: data URIs, kept
    return "".join(part if i % 2 else pattern.sub(lambda m: lookup[m.group(1)], part)
                   for i, part in enumerate(parts))


def notebook_paths(folder: Path = NOTEBOOKS) -> list[Path]:
    """Notebooks in ``folder`` in their numbered order."""
    paths = sorted(Path(folder).glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"notebooks={folder}: no numbered notebooks (NN_name.ipynb) found")
    return paths


def _read(path: Path) -> NotebookNode:
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, a second or more)

    return nbformat.read(path, as_version=4)


def _about(path: Path, nb: NotebookNode | None = None) -> tuple[str, str]:
    """A notebook's title (its first ``# `` heading) and summary (``metadata.fusedkit.summary``, else
    its first paragraph that is not a heading), read from ``path`` when ``nb`` is None."""
    if nb is None:
        try:
            nb = _read(path)
        except Exception:  # noqa: BLE001 - an unreadable notebook still gets its line in the index
            return path.stem, ""
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    title = next((ln[2:].strip() for src in markdown for ln in src.splitlines() if ln.startswith("# ")),
                 path.stem)
    paragraphs = re.split(r"\n\s*\n", markdown[0]) if markdown else []
    summary = nb.metadata.get("fusedkit", {}).get("summary", "") or next(
        (para for para in paragraphs if para.strip() and not para.lstrip().startswith("#")), "")
    return title, " ".join(str(summary).split())


PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"


class ParametersError(ValueError):
    """A notebook that cannot take injected sizes (it has no parameters cell)."""


def _tags(cell: NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def inject_sizes(nb: NotebookNode, sizes: Mapping[str, Sizes], *,
                 name: str = "the notebook") -> NotebookNode:
    """``nb`` (changed in place) with ``SIZES = sizes`` in a cell after its parameters cell."""
    from nbformat.v4 import new_code_cell  # noqa: PLC0415 - heavy, as in _read

    nb.cells = [c for c in nb.cells if INJECTED_TAG not in _tags(c)]
    at = next((i for i, c in enumerate(nb.cells)
               if c.cell_type == "code" and PARAMETERS_TAG in _tags(c)), None)
    if at is None:
        raise ParametersError(f"{name} has no parameters cell (a code cell tagged "
                              f"{PARAMETERS_TAG!r}, e.g. SIZES = {{}}) after which to inject sizes; "
                              "allowed: a notebook with one, as every notebooks/NN_*.ipynb has")
    lines = ",\n".join(f"    {key!r}: {dict(values)!r}" for key, values in sizes.items())
    source = ("# Injected by python -m fusedkit report --sizes: the sizes of this run\n"
              f"SIZES = {{\n{lines},\n}}" if sizes else "SIZES = {}")
    nb.cells.insert(at + 1, new_code_cell(source, metadata={"tags": [INJECTED_TAG]}))
    return nb


def picked_sizes(nb: NotebookNode) -> dict[str, Sizes]:
    """Problem key -> the sizes its first size picker held when ``nb`` ran (stored widget state)."""
    from fusedkit.widgets import SizePicker  # noqa: PLC0415 - imports ipywidgets and matplotlib

    models = widget_models(nb)
    found: dict[str, Sizes] = {}

    def state(model_id: str) -> tuple[str, dict]:
        model = models.get(model_id.removeprefix("IPY_MODEL_"), {})
        return model.get("model_name", ""), model.get("state", {})

    def boxes(model_id: str, depth: int = 0) -> dict[str, int]:
        name, st = state(model_id)
        if name in ("IntTextModel", "TextModel"):   # a picker's box
            value = st.get("value")
            return {str(st.get("description")): int(value) if str(value).isdigit() else value}
        return {k: v for child in st.get("children", [])[:64 if depth < 8 else 0]
                for k, v in boxes(str(child), depth + 1).items()}

    def visit(model_id: str, depth: int = 0) -> None:
        classes = list(state(model_id)[1].get("_dom_classes", []))
        if SizePicker.DOM_CLASS not in classes:
            for child in state(model_id)[1].get("children", []) if depth < 32 else []:
                visit(str(child), depth + 1)
            return
        keys = [c.removeprefix(SizePicker.DOM_CLASS + "-") for c in classes if c.startswith(SizePicker.DOM_CLASS + "-")]
        if keys and keys[0] not in found:
            with contextlib.suppress(ValueError):   # a bad value in its boxes: it used none of them
                found[keys[0]] = problems.get(keys[0]).sizes(boxes(model_id))

    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            view = out.get("data", {}).get(WIDGET_VIEW)
            if isinstance(view, Mapping) and view.get("model_id"):
                visit(str(view["model_id"]))
    return found


def not_kernelbench(picked: Mapping[str, Sizes]) -> dict[str, Sizes]:
    """Those of ``picked`` (problem key -> sizes) that are not the problem's KernelBench sizes."""
    return {k: dict(v) for k, v in picked.items() if dict(v) != problems.get(k).defaults}


def sizes_line(sizes: Mapping[str, Sizes]) -> str:
    """``p12 at batch_size=17,in_features=33,out_features=65 (the small, odd preset); ...``."""
    return "; ".join(f"{key} at {fmt_sizes(values)}" + (f" (the {preset.label} preset)" if preset else "")
                     for key, values in sizes.items()
                     for preset in [presets.matching(problems.get(key), values)])


def execute_notebook(path: Path, out_dir: Path, *, timeout: int = 600,
                     sizes: Mapping[str, Sizes] | None = None) -> ReportResult:
    """Run one notebook in its own folder (``timeout`` s a cell) and write its report in ``out_dir``."""
    from nbclient import NotebookClient  # noqa: PLC0415 - heavy, as in _read
    from nbclient.exceptions import CellExecutionError  # noqa: PLC0415
    from nbformat.v4 import new_markdown_cell  # noqa: PLC0415
    from traitlets.config import Config  # noqa: PLC0415

    nb = _read(path)
    if sizes:
        inject_sizes(nb, sizes, name=path.name)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    started = [0]   # the number of the code cell running, from 1
    # A cell past the limit is interrupted (killed mid-cell, the kernel logged a ZMQ traceback).
    timed_out = (f"CellTimeoutError: ran longer than the {timeout} s allowed per cell "
                 "(--timeout); the cells after it did not run")
    # The kernel's Unix sockets: a path holds at most 107 bytes, the kernel's name and port included.
    folder = next((f for f in dict.fromkeys([tempfile.gettempdir(), "/tmp"])
                   if len(os.fsencode(f)) <= 60 and os.access(f, os.W_OK | os.X_OK)), None)
    if folder is None:
        raise OSError(f"TMPDIR={tempfile.gettempdir()!r} is too long for the notebooks' kernel sockets "
                      "(a Unix socket's path holds at most 107 bytes) and /tmp cannot be written; "
                      "allowed: a TMPDIR of at most 60 characters")
    with tempfile.TemporaryDirectory(prefix="fk-", dir=folder) as sockets:
        # Unix sockets of this run's own, not TCP, of which every kernel warned on stderr.
        config = Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(sockets, "kernel")}})
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", config=config,
                                resources={"metadata": {"path": str(path.parent)}},
                                store_widget_state=True, interrupt_on_timeout=True,
                                error_on_timeout={"ename": "CellTimeoutError", "evalue": timed_out,
                                                  "traceback": [timed_out]})
        # disable=None: bars on a terminal only, not in a log or a pipe.
        bar = tqdm(total=len(cells), desc=path.stem, unit="cell", leave=False, disable=None)
        client.on_cell_executed = lambda **_: bar.update(1)
        client.on_cell_start = lambda cell, **_: started.__setitem__(
            0, started[0] + (cell.cell_type == "code"))
        t0, error = time.perf_counter(), ""
        try:
            _execute(client)
        except CellExecutionError as e:
            lines = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip().splitlines()   # no colour codes
            error = lines[-1] if lines else repr(e)
            if error == timed_out:
                error = f"code cell {started[0]} of {len(cells)} {timed_out.split(': ', 1)[1]}"
        except Exception as e:  # a dead kernel: still write what ran
            error = f"{type(e).__name__}: {' '.join(str(e).split())}"
        finally:
            bar.close()
    if error and "widgets" not in nb.metadata:
        # nbclient stores the widgets' state only after the last cell: keep what the cells showed.
        with contextlib.suppress(Exception):
            client.set_widgets_metadata()
    title, summary = _about(path, nb)
    ran_at = not_kernelbench(picked_sizes(nb))
    if ran_at:   # said under the title, where no reader can miss it
        first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1)
        nb.cells.insert(first + 1, new_markdown_cell(
            f"> **Run at sizes other than KernelBench's:** {sizes_line(ran_at)} (`python -m fusedkit "
            "report --sizes`). What this page computes uses these sizes; the GPU measurements it reads "
            "from `data/` keep the sizes they were recorded at.", metadata={"tags": ["fusedkit-sizes-note"]}))
    # Markdown images resolve against the notebook's folder, as they do in Jupyter.
    body, _ = offline_exporter().from_notebook_node(
        nb, resources={"metadata": {"path": str(path.parent), "name": path.stem}})
    out = out_dir / f"{path.stem}.html"
    paths.replace(paths.target(out), relative_paths(body))
    return ReportResult(path, out, title, time.perf_counter() - t0,
                        relative_paths(error), summary, built_at=_now(), sizes=ran_at)


def _execute(client: NotebookClient) -> None:
    """``client.execute()`` in a worker thread, so that Ctrl-C and SIGTERM reach this process (in
    the main thread nbclient takes both and goes on): the kernel is killed, the interrupt raised."""
    failed: list[BaseException] = []
    # An Event, not Thread.join: on CPython 3.11 a join cut short by a signal can leave is_alive() False.
    done = threading.Event()

    def work() -> None:
        try:
            # The kernel's own stderr is not the reader's: interrupted at a cell's time limit, its
            # libzmq has printed "Assertion failed: pfd.revents & POLLIN" there. Cells' errors
            # come as messages, and a kernel that dies is said in one line.
            client.execute(stderr=subprocess.DEVNULL)
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(e)
        finally:
            done.set()

    threading.Thread(target=work, name="notebook", daemon=True).start()
    try:
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        deadline = time.monotonic() + 30
        while not done.is_set() and time.monotonic() < deadline:
            # Again and again, in case the worker was still starting the kernel.
            process = getattr(getattr(client.km, "provisioner", None), "process", None)
            if process is not None and process.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(process.pid, signal.SIGKILL)   # the kernel leads a session of its own
            done.wait(0.1)
        raise
    if failed:
        raise failed[0]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def headline_numbers(records_path: str | Path | None = None) -> list[dict[str, Any]]:
    """Per problem, the best recorded speed-up of ours per tier (:func:`results.best_by_tier`)."""
    rows = []
    for key in problems.names():
        problem = problems.get(key)
        entry: dict[str, Any] = {"problem": key, "title": problem.title, "device": "", "date": "",
                                 "eager_ms": None, "eager_tf32": None,
                                 "best": {t: None for t in TIERS}, "error": ""}
        rows.append(entry)
        try:
            rec = recorded(problem, device="", path=records_path)
        except RecordsError as e:    # one unreadable file must not lose the whole index
            entry["error"] = str(e)
            continue
        eager = rec[rec["variant"] == "eager"].sort_values("timestamp")
        if eager.empty:
            entry["error"] = "no recorded run at the default sizes"
            continue
        device = eager["device"].iloc[-1]
        rec = rec[rec["device"] == device]
        best = best_by_tier(rec, problem)
        tf32 = rec[rec["variant"] == "eager_tf32"]
        shown = pd.DataFrame([eager.iloc[-1], *best.values(), *(r for _, r in tf32.iterrows())])
        entry.update(device=device, date=caption(shown).removeprefix(f"{device}, "),
                     eager_ms=round(float(eager["median_ms"].iloc[-1]), 4))
        if not tf32.empty:
            entry["eager_tf32"] = _pick(tf32.iloc[0])
        for tier, row in best.items():
            entry["best"][tier] = _pick(row)
    return rows


def _pick(row: Any) -> dict[str, Any]:
    return {"variant": row["variant"], "title": row["title"], "tier": row["tier"],
            "ms": round(float(row["median_ms"]), 4), "speedup": float(row["speedup"]),
            "eager_ms": round(float(row["eager_ms"]), 4), "date": f"{row['timestamp']:%Y-%m-%d}",
            "commit": row["commit"], "run_id": row["run_id"]}


def _headline_table(headlines: list[dict[str, Any]]) -> str:
    """The headline numbers as one HTML table, a row per problem and tier."""
    def cell(pick: dict[str, Any] | None) -> str:
        if pick is None:
            return "<td colspan='3'>none of ours qualifies</td>"
        other = "" if pick["tier"] == tier else f" <small>(is {html.escape(pick['tier'])})</small>"
        where = html.escape(f"{pick['date']}, commit {pick['commit']}, eager {pick['eager_ms']:.3f} ms")
        return (f"<td class='num'><b>{pick['speedup']:.2f}&times;</b></td>"
                f"<td class='num'>{pick['ms']:.3f}</td>"
                f"<td><code>{html.escape(pick['variant'])}</code>{other}<br><small>{where}</small></td>")

    body = []
    for h in headlines:
        rows = 1 if h["error"] else len(TIERS)
        head = (f"<th rowspan='{rows}'>{html.escape(h['problem'])}<br><small>"
                f"{html.escape(h['title'])}</small></th>")
        if h["error"]:
            body.append(f"<tr>{head}<td colspan='5'>{html.escape(h['error'])}</td></tr>")
            continue
        tf32 = h["eager_tf32"]
        ref = ("-" if tf32 is None else
               f"{tf32['speedup']:.2f}&times; ({tf32['ms']:.3f} ms, {html.escape(tf32['tier'])})")
        run = html.escape(f"{h['device']}, {h['date']}")
        for i, tier in enumerate(TIERS):
            lead = (head, f"<td rowspan='{rows}'>{run}<br>eager fp32 {h['eager_ms']:.3f} ms (newest)"
                          f"<br>eager TF32 {ref}</td>") if i == 0 else ("", "")
            body.append(f"<tr>{lead[0]}<td>{tier}</td>{cell(h['best'][tier])}{lead[1]}</tr>")
    return ("<table><thead><tr><th>problem</th><th>precision (at least)</th><th>speed-up</th>"
            "<th>ms</th><th>fastest of ours (its run)</th><th>measured</th>"
            "</tr></thead><tbody>\n" + "\n".join(body) + "\n</tbody></table>")


def index_entries(results: list[ReportResult], out_dir: str | Path) -> list[ReportResult]:
    """Every notebook the index lists, by name: ``results`` and every other numbered notebook of
    their folders, ``kept`` (from ``index.json``) where its report is in ``out_dir``, else ``missing``."""
    out_dir = Path(out_dir)
    done = {r.notebook.name: r for r in results}
    paths: dict[str, Path] = {}
    for folder in dict.fromkeys([r.notebook.parent for r in results] or [NOTEBOOKS]):
        for path in sorted(Path(folder).glob("[0-9][0-9]_*.ipynb")):
            paths.setdefault(path.name, path)
    paths.update({name: r.notebook for name, r in done.items()})
    try:   # an earlier build's entries, by notebook name
        listed = json.loads((out_dir / "index.json").read_text(encoding="utf-8"))
        earlier = {str(n["notebook"]): n for n in listed.get("notebooks", []) if isinstance(n, dict)}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        earlier = {}
    entries = []
    for name in sorted(paths):
        if name in done:
            entries.append(done[name])
            continue
        path = paths[name]
        page = out_dir / f"{path.stem}.html"
        prev = earlier.get(name, {})
        title, summary = prev.get("title") or "", prev.get("summary") or ""
        if not (title and summary) or not page.is_file():
            title, summary = _about(path)
        if not page.is_file():
            entries.append(ReportResult(path, page, title, 0.0, "", summary, status="missing"))
            continue
        built = prev.get("built") or datetime.fromtimestamp(
            page.stat().st_mtime, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        seconds = prev.get("seconds")
        ran_at = prev.get("sizes") if isinstance(prev.get("sizes"), dict) else {}
        entries.append(ReportResult(path, page, title,
                                    float(seconds) if isinstance(seconds, (int, float)) else 0.0,
                                    str(prev.get("error") or ""), summary, status="kept",
                                    built_at=str(built), sizes=ran_at))
    return entries


def write_index(results: list[ReportResult], out_dir: Path,
                headlines: list[dict[str, Any]] | None = None) -> Path:
    """``index.html`` and ``index.json``: every notebook (:func:`index_entries`), the headlines."""
    from nbconvert.filters import markdown2html  # noqa: PLC0415 - heavy, as in _read

    headlines = headline_numbers() if headlines is None else headlines
    when = _now()
    out_dir = Path(out_dir)
    entries = index_entries(results, out_dir)

    def item(r: ReportResult) -> str:
        summary = markdown2html(r.summary).strip().removeprefix("<p>").removesuffix("</p>")
        if r.status == "missing":
            run = html.escape(f"python -m fusedkit report {r.notebook.parent.name}/{r.notebook.name}")
            return (f"<li>{html.escape(r.title)} <small>(<b class='missing'>not built yet</b>: "
                    f"<code>{run}</code>)</small><br>{summary}</li>")
        status = f"{r.seconds:.0f} s"
        if r.status == "kept":
            status = f"earlier build, {html.escape(r.built_at)}, {status}"
        if r.sizes:
            status += f", <b class='sizes'>{html.escape(sizes_line(r.sizes))}</b>"
        if r.error:
            status += f", <b class='failed'>FAILED</b>: {html.escape(r.error)}"
        return (f"<li><a href='{html.escape(r.html.name)}'>{html.escape(r.title)}</a> "
                f"<small>({status})</small><br>{summary}</li>")

    items = "\n".join(item(r) for r in entries)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fusedkit reports</title>
<style>
body{{font-family:system-ui,sans-serif;max-width:64rem;margin:2rem auto;padding:0 1rem;line-height:1.5}}
table{{border-collapse:collapse;font-size:0.92rem}}
th,td{{border:1px solid #ccc;padding:3px 8px;vertical-align:top;text-align:left}}
thead th{{background:#f2f2f2}} td.num{{text-align:right;font-variant-numeric:tabular-nums}}
li{{margin-bottom:0.6rem}} .failed{{color:#b00}} .missing{{color:#a60}} .sizes{{color:#05a}}
code{{font-size:0.9em}}
</style>
</head><body>
<h1>fusedkit reports</h1>
<p>Executed notebooks of the fusedkit workbook, generated {when}. Every page opens offline.
Each ran at KernelBench's sizes unless its line names others (<code>report --sizes</code>).</p>
<ol>
{items}
</ol>
<h2>Headline numbers</h2>
<p>The fastest of our kernels that meets each precision tier (fp32-faithful: within 2&times; eager
fp32's error and KernelBench's 1e-4 tolerance; kb-pass: the 1e-4 tolerance; fast: what its declared precision can explain),
each kernel with its newest measurement in <code>data/records.csv</code>. Speed-ups are taken
within one run, against that run's eager fp32 (TF32 off); PyTorch's own baselines are not
counted as ours.</p>
{_headline_table(headlines)}
</body></html>
"""
    index = out_dir / "index.html"
    paths.replace(paths.target(index), relative_paths(page))
    paths.replace(paths.target(out_dir / "index.json"), relative_paths(json.dumps({
        "generated": when,
        "notebooks": [{"notebook": r.notebook.name,
                       "html": None if r.status == "missing" else r.html.name, "title": r.title,
                       "summary": r.summary, "status": r.status,
                       "built": r.built_at or None,
                       "seconds": None if r.status == "missing" else round(r.seconds, 1),
                       "error": r.error,
                       "sizes": r.sizes}   # {}: KernelBench's; else those its pickers held
                      for r in entries],
        "headlines": headlines}, indent=1, allow_nan=False)))
    return index


def build_reports(out_dir: str | Path = REPO / "reports", notebooks: list[Path] | None = None,
                  *, timeout: int = 600,
                  sizes: Mapping[str, Mapping[str, object]] | None = None) -> list[ReportResult]:
    """Execute ``notebooks`` (default: all) at ``sizes`` (problem -> {dimension: value}) and write
    their reports and the index; what cannot run is refused in one line before any runs."""
    chosen: dict[str, Sizes] = {}   # each problem's sizes by its own rules, every dimension given
    for name, given in (sizes or {}).items():
        problem = problems.get(name)
        if problem.key in chosen:
            raise problems.SizeError(f"sizes name {problem.key} twice; allowed: each problem once")
        chosen[problem.key] = problem.sizes(given)
    notebooks = [Path(p) for p in notebooks or notebook_paths()]
    seen: dict[str, Path] = {}
    for p in notebooks:   # one report per file name: a second would be written over the first
        first = seen.setdefault(p.name, p)
        if first is not p:
            why = ("is given twice" + (f" ({str(first)!r} is the same file)" if str(first) != str(p) else "")
                   if os.path.realpath(first) == os.path.realpath(p) else
                   f"has the same name as {str(first)!r}: both would write {p.stem}.html")
            raise ValueError(f"notebook={str(p)!r} {why}; allowed: each notebook once, and "
                             "notebooks of distinct names")
    if chosen:
        for path in notebooks:
            try:
                nb = _read(path)
            except Exception as e:  # noqa: BLE001 - one line, whatever nbformat raised
                raise ParametersError(f"{path.name} cannot be read as a notebook: "
                                      f"{type(e).__name__}") from None
            inject_sizes(nb, chosen, name=path.name)
    out_dir = paths.check(out_dir, "a folder for the reports, existing or to be created", folder=True)
    for name in [*(f"{p.stem}.html" for p in notebooks), "index.html", "index.json"]:
        paths.check(out_dir / name, "a folder whose reports are regular files (or not there yet)")
    out_dir.mkdir(parents=True, exist_ok=True)
    headlines = headline_numbers()   # once: the records do not change while notebooks run
    results: list[ReportResult] = []
    for path in tqdm(notebooks, desc="notebooks", unit="nb", disable=None):
        try:
            results.append(execute_notebook(Path(path), out_dir, timeout=timeout, sizes=chosen))
        except KeyboardInterrupt as e:   # one line: what is kept
            how, n = interrupts.signal_name(e), len(results)
            names = ", ".join(r.html.name for r in results)
            kept = (f"{n} finished before it and {'is' if n == 1 else 'are'} kept in {out_dir} ({names}), "
                    f"listed in {out_dir / 'index.html'}" if results else "no report finished before it")
            raise interrupts.Interrupted(f"{interrupts.stopped_by(how)} while running {path.name}, whose "
                                         f"report was not written; {kept}", how) from None
        write_index(results, out_dir, headlines)   # after each, so a crash keeps the finished ones
    return results
