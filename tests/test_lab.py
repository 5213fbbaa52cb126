"""Interactive use in a real JupyterLab, driven through headless Chromium by Playwright, as a
reader would: open a problem notebook (not marked unsaved), run the cells of its widgets, change
a size in the explorer, press Run and read the verdict, cancel a long run with its Cancel button,
save, close and reopen it while its kernel lives (the live widgets, no unsaved mark), restart the
kernel (the widgets say they are dead and take no input), then reopen it after its kernel has
ended (each widget's picture, no unsaved mark, no error line).

JupyterLab serves a fresh clone of this repository (its committed notebooks) with the git
filter ``make env`` sets up and ``make lab``'s save hook, so the test can end as a person's
session should: ``git status`` clean. The clone keeps the developer's own notebooks out of it.
JupyterLab's settings come from the environment (``make env`` writes the widget-state
setting, off, into its overrides.json) plus one of this test's own: every cell rendered, not
only those on screen, so that the page can be read whole.

Skips, with the reason, where no Chromium or no Playwright can be had; ``.ci/run`` installs
Chromium, and the test extras bring Playwright, so CI runs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))
                 if p), None)
NOTEBOOK = "notebooks/03_p45.ipynb"
SHOTS = ROOT / ".browser-shots"    # gitignored; the failure's and the reopened page's screenshots
OVERRIDES = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
SAVE_STATE = "@jupyter-widgets/jupyterlab-manager:plugin"

playwright = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed "
                                 "(pip install playwright; the test extras bring it)")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (Debian: apt-get install "
                       "chromium); .ci/run installs it so CI never skips"),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is needed to clone the repository"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a fresh clone; yields (base url, token, clone)."""
    if json.loads(OVERRIDES.read_text() if OVERRIDES.exists() else "{}").get(
            SAVE_STATE, {}).get("saveState") is not False:
        pytest.fail(f"{OVERRIDES} does not turn off saving widget state: run make env")
    tmp = tmp_path_factory.mktemp("lab")
    clone = tmp / "clone"
    _git(tmp, "clone", "--quiet", str(ROOT), str(clone))
    venv = VENV_BIN.parent
    subprocess.run(["make", "-s", "git-filter", f"VENV={venv}"], cwd=clone, check=True)
    settings = tmp / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    news = tmp / "settings" / "@jupyterlab" / "apputils-extension"   # no "news?" toast over the page
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    port, token = _free_port(), "fusedkit-test"
    env = dict(os.environ, PYTHONPATH=str(clone), JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
               JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), MPLBACKEND="module://matplotlib_inline.backend_inline",
               # its own workspace: not the tabs an earlier session left open in ~/.jupyter
               JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"))
    log = open(tmp / "lab.log", "w")
    cmd = [str(VENV_BIN / "jupyter"), "lab", "--no-browser", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={clone}",
           "--ContentsManager.post_save_hook=fusedkit.notebook_git.refresh_index"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    server = subprocess.Popen(cmd, cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    pytest.fail(f"JupyterLab exited: {(tmp / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer within a minute")
        yield base, token, clone
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _kernels(base: str, token: str) -> list[dict]:
    with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=10) as r:
        return json.load(r)


def _shut_down_kernels(base: str, token: str) -> None:
    for k in _kernels(base, token):
        req = urllib.request.Request(f"{base}/api/kernels/{k['id']}?token={token}", method="DELETE")
        urllib.request.urlopen(req, timeout=30)


def _open(page, base: str, token: str, notebook: str = NOTEBOOK) -> None:
    """Open the notebook; answer JupyterLab's kernel dialog (shown when the kernel specs load
    after the notebook) with its preselected Python 3, as a reader would."""
    page.goto(f"{base}/lab/tree/{notebook}?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell:visible", timeout=120_000)
    # The kernel's dialog, or a kernel already there (the status bar names it, idle; before it
    # has one the bar says "No Kernel" and the notebook may read idle and unsaved a moment).
    page.wait_for_function("() => document.querySelector('.jp-Dialog') !== null || "
                           "(/\\| Idle/.test(document.body.innerText) && "
                           "!/No Kernel/.test(document.body.innerText))", timeout=60_000)
    select = page.locator(".jp-Dialog button", has_text="Select").first
    if select.is_visible():
        select.click()
    # The visible one: a tab JupyterLab restores from an earlier session has its own, hidden.
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']:visible").first.wait_for(
        timeout=60_000)


def _wait_idle(page, timeout_s: float) -> None:
    """Until every code cell shown has run (no "[*]" or "[ ]" prompt left) and the kernel is idle."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = page.evaluate("""() => Array.from(document.querySelectorAll(
            '.jp-CodeCell .jp-InputPrompt')).filter(p => p.offsetParent !== null && /\\[[ *]\\]/.test(p.textContent)).length""")
        idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']:visible").count()
        if pending == 0 and idle:
            return
        time.sleep(1)
    raise AssertionError(f"the notebook was still running after {timeout_s:.0f} s")


def _tab(page, notebook: str):
    return page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=Path(notebook).name)


def _dirty(page, notebook: str) -> bool:
    """Whether the notebook's tab is marked unsaved (JupyterLab's dot in place of the close icon)."""
    return "jp-mod-dirty" in (_tab(page, notebook).first.get_attribute("class") or "")


def _save(page, notebook: str) -> None:
    """File > Save Notebook (Ctrl+S is the widget's own while a box has the focus), until the tab
    is no longer marked unsaved."""
    page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Save Notebook").first.click()
    deadline = time.monotonic() + 30
    while _dirty(page, notebook):
        assert time.monotonic() < deadline, "the notebook was not saved"
        time.sleep(0.2)


def _close_without_a_question(page, notebook: str) -> None:
    """Close the notebook's tab, as a reader does with its close icon; fail on "Save changes?"."""
    _tab(page, notebook).first.locator(".lm-TabBar-tabCloseIcon").click()
    deadline = time.monotonic() + 30
    while _tab(page, notebook).count() and not page.locator(".jp-Dialog").count():
        assert time.monotonic() < deadline, "the tab did not close"
        time.sleep(0.2)
    assert page.locator(".jp-Dialog").count() == 0, page.locator(".jp-Dialog").inner_text()


def _message(explorer) -> str:
    return explorer.locator(".widget-html-content").all_inner_texts()


def _wait_for_message(explorer, text: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen = " | ".join(_message(explorer))
        if text in seen:
            return seen
        time.sleep(0.25)
    raise AssertionError(f"no {text!r} in the explorer within {timeout_s:.0f} s; it shows: "
                         f"{' | '.join(_message(explorer))}")


def _set_size(explorer, name: str, value: int) -> None:
    box = explorer.locator(f".widget-inline-hbox:has(label:text-is('{name}')) input").first
    box.fill(str(value))
    box.press("Enter")


def _choose(explorer, wanted) -> None:
    """Choose the variants whose labels ``wanted`` accepts, as a reader does: a click on the
    first, ctrl-clicks on the others."""
    options = explorer.locator("select[multiple] option")
    labels = [" ".join(t.split()) for t in options.all_inner_texts()]   # ipywidgets writes nbsp
    picked = [i for i, label in enumerate(labels) if wanted(label)]
    assert picked, labels
    for n, i in enumerate(picked):
        options.nth(i).click(modifiers=["Control"] if n else [])
    chosen = explorer.locator("select[multiple]").evaluate(
        "s => Array.from(s.selectedOptions).length")
    assert chosen == len(picked), (chosen, [labels[i] for i in picked])


def test_a_reader_runs_changes_cancels_and_reopens(lab, tmp_path):
    base, token, clone = lab
    SHOTS.mkdir(exist_ok=True)
    sync = playwright.sync_playwright
    with sync() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            _open(page, base, token)
            time.sleep(3)   # as a reader looks: a mark that stays, not one of the page's first moments
            assert not _dirty(page, NOTEBOOK), "opened untouched, marked unsaved"
            # The cells the widgets need, as a reader runs them (Shift+Enter): the parameters, the
            # picker and the mode, then the explorer's cell. The rest of the notebook runs in the
            # report build (tests/test_browser.py): no notebook runs twice in a session.
            page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-editor").first.click()
            t0 = time.monotonic()
            for _ in range(3):
                page.keyboard.press("Shift+Enter")
            cell = page.locator(".jp-Notebook .jp-CodeCell", has_text="LadderExplorer(problem, mode)")
            cell.locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")
            deadline = time.monotonic() + 300
            while not re.fullmatch(r"\[\d+\]:", cell.locator(".jp-InputPrompt").inner_text().strip()):
                assert time.monotonic() < deadline, "the explorer's cell did not finish within 300 s"
                time.sleep(0.5)
            ran_s = time.monotonic() - t0
            outputs = " ".join(page.locator(".jp-OutputArea-output").all_inner_texts())
            assert "Traceback" not in outputs and "Error displaying widget" not in outputs
            explorer = page.locator(".jp-OutputArea-output:has(button.widget-button:has-text('Cancel'))").last
            _wait_for_message(explorer, "done:", 10)

            # A size changed, Run pressed: a verdict for the new sizes.
            _set_size(explorer, "batch_size", 23)
            _choose(explorer, lambda label: ": eager (" in label or ": triton_fused_lse_ieee (" in label)
            run = explorer.locator("button.widget-button", has_text="Run")
            cancel = explorer.locator("button.widget-button", has_text="Cancel")
            run.click()
            _wait_for_message(explorer, "done: 2 step(s)", 120)   # the two chosen, nothing more
            shown = " ".join(" ".join(explorer.locator(".jp-OutputArea-output").all_inner_texts()).split())
            assert "at batch_size=23," in shown and "checked on this CPU" in shown, shown[-3000:]

            # A long run, cancelled with the button. (What the status says of steps left out, of
            # refused sizes and of the kernel's interrupt is tests/test_widgets_run.py's, on the
            # same widget; here the page as a reader clicks it.)
            _set_size(explorer, "batch_size", 200)
            _choose(explorer, lambda label: "Triton" in label)
            run.click()
            _wait_for_message(explorer, "running", 30)
            assert run.is_disabled() and cancel.is_enabled()
            time.sleep(1)
            cancel.click()
            shown = _wait_for_message(explorer, "interrupted: nothing recorded", 120)
            assert "done:" not in shown
            assert run.is_enabled() and cancel.is_disabled()

            # Save, close, reopen while the kernel lives: the live widgets again, and nothing marked
            # unsaved (with widget state saved, the widget manager marked the notebook changed for
            # each widget it loaded, from the file or from the kernel).
            # The explorer's picture is redrawn a quarter of a second after its last change.
            page.wait_for_function("() => Array.from(document.querySelectorAll("
                                   "'.fusedkit-widget-picture')).some(p => p.innerHTML.includes("
                                   "'interrupted: nothing recorded'))", timeout=30_000)
            _save(page, NOTEBOOK)
            saved = json.loads((clone / NOTEBOOK).read_text())
            assert not saved["metadata"].get("widgets"), "widget state was saved"
            pictures = [o for c in saved["cells"] for o in c.get("outputs", [])
                        if o.get("metadata", {}).get("fusedkit_widget_picture")]
            assert len(pictures) == 2, len(pictures)   # the picker's and the explorer's
            assert "interrupted: nothing recorded" in "".join(pictures[-1]["data"]["text/html"])
            _close_without_a_question(page, NOTEBOOK)
            _open(page, base, token)
            explorer = page.locator(".jp-OutputArea-output:has(button.widget-button:has-text('Cancel'))").last
            explorer.locator("button.widget-button", has_text="Run").wait_for(timeout=60_000)
            time.sleep(3)   # whatever the widget manager does once it has loaded them
            assert not _dirty(page, NOTEBOOK), "reopened beside its live kernel, marked unsaved"
            assert explorer.locator("button.widget-button", has_text="Run").is_enabled()
            assert page.locator(".fusedkit-widget-picture:visible").count() == 0

            # The reader restarts the kernel: the widgets stay drawn, say they are dead, take no
            # typing and no longer show their last status line (it read "sizes accepted").
            page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Restart Kernel").first.click()
            page.locator(".jp-Dialog button", has_text="Restart").first.click(timeout=30_000)
            stale = page.locator(".jp-OutputArea-output .fusedkit-stale-note").first
            stale.wait_for(state="visible", timeout=60_000)
            assert "The kernel that ran this cell has stopped" in stale.inner_text()
            picker = page.locator(".fusedkit-size-picker-p45:visible").first
            assert picker.locator("input").first.evaluate("e => getComputedStyle(e).pointerEvents") == "none"
            assert not picker.locator(".fusedkit-status").first.is_visible()
            page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']:visible").first.wait_for(
                timeout=60_000)        # the new kernel is up before the tab closes
            _close_without_a_question(page, NOTEBOOK)

            # Its kernel ended, reopened: each widget's picture, as it last looked, says to run its
            # cell; no error line, nothing marked unsaved, and closing asks nothing.
            _shut_down_kernels(base, token)
            _open(page, base, token)
            page.wait_for_function("() => document.body.innerText.includes("
                                   "'interrupted: nothing recorded')", timeout=60_000)
            time.sleep(3)   # ipywidgets gives up on the missing models after 2 s
            body = page.inner_text("body")
            assert "Error displaying widget" not in body and "Run this cell to use it" in body
            assert page.locator(".fusedkit-widget-picture:visible").count() == 2
            assert not _dirty(page, NOTEBOOK), "reopened after its kernel ended, marked unsaved"
            page.screenshot(path=str(SHOTS / "lab-reopened.png"))
            _close_without_a_question(page, NOTEBOOK)
        except BaseException:
            page.screenshot(path=str(SHOTS / "lab-failure.png"))   # for a human to look at
            raise
        finally:
            browser.close()
    # The session wrote outputs and widget state into the notebook; git sees none of it.
    assert _git(clone, "status", "--porcelain") == ""
    assert "outputs" in (clone / NOTEBOOK).read_text() and ran_s > 0
