"""The HTML page as a reader meets it (issue 17): the answer first, a failures view linked to
the grid, no script, nothing external, whole numbers; and screenshots of a healthy sweep, a
failing sweep, an engine that died and a sweep compare at 1400 and 390 px in the artefacts."""

from __future__ import annotations

import asyncio
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.report import compare_reports, render_html
from batchprobe.report._failures import failure_rows

from .chromium import chromium_page
from .conftest import artifacts_dir, load

_NUMERIC = re.compile(r"^[\d.,x×%/ \-+]+(ms|s|MB|tok/s)?$")


class _Page(HTMLParser):
    """Every id, every href, the tags, and each table cell's text."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.tags: set[str] = set()
        self.srcs: list[str] = []
        self.cells: list[str] = []
        self._cell: list[str] | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"] or "")
        if tag == "a" and found.get("href"):
            self.hrefs.append(found["href"] or "")
        for key in ("src", "xlink:href"):
            if found.get(key):
                self.srcs.append(found[key] or "")
        if tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.cells.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


@pytest.mark.parametrize("which", ["failing_sweep", "leaking_sweep", "healthy_sweep"])
def test_every_link_resolves_no_script_nothing_external_no_cut_number(
        which: str, request: pytest.FixtureRequest) -> None:
    report = load(request.getfixturevalue(which))
    html = render_html(report)
    page = _parse(html)
    assert "script" not in page.tags and "<script" not in html.lower()
    assert not re.search(r"""(?:href|src)=["']?(?:https?:)?//""", html), "an external URL"
    assert all(src.startswith("#") for src in page.srcs), "only the SVGs' own markers"
    for href in page.hrefs:
        assert href.startswith("#"), f"a link that is not an anchor: {href}"
        assert href[1:] in page.ids, f"{href} points at nothing"
    numeric = [c for c in page.cells if _NUMERIC.match(c.replace("…", ""))]
    assert numeric, "the tables have numbers"
    assert not [c for c in page.cells if "…" in c and _NUMERIC.match(c.replace("…", ""))]


def test_a_failing_sweep_leads_with_the_answer_and_links_every_wrong_session(
        failing_sweep: Path) -> None:
    report = load(failing_sweep)
    env = report.envelope
    assert env is not None and env.first_failing_n == 4 and report.findings
    html = render_html(report)
    page = _parse(html)
    answer = f"first wrong at N={env.first_failing_n} (pinned by bisection)"
    assert answer in html and "Correct: up to N=3" in html
    assert html.index(answer) < html.index('id="envelope"') < html.index('id="failures"')
    assert html.index('id="failures"') < html.index('id="sessions"'), "failures before the grid"
    rows = failure_rows(report)
    assert rows and len(rows) == sum(len(f.sessions) for f in report.findings if f.hard)
    for row in rows:
        assert row.anchor in page.ids and row.session.anchor in page.ids, row
        assert f'href="#{row.session.anchor}"' in html
    assert "knee: none found" not in html and ">none<" not in html


def test_each_cross_talk_source_links_to_its_cell(leaking_sweep: Path) -> None:
    report = load(leaking_sweep)
    html = render_html(report)
    page = _parse(html)
    leaked = [(s.arm, src) for a in report.arms for s in a.sessions for src in s.cross_talk_from]
    assert leaked, "the leaking fake leaked"
    linked = re.findall(r'<a href="#(cell-[^"]+)">s(\d+)</a>', html)
    assert len(linked) >= len(leaked)
    assert all(anchor in page.ids for anchor, _ in linked)
    rows = [r for r in failure_rows(report) if r.sources]
    assert rows and all(src.anchor in page.ids for r in rows for src in r.sources)


VIEWPORTS = {"1400": (1400, 900, False), "390": (390, 844, True)}
FIND = """JSON.stringify({
  answer: (() => { const e = document.getElementById('answer');
                   return e ? e.getBoundingClientRect().bottom + window.scrollY : null; })(),
  failures: !!document.querySelector('a[href="#failures"]'),
  pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
  smallText: [...document.querySelectorAll('figure.plot svg text')]
      .filter(t => t.getBoundingClientRect().height > 0)
      .map(t => { const m = t.getScreenCTM();
                  return Math.hypot(m.a, m.b) * parseFloat(getComputedStyle(t).fontSize); })
      .filter(px => px < 9.5),
})"""


async def _shoot(html: Path, name: str) -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = {}
    async with chromium_page() as page:
        for view, (width, height, mobile) in VIEWPORTS.items():
            await page.open(html.as_uri(), width, height, mobile)
            found[view] = json.loads(await page.evaluate(FIND))
            await page.screenshot(artifacts_dir() / f"{name}-{view}.png")
        found["log"] = {"console": page.log.console, "requests": page.log.requests}
    return found


def _page(tmp_path: Path, name: str, html: str) -> Path:
    path = tmp_path / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    (artifacts_dir() / path.name).write_text(html, encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("which", ["healthy_sweep", "failing_sweep", "engine_died_verdict"])
def test_screenshots_at_1400_and_390(which: str, request: pytest.FixtureRequest,
                                     tmp_path: Path) -> None:
    report = load(request.getfixturevalue(which))
    html = _page(tmp_path, which, render_html(report))
    found = asyncio.run(_shoot(html, which))
    log = found["log"]
    assert log["console"] == [] and set(log["requests"]) == {html.as_uri()}, log
    for view in VIEWPORTS:
        seen = found[view]
        assert seen["pageWidth"] <= seen["viewport"], f"{which} at {view} scrolls sideways"
        assert seen["answer"] is not None and seen["answer"] < 900, (which, view, seen)
        if view == "390":
            assert seen["smallText"] == [], f"plot text under 10 px on a phone: {seen}"
        if which == "failing_sweep":
            assert seen["failures"], "the failures section is one link away"


def test_compare_of_sweeps_shows_envelopes_per_n_rows_and_the_overlay(
        healthy_sweep: Path, failing_sweep: Path, tmp_path: Path) -> None:
    html_path = tmp_path / "compare.html"
    result = CliRunner().invoke(main, ["compare", str(healthy_sweep), str(failing_sweep),
                                       "--gate", "--html", str(html_path),
                                       "--label", "clean"], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output  # the failing sweep regresses: the gate says so
    healthy, failing = load(healthy_sweep), load(failing_sweep)
    comp = compare_reports([healthy, failing], [healthy_sweep, failing_sweep], labels=["clean"])
    assert [r.label for r in comp.runs] == ["clean", failing_sweep.stem]
    rows = {r.label: r.values for r in comp.envelope}
    assert healthy.envelope is not None and failing.envelope is not None
    assert rows["largest correct N"] == [str(healthy.envelope.largest_correct_n),
                                         str(failing.envelope.largest_correct_n)]
    assert rows["first failing N"][1] == f"{failing.envelope.first_failing_n} (pinned)"
    depths = sorted({s.n for r in (healthy, failing) for s in r.envelope.steps})  # type: ignore[union-attr]
    assert [r.label for r in comp.per_n] == [f"N={n}" for n in depths]
    failing_n = failing.envelope.first_failing_n
    assert comp.per_n[depths.index(failing_n)].values[1].startswith("✗")
    assert "not run" in comp.per_n[depths.index(3)].values[0], "N=3 only the bisection ran"
    for view, cell in (("clean", "largest correct N"), (failing_sweep.stem, "first failing N")):
        assert view in result.output and cell in result.output
    # The regression reads as a finding, in one line, first; no "not run" lines.
    first = comp.regressions[0]
    assert first.check == "run.envelope" and first.message == (
        f"now fails at N={failing_n}; was correct to N={healthy.envelope.largest_correct_n}")
    assert not any("not run" in r.message or "did not run" in r.message for r in comp.regressions)
    html = html_path.read_text(encoding="utf-8")
    page = _parse(html)
    assert 'id="plot-overlay"' in html and "<svg" in html and "script" not in page.tags
    assert html.index('id="envelope-rows"') < html.index('id="plot-overlay"') < html.index(
        'id="per-n"')
    shown = _page(tmp_path, "sweep_compare", html)
    found = asyncio.run(_shoot(shown, "sweep_compare"))
    for view in VIEWPORTS:
        assert found[view]["pageWidth"] <= found[view]["viewport"], view
    assert found["390"]["smallText"] == [], found["390"]


def test_a_dead_engine_shows_its_log_tail_open_after_the_error(engine_died_verdict: Path) -> None:
    report = load(engine_died_verdict)
    assert report.status.value == "engine_died" and report.log_tail
    html = render_html(report)
    error = html.index('id="error"')
    tail = html.index('<details open id="log-tail">')
    assert error < tail < html.index("</header>"), "the tail opens right under the error"
    log = next(a.log_path for a in report.arms if a.log_path)
    assert f'<a href="{log}">full log</a>' in html and Path(log).is_file()
    assert html.count("KV cache block table corrupted") >= 1
    assert "engine log tail" not in html[html.index('id="config"'):], "shown once"
