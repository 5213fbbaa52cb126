"""The HTML reports, built once from every notebook, checked as files and in a real browser:
headless Chromium, offline, driven over the DevTools protocol (websocket-client, which
jupyter_server already brings in).

The module builds the reports itself (about 20-40 s a notebook on 2 cores) into a temporary
folder, checks the files, then opens ``index.html`` and every report with the network
switched off and fails on: a console error or uncaught exception, a request that leaves the machine, a
<script src> or <link href> pointing at the web, an <img> that did not load
(``naturalWidth == 0``), or a widget left as a "Loading widget..." placeholder. Screenshots
of each page go to ``.browser-shots/`` (gitignored) for a human to look at.

The browser tests skip when no Chromium is installed (``apt-get install chromium``);
``.ci/run`` installs it, so CI never skips them.
"""

from __future__ import annotations

import base64
import json
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

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SHOTS = ROOT / ".browser-shots"
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
  };
})()"""


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
                        clip={"x": 0, "y": 0, "width": 1280, "height": found["height"],
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


def _shows_widgets(notebook: Path) -> bool:
    return "SizePicker(" in notebook.read_text()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    t0 = time.perf_counter()
    results = report.build_reports(out, NOTEBOOKS, timeout=300)
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
        b.send("Emulation.setDeviceMetricsOverride", width=1280, height=900,
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
    assert found["brokenImages"] == ["missing.png"]
    assert found["remote"] == ["https://cdn.example.org/x.js"]
    assert found["requests"] == ["https://cdn.example.org/x.js"]
    assert found["placeholders"] and any("boom" in e for e in found["errors"])
    with pytest.raises(AssertionError, match="console errors"):
        _assert_clean(found, bad.name)


@needs_chromium
def test_index_opens_offline_with_summaries_and_headlines(reports, browser):
    out, results = reports
    found = visit(browser, out / "index.html", "index")
    _assert_clean(found, "index.html")
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
    assert found["images"] >= 1, f"{r.html.name}: no figure at all"
    if not _shows_widgets(r.notebook):
        return
    # The size picker shows its values as text, as the reader left them.
    shown = found["widgets"]
    assert re.search(r"batch_size:\s*\d+", shown) and "KernelBench sizes" in shown, shown
    assert "sizes accepted" in shown, shown
