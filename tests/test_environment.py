"""Set-up files agree with each other, and the commands the README promises exist."""

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


# The filter's arguments, as the Makefile gives them (one place: NBSTRIPOUT_ARGS).
STRIP_ARGS = re.search(r"^NBSTRIPOUT_ARGS = (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()


def _req(spec: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", spec)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def test_environment_yml_agrees_with_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    want = dict(_req(s) for s in py["dependencies"])
    for extra in py["optional-dependencies"].values():
        want.update(_req(s) for s in extra)
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    got = dict(_req(s) for s in pip if not s.startswith("-e"))
    assert got == want
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert py["requires-python"].replace(" ", "") in python   # same lower bound


def test_readme_names_the_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    for cmd in ("make report", "make test", "make lab"):
        assert f"`{cmd}`" in readme or f"\n{cmd}\n" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)
    makefile = (ROOT / "Makefile").read_text()
    for target in ("report:", "test:", "lab:"):
        assert target in makefile


# --- notebooks in git without outputs --------------------------------------------------------

def test_nbstripout_is_a_dependency_and_the_makefile_sets_it_up():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "nbstripout" in dict(_req(s) for s in py["dependencies"])   # environment.yml: see above
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^env: .*git-filter", makefile, re.M)
    assert (ROOT / ".gitattributes").read_text().count("*.ipynb filter=nbstripout diff=ipynb") == 1


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout


def _executed(path: Path) -> None:
    """What a run in JupyterLab saves: outputs, execution counts and the widgets' state."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = i + 1
        cell.outputs = [nbformat.v4.new_output("stream", text=f"output {i}\n")]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "version_major": 2, "version_minor": 0}}
    nbformat.write(nb, path)


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="no make or git")
def test_notebooks_in_git_carry_no_outputs_open_unchanged_and_leave_git_clean(tmp_path):
    """JupyterLab's autosave wrote executed notebooks into the tracked files (+19,309 lines after
    one session); it writes the kernel's language_info into a notebook that lacks it, so every
    notebook opened marked unsaved, untouched. With the Makefile's filter (its smudge side and
    ``make git-filter`` writing language_info into the working files) and make lab's save hook
    (fusedkit.notebook_git), git status stays clean; a real edit still shows, unstaged."""
    from fusedkit.notebook_git import kernel_language_info, refresh_index

    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    _git(repo, "init", "-q")
    shutil.copy(ROOT / ".gitattributes", repo)
    path = repo / "notebooks" / "01_demo.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Demo"),
                                         nbformat.v4.new_code_cell("print(1)")])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nbformat.write(nb, path)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "before the filter")   # as a fresh clone's files: no language_info
    subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), f"PY={sys.executable}", "git-filter"],
                   cwd=repo, check=True)
    assert " ".join(STRIP_ARGS) in _git(repo, "config", "filter.nbstripout.clean")
    assert nbformat.read(path, as_version=4).metadata.language_info == kernel_language_info()
    assert _git(repo, "status", "--porcelain") == ""
    _executed(path)
    refresh_index(os_path=str(path), model=None, contents_manager=None)
    assert _git(repo, "status", "--porcelain") == ""
    assert "output 0" in path.read_text()               # the file keeps its outputs
    assert "language_info" not in _git(repo, "show", "HEAD:notebooks/01_demo.ipynb")
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = "# Demo, edited"
    nbformat.write(nb, path)
    refresh_index(os_path=str(path))
    assert _git(repo, "status", "--porcelain") == " M notebooks/01_demo.ipynb\n"
    assert _git(repo, "diff", "--cached") == ""
    _git(repo, "checkout", "--", "notebooks/01_demo.ipynb")   # the smudge side
    assert nbformat.read(path, as_version=4).metadata.language_info == kernel_language_info()
    assert _git(repo, "status", "--porcelain") == ""


def test_make_lab_refreshes_git_after_each_save():
    makefile = (ROOT / "Makefile").read_text()
    assert "--ContentsManager.post_save_hook=fusedkit.notebook_git.refresh_index" in makefile


def test_committed_notebooks_are_what_the_filter_writes():
    """A notebook stored in another layout (key order, missing fields) than the one nbformat
    and JupyterLab write would show as changed after any save, outputs or not."""
    paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    out = subprocess.run([sys.executable, "-m", "nbstripout", *STRIP_ARGS, "-t", *map(str, paths)],
                         capture_output=True, text=True, check=True).stdout
    decoder, at, stripped = json.JSONDecoder(), 0, []
    while at < len(out):   # one notebook's JSON after another
        end = decoder.raw_decode(out, at)[1]
        stripped.append(out[at:end] + "\n")
        at = end + 1
    assert len(stripped) == len(paths)
    for path, text in zip(paths, stripped):
        # What git stores (the working file has this machine's language_info: notebook_git's smudge).
        stored = subprocess.run(["git", "show", f":{path.relative_to(ROOT)}"], cwd=ROOT,
                                capture_output=True, text=True)
        assert text == (stored.stdout if stored.returncode == 0 else path.read_text(encoding="utf-8")), (
            f"{path.name} is not stored as git's filter writes it; rewrite it with "
            f"python -m nbstripout {' '.join(STRIP_ARGS)} {path.relative_to(ROOT)}")


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_committed_notebooks_name_the_kernel_as_jupyterlab_does(path):
    """JupyterLab writes the running kernel's spec on every save: a committed display name other
    than ipykernel's own would show as a change after any save."""
    spec = json.loads(path.read_text(encoding="utf-8"))["metadata"]["kernelspec"]
    assert spec == {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
