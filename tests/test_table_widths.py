"""The recorded-results tables fit a JupyterLab output area 824 px wide, measured in a browser.

Each table a notebook step shows (:func:`fusedkit.lesson.step`: the counters of its kernels and
the check-and-time rows), the ladder table (:func:`fusedkit.results.ladder_table`), the counter
overview (:func:`fusedkit.lesson.counter_overview`), notebook 04's checks of the by-batch step
(:func:`fusedkit.results.route_check`, :func:`fusedkit.results.route_evidence`) and the
explorer's table of the nearest recorded GPU runs (:class:`fusedkit.widgets.LadderExplorer` on a
CPU) is built from the committed records, put into a page by the reports' own exporter (:func:`fusedkit.report.offline_exporter`,
JupyterLab's stylesheet), and opened in headless Chromium with the window sized so that an
output area is 824 px wide, the width a reviewer's JupyterLab gave. Every table must be no wider
than its output area: nothing to scroll sideways to find a time, an error or a speed-up. The
other checks of a browser (nothing cut off at 1280 px) are in tests/test_browser.py.
"""

from __future__ import annotations

import base64
import dataclasses
import html
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import nbformat  # noqa: E402
import pytest  # noqa: E402
from test_browser import CHROMIUM, SHOTS, SLACK, Chromium  # noqa: E402

from fusedkit import lesson, present, problems, records, report, results  # noqa: E402
from fusedkit.mode import detect_mode  # noqa: E402

AREA = 824                      # px: the output area of the review (JupyterLab, about 930 px window)
P12, P45 = problems.get("p12"), problems.get("p45")
CPU = dataclasses.replace(detect_mode(), gpu=False)

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (Debian: apt-get "
                                    "install chromium); .ci/run installs it so CI never skips")

# Every table's width, the width of the output area around it, and how far the table runs past
# the content box (inside the padding) of the narrowest box between it and the output area.
_MEASURE = """(() => {
  const inner = e => { const r = e.getBoundingClientRect(), s = getComputedStyle(e);
                       return r.right - parseFloat(s.paddingRight) - parseFloat(s.borderRightWidth); };
  const room = (t, area) => { let right = inner(area);
    for (let a = t.parentElement; a && a !== area; a = a.parentElement) right = Math.min(right, inner(a));
    return right; };
  return [...document.querySelectorAll('.jp-OutputArea-output')].flatMap(area =>
  [...area.querySelectorAll('table')].map(t => ({
    name: area.closest('.jp-Cell').querySelector('.jp-InputArea-editor, pre')?.innerText.trim() || '?',
    width: Math.ceil(t.getBoundingClientRect().width),
    area: Math.floor(area.getBoundingClientRect().width),
    over: Math.ceil(t.getBoundingClientRect().right - room(t, area)),
    head: [...t.querySelectorAll('thead th')].map(h => h.innerText.trim()).filter(Boolean).join(' | ')
           .slice(0, 160)})));
})()"""


def _html(shown: object) -> str | None:
    """The HTML a notebook would show for ``shown`` (None for markdown and text)."""
    if hasattr(shown, "_repr_html_"):
        return shown._repr_html_()
    if hasattr(shown, "to_html"):
        return shown.to_html()
    return None


def _page(tables: list[tuple[str, str]], folder: Path, name: str = "tables") -> Path:
    """A report page with one cell per (name, html): the name as the cell's source."""
    nb = nbformat.v4.new_notebook()
    for what, body in tables:
        cell = nbformat.v4.new_code_cell(what)
        cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": body,
                                                                     "text/plain": what})]
        nb.cells.append(cell)
    page = folder / f"{name}.html"
    body, _ = report.offline_exporter().from_notebook_node(nb)
    page.write_text(body, encoding="utf-8")
    return page


def _measure(browser: Chromium, page: Path, area: int) -> list[dict]:
    """Open ``page`` with the window sized so that an output area is ``area`` px wide."""
    def load(width: int) -> list[dict]:
        browser.send("Emulation.setDeviceMetricsOverride", width=width, height=900,
                     deviceScaleFactor=1, mobile=False)
        browser.events.clear()
        browser.send("Page.navigate", url=page.resolve().as_uri())
        browser.wait_for("Page.loadEventFired")
        return browser.send("Runtime.evaluate", expression=_MEASURE, returnByValue=True)["result"]["value"]

    first = load(1280)
    margin = 1280 - first[0]["area"]            # the page's margins around an output area
    found = load(area + margin)
    assert {f["area"] for f in found} == {area}, f"the output areas are {sorted({f['area'] for f in found})} px"
    # The whole page, for a human to look at (gitignored, as tests/test_browser.py's).
    height = browser.send("Runtime.evaluate", expression="Math.max(document.documentElement.scrollHeight, "
                          "document.body.scrollHeight, ...[...document.querySelectorAll('.jp-Cell')]"
                          ".map(c => c.getBoundingClientRect().bottom + scrollY))",
                          returnByValue=True)["result"]["value"]
    browser.send("Emulation.setDeviceMetricsOverride", width=area + margin, height=min(int(height), 16000),
                 deviceScaleFactor=1, mobile=False)
    shot = browser.send("Page.captureScreenshot", format="png")
    SHOTS.mkdir(exist_ok=True)
    (SHOTS / f"{page.stem}-{area}px.png").write_bytes(base64.b64decode(shot["data"]))
    return found


@pytest.fixture(scope="module")
def browser():
    b = Chromium(CHROMIUM)
    try:
        for domain in ("Page", "Runtime"):
            b.send(f"{domain}.enable")
        yield b
    finally:
        b.close()


def _step_tables(monkeypatch, problem, slugs, sizes, recorded) -> list[str]:
    """The HTML of every table :func:`fusedkit.lesson.step` displays for ``slugs`` (no code)."""
    shown: list[object] = []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **_: shown.extend(objs))
    lesson.step(problem, slugs, sizes, CPU, recorded, code=False, predict=1.0, basis="a test")
    return [h for h in map(_html, shown) if h and "<table" in h]


def _passing_check(*_args, **_kwargs):
    """What Triton's interpreter reports for a step whose logic is right (it is not run here)."""
    return SimpleNamespace(ok=True, tier="", failure="", check=SimpleNamespace(rel_error=1.2e-7, calls=6))


def _explorer_tables(problem, slugs, sizes) -> list[str]:
    """The HTML tables the ladder explorer shows on a CPU for ``slugs`` at ``sizes``."""
    from fusedkit.widgets import LadderExplorer  # noqa: PLC0415

    ex = LadderExplorer(problem, CPU, recorded_path=records.default_path())
    ex.picker.set_sizes(sizes)
    ex.select(slugs)
    ex.run()
    return [o["data"]["text/html"] for o in ex.output.outputs
            if "text/html" in o.get("data", {}) and "recorded on a GPU" in o["data"]["text/html"]]


@needs_chromium
def test_recorded_results_tables_fit_an_824px_output_area(tmp_path, monkeypatch, browser):
    monkeypatch.setattr(lesson, "measure", _passing_check)     # the interpreter is not under test
    tables: list[tuple[str, str]] = []
    for p, single, several in ((P12, "triton_fp16x3", ["eager", "eager_tf32", "compile"]),
                               (P45, "cublas_tf32_epilogues_vec4",
                                ["triton_fused_lse_ieee", "triton_fused_lse_tf32x3", "triton_fused_lse_tf32"])):
        rec = results.recorded(p)
        assert not rec.empty, f"no recorded run of {p.key} in data/records.csv"
        tables.append((f"{p.key} ladder_table", present.table(results.ladder_table(rec)).to_html()))
        tables.append((f"{p.key} counter_overview", _html(lesson.counter_overview(p, rec))))
        for slugs in (single, several):
            for i, t in enumerate(_step_tables(monkeypatch, p, slugs, p.defaults, rec)):
                tables.append((f"{p.key} step {slugs} table {i + 1}", t))
        # Notebook 04's checks of the by-batch step, as it shows them.
        check = results.route_check(p, "faithful_by_batch")
        tables.append((f"{p.key} route_check", present.table(
            check.drop(columns=["run_id", "device", "timestamp", "commit"]),
            formats={"ratio": present.speedup}).to_html()))
        tables.append((f"{p.key} route_evidence",
                       present.table(results.route_evidence(p, "faithful_by_batch")).to_html()))
    slugs = ["eager", "cublas_tf32_epilogues_vec4", "wgmma_fp16x3_lse", "faithful_by_batch"]
    near = _explorer_tables(P45, slugs, lesson.small_sizes(P45))
    assert len(near) == 1, "the explorer showed no table of recorded GPU runs"
    tables.append(("p45 explorer nearest records", near[0]))

    found = _measure(browser, _page(tables, tmp_path), AREA)
    assert len(found) >= len(tables), [f["name"] for f in found]
    wide = [f"{f['name']}: {f['width']} px, {f['over']} px past the area ({f['head']})"
            for f in found if f["over"] > SLACK]
    assert not wide, f"wider than the {AREA}-px output area:\n" + "\n".join(wide)



@needs_chromium
def test_the_measure_catches_a_wide_table(tmp_path, browser):
    # The check itself can fail: a table of long unbreakable cells is wider than the area.
    cells = "".join(f"<td style='white-space:nowrap'>{html.escape('x' * 40)}</td>" for _ in range(4))
    found = _measure(browser, _page([("wide", f"<table><tr>{cells}</tr></table>")], tmp_path, "wide"), AREA)
    assert found[0]["width"] > AREA and found[0]["area"] == AREA and found[0]["over"] > SLACK
