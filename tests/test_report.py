"""Reports that read well: no local paths, an index of every notebook however few are
rebuilt, widgets captioned as snapshots, and ``make lab`` that starts as root."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from fusedkit import report, static_widgets

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


# -- no absolute local paths -------------------------------------------------------------

def test_relative_paths_rewrites_this_machines_folders():
    home, tmp = str(Path.home()), tempfile.gettempdir()
    stdlib = sysconfig.get_paths()["stdlib"]
    fix = report.relative_paths
    assert fix(f"from {ROOT}/data/records.csv (speed-up)") == "from ./data/records.csv (speed-up)"
    assert fix(f"<pre>{ROOT}</pre>") == "<pre>.</pre>"
    assert fix(f"file://{ROOT}/build/x.png") == "./build/x.png"
    assert fix(f'File "{stdlib}/json/decoder.py", line 3') == \
        f'File "{Path(stdlib).name}/json/decoder.py", line 3'
    if not str(ROOT).startswith(home + os.sep):
        assert fix(f"{home}/.cache/x") == "~/.cache/x"
    assert fix(f"{tmp}/pytest-1/out") == "$TMPDIR/pytest-1/out"
    # Only whole components: a sibling folder, or /tmp inside another path, stays.
    # (The sibling may itself lie under the temporary folder, as a CI clone can.)
    assert not fix(f"{ROOT}2/x").startswith(".")
    assert fix(f"/var{tmp}/y") == f"/var{tmp}/y"
    # Inlined figures are never touched, whatever their base64 happens to spell.
    uri = f"data:image/png;base64,AAAA{tmp}{ROOT}+/=="
    assert fix(f"<img src='{uri}'> {ROOT}/a") == f"<img src='{uri}'> ./a"


def _notebook(path: Path, *cells: str, summary: str = "") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {path.stem}\n\n{summary or 'About ' + path.stem}")]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, path)
    return path


def _absolute_paths(text: str) -> list[str]:
    roots = {str(ROOT), str(Path.home()), tempfile.gettempdir(), sysconfig.get_paths()["stdlib"]}
    return [r for r in roots if re.search(r"(?<![\w.~/-])" + re.escape(r) + r"(?![\w.-])", text)]


@pytest.mark.slow
def test_a_report_run_names_no_local_path_times_a_cell_out_and_stops_at_ctrl_c(tmp_path):
    """``fusedkit report`` in a process of its own, its TMPDIR 120 characters long (it ended in a
    zmq traceback: "ipc path ... is longer than 107"), on three notebooks: 01 prints this
    machine's paths in a cell, a widget and a stdlib traceback, and neither its page nor the
    index names them; 02 has a cell past ``--timeout``, said in one line (it was 7, with the
    kernel's ZMQ traceback); 03 is stopped by Ctrl-C (which marked it "FAILED: AssertionError:"
    and went on): one line, exit 2, the finished reports and the index kept, none for 03, its
    kernel gone. Nothing else on stderr (every kernel warned "TCP without encryption")."""
    pid = tmp_path / "kernel.pid"
    nbs = [_notebook(tmp_path / "01_paths.ipynb",
                     f"import pathlib, tempfile\nrecords = {str(ROOT / 'data' / 'records.csv')!r}\n"
                     "print('records from', records)\nprint(pathlib.Path.home() / 'x')\n"
                     "print(tempfile.gettempdir() + '/y')",
                     "import ipywidgets as w\nout = w.Output()\nout.append_stdout(f'in {records}')\nout",
                     "import json\njson.loads('{')"),
           _notebook(tmp_path / "02_sleeps.ipynb", "1 + 1", "import time\ntime.sleep(30)"),
           _notebook(tmp_path / "03_stopped.ipynb", f"import os\nopen({str(pid)!r}, 'w').write(str(os.getpid()))",
                     "import time\ntime.sleep(60)")]
    tmpdir = tmp_path / ("t" * 120)
    tmpdir.mkdir()
    out = tmp_path / "out"
    child = subprocess.Popen([sys.executable, "-m", "fusedkit", "report", "--out", str(out), "--timeout", "2",
                              *map(str, nbs)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "TMPDIR": str(tmpdir), "FUSEDKIT_DEBUG": "",
                                             "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 240
        while not pid.exists() or not pid.read_text():
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 2 and stdout == "", (stdout, stderr)
    assert stderr.strip().splitlines() == [
        f"interrupted while running 03_stopped.ipynb, whose report was not written; 2 finished before "
        f"it and are kept in {out} (01_paths.html, 02_sleeps.html), listed in {out / 'index.html'}"]
    listed = {n["notebook"]: n for n in json.loads((out / "index.json").read_text())["notebooks"]}
    assert "JSONDecodeError" in listed["01_paths.ipynb"]["error"]
    assert listed["02_sleeps.ipynb"]["error"] == ("code cell 2 of 2 ran longer than the 2 s allowed per "
                                                  "cell (--timeout); the cells after it did not run")
    assert listed["03_stopped.ipynb"]["status"] == "missing" and not (out / "03_stopped.html").exists()
    page = (out / "01_paths.html").read_text()
    assert "records from ./data/records.csv" in page and "in ./data/records.csv" in page
    assert "json/decoder.py" in page and "$TMPDIR/y" in page       # the traceback is still there
    for text in (page, (out / "index.html").read_text(), (out / "index.json").read_text()):
        assert not _absolute_paths(text), _absolute_paths(text)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".ipynb") == [p.name for p in nbs]
    time.sleep(0.5)
    kernel = Path(f"/proc/{pid.read_text()}")
    assert not kernel.exists() or "zombie" in (kernel / "status").read_text()


# -- the index lists every notebook ------------------------------------------------------

def test_rebuilding_one_notebook_keeps_every_notebook_in_the_index(tmp_path):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    paths = [_notebook(nbs / f"0{i}_step{i}.ipynb", f"print({i})", summary=f"Summary *{i}*.")
             for i in (1, 2, 3)]
    out = tmp_path / "reports"
    out.mkdir()
    built = [report.ReportResult(p, out / f"{p.stem}.html", p.stem, 10.0 + i, "", f"Summary *{i}*.",
                                 built_at="2026-12-05 10:00 UTC") for i, p in enumerate(paths, 1)]
    for r in built:
        r.html.write_text("<html></html>")
    report.write_index(built, out, headlines=[])
    before = json.loads((out / "index.json").read_text())["notebooks"]
    rebuilt = report.ReportResult(paths[1], out / "02_step2.html", "step2", 1.0, "", "Summary *2*.")
    report.write_index([rebuilt], out, headlines=[])              # rebuild only 02
    listed = json.loads((out / "index.json").read_text())["notebooks"]
    assert [n["notebook"] for n in listed] == [p.name for p in paths]
    assert [n["status"] for n in listed] == ["kept", "built", "kept"]
    for old, new in zip(before, listed):
        assert new["summary"] == old["summary"] and new["html"] == old["html"]
    assert listed[0]["built"] == before[0]["built"] and listed[0]["seconds"] == before[0]["seconds"]
    index = (out / "index.html").read_text()
    assert all(f"href='{p.stem}.html'" in index for p in paths)
    assert index.count("earlier build") == 2 and "<em>1</em>" in index and "<em>3</em>" in index

    # A notebook with no report in the folder yet is listed, marked, and not linked.
    (out / "03_step3.html").unlink()
    _notebook(nbs / "04_new.ipynb", "print(4)", summary="A new one.")
    report.write_index([rebuilt], out, headlines=[])
    listed = {n["notebook"]: n for n in json.loads((out / "index.json").read_text())["notebooks"]}
    assert list(listed) == ["01_step1.ipynb", "02_step2.ipynb", "03_step3.ipynb", "04_new.ipynb"]
    assert listed["03_step3.ipynb"]["status"] == listed["04_new.ipynb"]["status"] == "missing"
    assert listed["04_new.ipynb"]["html"] is None and listed["04_new.ipynb"]["summary"] == "A new one."
    index = (out / "index.html").read_text()
    assert index.count("not built yet") == 2 and "href='04_new.html'" not in index
    assert "python -m fusedkit report notebooks/04_new.ipynb" in index


def test_index_of_one_rebuilt_workbook_notebook_lists_all_of_them(tmp_path):
    # The real notebooks/ folder, nothing executed: one "rebuilt", one earlier report kept.
    paths = report.notebook_paths()
    (tmp_path / f"{paths[0].stem}.html").write_text("<html></html>")
    done = report.ReportResult(paths[2], tmp_path / f"{paths[2].stem}.html", "T", 3.0, "", "s")
    entries = report.index_entries([done], tmp_path)
    assert [e.notebook.name for e in entries] == [p.name for p in paths]
    status = {e.notebook.name: e.status for e in entries}
    assert status[paths[0].name] == "kept" and status[paths[2].name] == "built"
    assert all(status[p.name] == "missing" for p in paths if p not in (paths[0], paths[2]))
    assert all(e.title and e.summary for e in entries)      # read from the notebooks themselves


def test_an_unreadable_earlier_index_is_ignored(tmp_path):
    (tmp_path / "index.json").write_text("{not json")
    res = report.ReportResult(tmp_path / "01_x.ipynb", tmp_path / "01_x.html", "X", 1.0, "", "x")
    report.write_index([res], tmp_path, headlines=[])
    assert [n["notebook"] for n in json.loads((tmp_path / "index.json").read_text())["notebooks"]] \
        == ["01_x.ipynb"]


# -- widgets drawn from their state say they are snapshots -------------------------------

def _widget_nb(models: dict, top: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    state = {k: {"model_name": n, "model_module": "@jupyter-widgets/controls", "state": st}
             for k, (n, st) in models.items()}
    nb.metadata["widgets"] = {static_widgets.WIDGET_STATE: {"state": state, "version_major": 2,
                                                            "version_minor": 0}}
    view = {"version_major": 2, "version_minor": 0, "model_id": top}
    nb.cells = [nbformat.v4.new_code_cell("w", outputs=[nbformat.v4.new_output(
        "display_data", data={static_widgets.WIDGET_VIEW: view, "text/plain": "VBox(...)"})])]
    return nb


def test_static_widgets_are_captioned_and_fit_their_column():
    wide = "<table><tr>" + "<td>cell</td>" * 80 + "</tr></table>"
    models = {
        "box": ("VBoxModel", {"children": ["IPY_MODEL_row", "IPY_MODEL_out", "IPY_MODEL_many"]}),
        "row": ("HBoxModel", {"children": ["IPY_MODEL_n"], "layout": "IPY_MODEL_wrap"}),
        "wrap": ("LayoutModel", {"flex_flow": "row wrap", "width": None}),
        "n": ("IntTextModel", {"value": 3, "description": "n"}),
        "out": ("OutputModel", {"outputs": [{"output_type": "display_data", "metadata": {},
                                            "data": {"text/html": wide}}]}),
        "many": ("SelectMultipleModel", {"_options_labels": ["a"], "index": [0],
                                         "layout": "IPY_MODEL_fixed"}),
        "fixed": ("LayoutModel", {"width": "520px", "max_width": "100%"}),
    }
    body, _ = report.offline_exporter().from_notebook_node(_widget_nb(models, "box"))
    assert len(re.findall(r"class=[\"']fk-snapshot-note", body)) == 1   # one caption per widget
    assert static_widgets.SNAPSHOT_NOTE in body
    assert "snapshot" in static_widgets.SNAPSHOT_NOTE.lower() and "notebook" in static_widgets.SNAPSHOT_NOTE
    assert "flex-flow:row wrap" in body                          # the stored layout is kept
    assert "width:520px;max-width:100%" in body
    assert re.search(r"class=[\"']fk-widget fk-output[\"'] style=[\"'][^\"']*overflow-x:auto", body)


# -- make lab -----------------------------------------------------------------------------

def _make_lab(tmp_path: Path, uid: str) -> str:
    """The command ``make lab`` would run when ``id -u`` says ``uid`` (nothing started)."""
    fake = tmp_path / f"uid{uid}"
    fake.mkdir()
    (fake / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (fake / "id").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    # -o: take the environment as built, so only the lab command itself is printed.
    out = subprocess.run(["make", "-n", "-o", "env", "-o", ".venv/.installed", "lab"], cwd=ROOT,
                         env=env, capture_output=True, text=True, check=True).stdout
    return next(ln for ln in out.splitlines() if "jupyter lab" in ln)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_lab_serves_the_repository_opens_the_notebooks_and_allows_root_only_as_root(tmp_path):
    """It served notebooks/ (the file browser could not reach the kernel sources or data/) and
    JupyterLab's "news?" toast covered the notebook; as root it did not start without
    --allow-root. Every option is one JupyterLab takes."""
    from jupyter_server.serverapp import ServerApp
    from jupyter_server.services.contents.manager import ContentsManager

    as_root, as_user = _make_lab(tmp_path, "0"), _make_lab(tmp_path, "1000")
    assert "--allow-root" in as_root and "--allow-root" not in as_user
    options = dict(w.removeprefix("--").split("=", 1) for w in as_root.split() if "=" in w)
    assert options["ServerApp.root_dir"] == "." and options["ContentsManager.preferred_dir"] == "notebooks"
    assert {"root_dir", "allow_root"} <= set(ServerApp.class_trait_names())
    assert {"preferred_dir", "post_save_hook"} <= set(ContentsManager.class_trait_names())
    recipe = subprocess.run(["make", "-n", "-W", "Makefile", "-o", ".venv/.installed",
                             ".venv/share/jupyter/lab/settings/overrides.json"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    settings = json.loads(recipe.split("echo '", 1)[1].split("' >", 1)[0])
    assert settings == {"@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": False},
                        "@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}


# -- sizes: the parameters cell, the injected cell, the sizes a notebook ran at ----------------------

def _with_parameters(path: Path, *cells: str) -> Path:
    """A notebook: a title, a parameters cell (``SIZES = {}``), then ``cells``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {path.stem}\n\nAbout {path.stem}."),
                nbformat.v4.new_code_cell("SIZES = {}", metadata={"tags": ["parameters"]}),
                *map(nbformat.v4.new_code_cell, cells)]
    nbformat.write(nb, path)
    return path


def test_sizes_are_injected_right_after_the_parameters_cell(tmp_path):
    from fusedkit.problems import presets

    path = _with_parameters(tmp_path / "01_x.ipynb", "print(SIZES)", "x = 1")
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_code_cell("y = 2"))          # the parameters cell is third now
    small = {"p12": presets.sizes(report.problems.get("p12"), "small")}
    report.inject_sizes(nb, small)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    at = tags.index(["parameters"])
    assert at == 2 and tags[at + 1] == [report.INJECTED_TAG] and len(nb.cells) == 6
    scope: dict = {}
    exec(nb.cells[at].source + "\n" + nb.cells[at + 1].source, scope)   # the parameters, then ours
    assert scope["SIZES"] == small
    # Injecting again (a notebook saved after an earlier run) replaces the cell, never stacks two.
    other = {"p45": presets.sizes(report.problems.get("p45"), "small")}
    report.inject_sizes(nb, other)
    injected = [c for c in nb.cells if report.INJECTED_TAG in c.metadata.get("tags", [])]
    assert len(nb.cells) == 6 and len(injected) == 1 and "'p45'" in injected[0].source
    assert "'p12'" not in injected[0].source


def test_a_notebook_without_a_parameters_cell_is_refused_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    ok = _with_parameters(tmp_path / "01_ok.ipynb", "1")
    bare = _notebook(tmp_path / "02_bare.ipynb", "1")
    with pytest.raises(report.ParametersError) as e:
        report.build_reports(tmp_path / "out", [ok, bare], sizes={"p12": {"batch_size": 17}})
    assert len(str(e.value).splitlines()) == 1
    assert "02_bare.ipynb has no parameters cell" in str(e.value) and "'parameters'" in str(e.value)
    assert not (tmp_path / "out").exists()
    # Without sizes nothing is injected, so such a notebook runs as it always did.
    nb = nbformat.read(bare, as_version=4)
    assert len(nb.cells) == 2 and report.picked_sizes(nb) == {}


@pytest.mark.parametrize("sizes,phrase", [({"p99": {}}, "problem='p99' is not known"),
                                          ({"p12": {"nope": 3}}, "'nope' is not a size of p12"),
                                          ({"p12": {"batch_size": 0}}, "batch_size=0 is out of range"),
                                          ({"p12": {}, "12": {}}, "sizes name p12 twice")])
def test_bad_sizes_are_refused_before_anything_runs(sizes, phrase, tmp_path, monkeypatch):
    monkeypatch.setattr("fusedkit.report.execute_notebook", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(ValueError, match=re.escape(phrase)):
        report.build_reports(tmp_path / "out", [_with_parameters(tmp_path / "01_x.ipynb")], sizes=sizes)


def test_the_first_picker_of_each_problem_gives_the_sizes_a_notebook_ran_at():
    """Read back from the stored widget state: an explorer's own picker further down does not
    count, and KernelBench's sizes are not named (``report --sizes`` runs of the real notebooks
    are in tests/test_notebooks.py)."""
    from fusedkit.widgets import SizePicker

    def picker(key: str, sizes: dict) -> dict:
        boxes = {f"{key}{d}": ("IntTextModel", {"description": d, "value": v}) for d, v in sizes.items()}
        return {**boxes, key: ("VBoxModel", {"_dom_classes": [SizePicker.DOM_CLASS, f"{SizePicker.DOM_CLASS}-p12"],
                                             "children": [f"IPY_MODEL_{b}" for b in boxes]})}
    small = {"batch_size": 17, "in_features": 33, "out_features": 65}
    defaults = report.problems.get("p12").defaults
    nb = _widget_nb({**picker("first", small), **picker("later", {**small, "batch_size": 5}),
                     "top": ("VBoxModel", {"children": ["IPY_MODEL_first", "IPY_MODEL_later"]})}, "top")
    assert report.picked_sizes(nb) == {"p12": small}
    assert report.not_kernelbench({"p12": small}) == {"p12": small}
    assert report.not_kernelbench({"p12": defaults}) == {}


def test_an_earlier_build_keeps_the_sizes_it_ran_at_in_the_index(tmp_path):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    first, second = (_with_parameters(nbs / f"0{i}_x{i}.ipynb") for i in (1, 2))
    out = tmp_path / "out"
    out.mkdir()
    (out / "01_x1.html").write_text("<html></html>")
    sized = {"p12": {"batch_size": 17, "in_features": 33, "out_features": 65}}
    (out / "index.json").write_text(json.dumps({"notebooks": [
        {"notebook": first.name, "html": "01_x1.html", "title": "X1", "summary": "s", "status": "built",
         "built": "2026-12-02 10:00 UTC", "seconds": 3.0, "error": "", "sizes": sized}]}))
    rebuilt = report.ReportResult(second, out / "02_x2.html", "X2", 1.0, "", "t")
    report.write_index([rebuilt], out, headlines=[])
    listed = {n["notebook"]: n for n in json.loads((out / "index.json").read_text())["notebooks"]}
    assert listed[first.name]["status"] == "kept" and listed[first.name]["sizes"] == sized
    assert listed[second.name]["sizes"] == {}
    page = (out / "index.html").read_text()
    assert page.count("p12 at batch_size=17,in_features=33,out_features=65 (the small, odd preset)") == 1
