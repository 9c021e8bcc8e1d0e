"""The HTML report in a real headless Chromium: offline, error-free, laid out at two widths."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from batchprobe.report import render_html
from batchprobe.report.html import session_grid

from .chromium import chromium_page
from .conftest import artifacts_dir, load

pytestmark = pytest.mark.slow

VIEWPORTS = {"desktop": (1280, 900, False), "phone": (390, 844, True)}
MEASURE = """JSON.stringify({
  plots: [...document.querySelectorAll('figure.plot svg')].map(e => {
    const r = e.getBoundingClientRect(); return [r.width, r.height]; }),
  grid: (() => { const g = document.getElementById('session-grid');
    if (!g) return null; const r = g.getBoundingClientRect();
    return [r.width, r.height, g.querySelectorAll('td details').length]; })(),
  pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
})"""
OPEN_ALL = "document.querySelectorAll('details').forEach(d => d.open = true); true"


async def _inspect(html: Path, name: str) -> dict[str, Any]:
    """Open ``html`` at each width: measurements, screenshots in the artefacts, the page log."""
    shots = artifacts_dir()
    found: dict[str, Any] = {}
    async with chromium_page() as page:
        for view, (width, height, mobile) in VIEWPORTS.items():
            await page.open(html.as_uri(), width, height, mobile)
            found[view] = json.loads(await page.evaluate(MEASURE))
            await page.screenshot(shots / f"{name}-{view}.png")
        await page.evaluate(OPEN_ALL)
        await page.screenshot(shots / f"{name}-phone-open.png")
        found["open"] = json.loads(await page.evaluate(MEASURE))
        found["log"] = page.log
    return found


@pytest.mark.parametrize("which", ["pass_verdict", "cross_talk_verdict"])
def test_html_report_in_headless_chromium(which: str, request: pytest.FixtureRequest,
                                          tmp_path: Path) -> None:
    verdict: Path = request.getfixturevalue(which)
    report = load(verdict)
    html = tmp_path / f"{verdict.stem}.html"
    html.write_text(render_html(report), encoding="utf-8")
    found = asyncio.run(_inspect(html, verdict.stem))
    log = found["log"]
    assert log.console == [], log.console
    assert log.requests and set(log.requests) == {html.as_uri()}, log.requests
    sessions = len(session_grid(report))  # one row per item, and per repeat of one
    for view, (width, _, _) in VIEWPORTS.items():
        seen = found[view]
        assert len(seen["plots"]) == 4, seen
        for plot_width, plot_height in seen["plots"]:
            assert plot_width > 0.4 * min(width, 1100) - 40 and plot_height > 100, (view, seen)
        grid_width, grid_height, cells = seen["grid"]
        assert cells == sessions * len(report.arms)
        assert sessions >= max(len(a.sessions) for a in report.arms)
        assert grid_width > 0.8 * min(width, 1100) - 40 and grid_height > 20 * sessions, seen
        assert seen["pageWidth"] <= seen["viewport"], f"{view}: the page scrolls sideways"
    assert found["open"]["pageWidth"] <= found["open"]["viewport"], "open cells widen the page"
