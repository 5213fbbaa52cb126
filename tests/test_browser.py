"""The HTML reports, built once from every notebook, checked as files and in a real browser:
headless Chromium, offline, driven over the DevTools protocol (websocket-client, which
jupyter_server already brings in).

The module builds the reports itself (two notebooks at a time, about a minute on 2 cores) into a
temporary folder, checks the files, then opens ``index.html`` and every report with the network
switched off and fails on: a console error or uncaught exception, a request that leaves the machine, a
<script src> or <link href> pointing at the web, an <img> that did not load
(``naturalWidth == 0``), or a widget left as a "Loading widget..." placeholder. At a
1280 x 900 window it also fails on anything cut off: a page wider than the window, or a
table, figure, code block or widget that runs past its box with no scrollbar to reach the
rest; on a code block (``div.fk-code``) that is not visible within the window; on a
widget drawn from its stored state without its "snapshot" caption; and on an absolute
path of the machine that built the reports in a page's text. Screenshots
of each page go to ``.browser-shots/`` (gitignored) for a human to look at.

The six pages together hold at most :data:`MAX_WORDS` words a reader sees (a folded
``<details>`` counts its summary only: tests/visible_words.py), and the README's picture is a
step of notebook 01's page as Chromium draws it (``FUSEDKIT_UPDATE_PICTURE=1`` writes it to
``docs/report-page.png``).

``REPORTS_DIR=reports pytest tests/test_browser.py`` checks reports already built there
(``python -m fusedkit report --out reports``) instead of building them again.

The browser tests skip when no Chromium is installed (``apt-get install chromium``);
``.ci/run`` installs it, so CI never skips them.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import websocket

from fusedkit import report
from visible_words import visible_words

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SHOTS = ROOT / ".browser-shots"
WIDTH, HEIGHT = 1280, 900        # the window every page must fit
SLACK = 2                        # pixels of rounding allowed at the right edge
PREBUILT = os.environ.get("REPORTS_DIR", "")
SHOWS_CODE = ("01_", "02_", "03_")   # the notebooks that show their kernels' code
MAX_WORDS = 40_000
PICTURE = ROOT / "docs" / "report-page.png"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))
                 if p), None)

pytestmark = pytest.mark.slow
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (Debian: apt-get "
                                    "install chromium); .ci/run installs it so CI never skips")
REMOTE_TAG = re.compile(r"<(script|link)[^>]+(src|href)=[\"']?(https?:)?//")

# Run in the page after load: everything a reader would notice is broken.
_PROBE = """(() => {
  const remote = u => /^(https?:)?\\/\\//i.test(u || "");
  return {
    brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                    .map(i => (i.getAttribute("src") || "").slice(0, 80)),
    images: document.images.length,
    remote: [...document.querySelectorAll("script[src], link[href], img[src], iframe[src]")]
              .map(e => e.getAttribute("src") || e.getAttribute("href")).filter(remote),
    placeholders: document.body.innerText.includes("Loading widget") + document.querySelectorAll(
                    'script[type="application/vnd.jupyter.widget-view+json"]').length,
    widgets: [...document.querySelectorAll(".fk-widget")].map(e => e.innerText).join(" | "),
    text: document.body.innerText,
    height: Math.ceil(document.documentElement.scrollHeight),
    figures: [...document.images].map(i => i.getBoundingClientRect())
               .filter(r => r.width > 0 && r.height > 0)
               .map(r => ({x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height})),
    ...fit(),
  };
})()"""

# Run in the page: what does not fit the window. ``name`` says which element, for messages.
_FIT = """const fit = () => {
  const vw = document.documentElement.clientWidth, slack = %(slack)d;
  const name = e => e.tagName.toLowerCase() + (e.className && typeof e.className === "string"
                    ? "." + e.className.trim().split(/\\s+/).join(".") : "")
                  + " '" + (e.innerText || e.getAttribute("alt") || "").trim().slice(0, 50) + "'";
  // The nearest ancestor that clips its content sideways (overflow-x not visible).
  const clipper = e => {
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o !== "visible") return {el: a, scrolls: o === "auto" || o === "scroll"};
    }
    return null;
  };
  const cutOff = [], beyond = [];
  for (const e of document.querySelectorAll("table, pre, img, svg, div.fk-code, .fk-snapshot")) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;            // folded or hidden: not shown
    const c = clipper(e);
    if (c) {
      const box = c.el.getBoundingClientRect();
      if (r.right > box.right + slack && !c.scrolls) cutOff.push(name(e));
      if (c.scrolls && box.right > vw + slack) beyond.push(name(c.el));
    } else if (r.right > vw + slack) {
      beyond.push(name(e));
    }
  }
  const rect = e => { const r = e.getBoundingClientRect();
                      return {width: r.width, height: r.height, left: r.left, right: r.right}; };
  // A widget snapshot fits its output area: no sideways scrolling needed to see it whole.
  const wideWidgets = [...document.querySelectorAll(".fk-snapshot")].filter(e => {
    const area = e.closest(".jp-OutputArea-output") || e.parentElement;
    return e.getBoundingClientRect().right > area.getBoundingClientRect().right + slack
           || area.scrollWidth > area.clientWidth + slack;
  }).map(name);
  return {
    viewport: vw,
    scrollWidth: document.documentElement.scrollWidth,
    cutOff, beyond, wideWidgets,
    code: [...document.querySelectorAll("div.fk-code")].map(rect),
    snapshots: [...document.querySelectorAll(".fk-snapshot")].map(e => {
      const note = e.querySelector(".fk-snapshot-note");
      return note ? {note: note.innerText, ...rect(note)} : {note: "", width: 0, height: 0};
    }),
  };
};
""" % {"slack": SLACK}
_PROBE = _PROBE.replace("(() => {", "(() => {\n" + _FIT, 1)


class Chromium:
    """A headless Chromium and one page of it, spoken to over the DevTools protocol."""

    def __init__(self, binary: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="fusedkit-chromium-")
        # --no-sandbox: containers (and root) have no user namespaces for Chromium's sandbox.
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"{binary} did not start its DevTools endpoint within 30 s")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=10) as r:
            target = json.load(r)
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60,
                                              suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, **params: object) -> dict:
        """Call ``method`` and return its result; events that arrive meanwhile are kept."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, event: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                self.events.append(json.loads(self.ws.recv()))
            except websocket.WebSocketTimeoutException:
                raise TimeoutError(f"no {event} within {timeout} s") from None

    def close(self) -> None:
        if getattr(self, "ws", None):
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def visit(browser: Chromium, page: Path, shot_name: str = "") -> dict:
    """Load ``page`` offline; its probe results plus the console errors and remote requests.

    With ``shot_name``, saves screenshots to SHOTS: the first screen, the whole page
    (scaled) and every figure at full size.
    """
    browser.events.clear()
    browser.send("Page.navigate", url=page.resolve().as_uri())
    browser.wait_for("Page.loadEventFired")
    time.sleep(0.5)   # scripts run on DOMContentLoaded / load get to report their errors
    probe = browser.send("Runtime.evaluate", expression=_PROBE, returnByValue=True)
    found = probe["result"]["value"]
    browser.send("Runtime.evaluate", expression="1")   # drain events raised meanwhile
    errors, requests = [], []
    for e in browser.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
        elif m == "Runtime.exceptionThrown":
            errors.append(p["exceptionDetails"].get("exception", {}).get("description")
                          or p["exceptionDetails"]["text"])
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(f"{p['entry']['text']} {p['entry'].get('url', '')}".strip())
        elif m == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith(("file:", "data:", "blob:", "about:")):
                requests.append(url)
    found.update(errors=errors, requests=requests)
    if not shot_name:
        return found

    SHOTS.mkdir(exist_ok=True)
    top = browser.send("Page.captureScreenshot", format="png")
    (SHOTS / f"{shot_name}.png").write_bytes(base64.b64decode(top["data"]))
    # The whole page, scaled so it stays under Chromium's 16384-pixel texture limit.
    scale = min(1.0, 16000 / max(found["height"], 1))
    full = browser.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": WIDTH, "height": found["height"],
                              "scale": scale})
    (SHOTS / f"{shot_name}-full.png").write_bytes(base64.b64decode(full["data"]))
    for i, box in enumerate(found["figures"], 1):    # every figure at full size
        fig = browser.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                           clip=dict(box, scale=1))
        (SHOTS / f"{shot_name}-fig{i}.png").write_bytes(base64.b64decode(fig["data"]))
    return found


def _assert_clean(found: dict, name: str) -> None:
    assert not found["errors"], f"{name}: console errors {found['errors']}"
    assert not found["requests"], f"{name}: requests to the network {found['requests']}"
    assert not found["remote"], f"{name}: remote scripts or links {found['remote']}"
    assert not found["brokenImages"], f"{name}: images that did not load {found['brokenImages']}"
    assert not found["placeholders"], f"{name}: a widget left as a 'Loading widget' placeholder"


def _local_paths() -> list[str]:
    """Absolute folders of this machine that no report may name."""
    import site  # noqa: PLC0415
    import sysconfig  # noqa: PLC0415

    found = {str(ROOT), str(Path.home()), tempfile.gettempdir(), sysconfig.get_paths()["stdlib"],
             *site.getsitepackages()}
    return sorted(p for p in found if len(p) > 1)


_ABSOLUTE = re.compile(r"(?<![\w.~/-])/(?:home|root|tmp|work|Users|private/var)/[\w.-]+")


def _assert_fits(found: dict, name: str) -> None:
    """Nothing cut off or wider than the 1280-pixel window; code blocks shown whole."""
    assert found["viewport"] == WIDTH, f"{name}: the window is {found['viewport']} px wide"
    assert found["scrollWidth"] <= WIDTH + SLACK, (
        f"{name}: the page is {found['scrollWidth']} px wide at a {WIDTH}-px window; "
        f"past the right edge: {found['beyond']}")
    assert not found["beyond"], f"{name}: past the window's right edge: {found['beyond']}"
    assert not found["cutOff"], f"{name}: cut off with no scrollbar: {found['cutOff']}"
    assert not found["wideWidgets"], f"{name}: widgets wider than their output: {found['wideWidgets']}"
    for box in found["code"]:
        assert box["width"] > 0 and box["height"] > 0, f"{name}: a code block is not visible: {box}"
        assert box["left"] >= 0 and box["right"] <= WIDTH + SLACK, f"{name}: a code block runs off: {box}"


def _assert_no_local_paths(text: str, name: str) -> None:
    for path in _local_paths():
        assert not re.search(r"(?<![\w.~/-])" + re.escape(path) + r"(?![\w.-])", text), (
            f"{name}: shows the local path {path}")
    hit = _ABSOLUTE.search(text)
    assert hit is None, f"{name}: shows an absolute path: {text[max(0, hit.start() - 60):hit.end() + 20]!r}"


def _shows_widgets(notebook: Path) -> bool:
    return "SizePicker(" in notebook.read_text()


def _prebuilt(folder: Path) -> tuple[Path, list[report.ReportResult], float]:
    """Reports already built in ``folder``, read back from its ``index.json``."""
    listed = json.loads((folder / "index.json").read_text())["notebooks"]
    by_name = {n["notebook"]: n for n in listed}
    missing = [p.name for p in NOTEBOOKS if not by_name.get(p.name, {}).get("html")]
    assert not missing, f"REPORTS_DIR={folder}: no report of {missing}"
    results = [report.ReportResult(p, folder / by_name[p.name]["html"], by_name[p.name]["title"],
                                   float(by_name[p.name]["seconds"] or 0), by_name[p.name]["error"],
                                   by_name[p.name]["summary"]) for p in NOTEBOOKS]
    return folder, results, sum(r.seconds for r in results)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if PREBUILT:
        return _prebuilt(Path(PREBUILT).resolve())
    out = tmp_path_factory.mktemp("reports")
    t0 = time.perf_counter()
    # Two notebooks at a time (each its own kernel): 57 s for the six on two cores, not 90. The
    # command's own loop (build_reports: one at a time, the index after each) is test_report's.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda p: report.execute_notebook(p, out, timeout=300), NOTEBOOKS))
    report.write_index(results, out, report.headline_numbers())
    return out, results, time.perf_counter() - t0


@pytest.fixture(scope="module")
def reports(built):
    out, results, _ = built
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    return out, results


@pytest.fixture(scope="module")
def browser():
    b = Chromium(CHROMIUM)
    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            b.send(f"{domain}.enable")
        # Offline, as a reader on a train: anything fetched from the web fails loudly.
        b.send("Network.emulateNetworkConditions", offline=True, latency=0,
               downloadThroughput=-1, uploadThroughput=-1)
        b.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
               deviceScaleFactor=1, mobile=False)
        yield b
    finally:
        b.close()


def test_reports_execute_and_contain_plots(built):
    out, results, elapsed = built
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert elapsed < 420, f"notebooks took {elapsed:.0f} s; the budget on 2 cores is 7 minutes"
    index = (out / "index.html").read_text()
    for r in results:
        page = r.html.read_text()
        assert r.html.name in index
        assert len(re.findall(r"<img[^>]+src=\"data:image/png;base64,", page)) >= 1, r.html.name
        if _shows_widgets(r.notebook):             # drawn statically, not left to a widget manager
            assert re.search(r"class=[\"']fk-widget", page), r.html.name
        assert "application/vnd.jupyter.widget-view+json" not in page
        assert not REMOTE_TAG.search(page), r.html.name
        assert "Traceback" not in page
        # Every widget drawn from its stored state says it is a snapshot.
        snapshots = len(re.findall(r"class=[\"']fk-snapshot[\"']", page))
        assert snapshots == len(re.findall(r"class=[\"']fk-snapshot-note[\"']", page)), r.html.name
        if _shows_widgets(r.notebook):
            assert snapshots, r.html.name
        _assert_no_local_paths(page, r.html.name)
    _assert_no_local_paths(index, "index.html")
    listed = json.loads((out / "index.json").read_text())
    assert [n["html"] for n in listed["notebooks"]] == [r.html.name for r in results]
    assert all(n["summary"] for n in listed["notebooks"])


@needs_chromium
def test_the_probe_catches_a_broken_page(tmp_path, browser):
    # Each failure the report tests look for, on purpose: the checks themselves can fail.
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><html><body><p>Loading widget...</p>"
                   "<img src='missing.png'><script src='https://cdn.example.org/x.js'></script>"
                   "<script>console.error('boom')</script></body></html>")
    found = visit(browser, bad)
    assert found["cutOff"] == [] and found["scrollWidth"] <= WIDTH
    assert found["brokenImages"] == ["missing.png"]
    assert found["remote"] == ["https://cdn.example.org/x.js"]
    assert found["requests"] == ["https://cdn.example.org/x.js"]
    assert found["placeholders"] and any("boom" in e for e in found["errors"])
    with pytest.raises(AssertionError, match="console errors"):
        _assert_clean(found, bad.name)


@needs_chromium
def test_the_fit_probe_catches_what_is_cut_off(tmp_path, browser):
    wide = tmp_path / "wide.html"
    wide.write_text(
        "<!doctype html><html><body>"
        "<div style='width:300px;overflow:hidden'><table><tr><td><div style='width:900px'>cut"
        "</div></td></tr></table></div>"
        "<div style='width:300px;overflow-x:auto'><table><tr><td><div style='width:900px'>"
        "scrolls</div></td></tr></table></div>"
        "<div class='fk-code' style='width:1500px'>code</div>"
        "<div class='fk-snapshot'><div class='fk-snapshot-note'>snapshot</div></div>"
        f"<p>from {ROOT}/data/records.csv</p></body></html>")
    found = visit(browser, wide)
    assert found["scrollWidth"] > WIDTH and found["cutOff"] == ["table 'cut'"], found["cutOff"]
    assert "div.fk-code" in found["beyond"][0]
    with pytest.raises(AssertionError, match="px wide"):
        _assert_fits(found, wide.name)
    with pytest.raises(AssertionError, match="local path"):
        _assert_no_local_paths(found["text"], wide.name)
    assert found["snapshots"] == [{"note": "snapshot", **found["snapshots"][0]}]


@needs_chromium
def test_index_opens_offline_with_summaries_and_headlines(reports, browser):
    out, results = reports
    found = visit(browser, out / "index.html", "index")
    _assert_clean(found, "index.html")
    _assert_fits(found, "index.html")
    _assert_no_local_paths(found["text"], "index.html")
    assert "not built yet" not in found["text"]
    for r in results:
        assert r.title in found["text"] and r.summary, r.notebook.name
    assert "Headline numbers" in found["text"]
    for h in report.headline_numbers():
        assert h["problem"] in found["text"]
        for pick in filter(None, h["best"].values()):
            assert f"{pick['speedup']:.2f}×" in found["text"], (h["problem"], pick)


@needs_chromium
@pytest.mark.parametrize("index", range(len(NOTEBOOKS)), ids=[p.stem for p in NOTEBOOKS])
def test_report_opens_offline_with_plots_and_widget_values(reports, browser, index):
    out, results = reports
    r = results[index]
    found = visit(browser, r.html, r.html.stem)
    _assert_clean(found, r.html.name)
    _assert_fits(found, r.html.name)
    _assert_no_local_paths(found["text"], r.html.name)
    assert found["images"] >= 1, f"{r.html.name}: no figure at all"
    if r.notebook.name.startswith(SHOWS_CODE):
        assert found["code"], f"{r.html.name}: no code block (div.fk-code) at all"
    # Every widget drawn from its stored state says, visibly, that it is a snapshot.
    for snap in found["snapshots"]:
        assert "snapshot" in snap["note"].lower() and snap["width"] > 0 and snap["height"] > 0, snap
    if not _shows_widgets(r.notebook):
        return
    assert found["snapshots"], f"{r.html.name}: widgets shown without a snapshot caption"
    # The size picker shows its values as text, as the reader left them.
    shown = found["widgets"]
    assert re.search(r"batch_size:\s*\d+", shown) and "KernelBench sizes" in shown, shown
    assert "sizes accepted" in shown, shown


def test_the_six_reports_hold_at_most_40000_visible_words(reports):
    """The course is one short path: what a reader sees, folded details counting their summary."""
    out, results = reports
    words = {r.html.name: visible_words(r.html.read_text()) for r in results}
    assert sum(words.values()) <= MAX_WORDS, words


def test_a_failing_notebook_still_gets_a_report(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Broken"),
                                         nbformat.v4.new_code_cell("print('before')"),
                                         nbformat.v4.new_code_cell("1 / 0")])
    src = tmp_path / "09_broken.ipynb"
    nbformat.write(nb, src)
    (res,) = report.build_reports(tmp_path / "out", [src], timeout=60)
    assert not res.ok and "ZeroDivisionError" in res.error and "before" in res.html.read_text()
    assert "FAILED" in (tmp_path / "out" / "index.html").read_text()


@needs_chromium
def test_the_readme_picture_is_a_step_of_a_report_page(reports, browser):
    """The README shows a learner one step as the report draws it: this test draws it."""
    out, results = reports
    visit(browser, next(r.html for r in results if r.html.name.startswith("01_")))
    top = browser.send("Runtime.evaluate", returnByValue=True, expression=(
        "[...document.querySelectorAll('h3')].find(h => h.innerText.startsWith('Step 2:'))"
        ".getBoundingClientRect().top + scrollY - 10"))["result"]["value"]
    shot = base64.b64decode(browser.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                                         clip={"x": 0, "y": top, "width": 1000, "height": 900, "scale": 1})["data"])
    if os.environ.get("FUSEDKIT_UPDATE_PICTURE"):
        PICTURE.write_bytes(shot)
    committed = PICTURE.read_bytes()
    assert committed[:8] == b"\x89PNG\r\n\x1a\n" and committed[16:24] == shot[16:24]   # a PNG, 1000 x 900
    assert "docs/report-page.png" in (ROOT / "README.md").read_text()
