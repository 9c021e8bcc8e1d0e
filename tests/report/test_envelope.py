"""The sweep's envelope in every format: real sweeps of the fake server, rendered.

Two sweeps: a healthy batching server capped at 4 requests at once (knee and engine cap at 4)
and one that corrupts concurrent requests (first failing N 2, pinned).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml, Skipped
from markdown_it import MarkdownIt
from markupsafe import escape

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.judge import run_checks
from batchprobe.probe import plan_run, run_plan
from batchprobe.report import render_html, render_junit, render_markdown
from batchprobe.report._plots import ENVELOPE_KEY, envelope_figure, figures
from batchprobe.report.console import RENDERER as CONSOLE
from batchprobe.report.html import grid
from batchprobe.results import Report, read_report
from batchprobe.results.sweep import SweepStep

from .chromium import chromium_page
from .conftest import artifacts_dir, keep, load


def _sweep(folder: Path, name: str, sweep: str, **fake: object) -> Path:
    settings: dict[str, object] = {"ttft_ms": 40.0, "itl_ms": 3.0, **fake}
    with FakeServerThread(FakeServerConfig(**settings)) as server:  # type: ignore[arg-type]
        plan = plan_run(base_url=server.base_url, sessions=4, haystack_tokens=200,
                        max_tokens=24, sweep=sweep, request_timeout_s=20.0,
                        output=folder / f"{name}.json")
        run_plan(plan)
    return plan.output


@pytest.fixture(scope="module")
def sweeps_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sweeps")


@pytest.fixture(scope="module")
def cap4(sweeps_dir: Path) -> Report:
    return read_report(_sweep(sweeps_dir, "sweep-cap4", "1,2,4,8,16", batch_cap=4))


@pytest.fixture(scope="module")
def corrupt(sweeps_dir: Path) -> Report:
    return read_report(_sweep(sweeps_dir, "sweep-corrupt", "1,2,4,8", fault="corrupt",
                              fault_when="concurrent"))


def _section(html: str, key: str) -> str:
    found = re.search(rf'<section id="{key}">(.*?)</section>', html, re.DOTALL)
    assert found, key
    return found.group(1)


def _step_rows(html: str) -> dict[int, str]:
    table = re.search(r'<table class="steps" id="steps">(.*?)</table>', html, re.DOTALL)
    assert table
    rows = re.findall(r"<tr class=\"step-[^\"]*\"[^>]*>(.*?)</tr>", table.group(1), re.DOTALL)
    return {int(re.findall(r"<td[^>]*>(.*?)</td>", r, re.DOTALL)[0]): r for r in rows}


def _more_rows(html: str) -> dict[int, str]:
    """The second table of steps (its secondary columns), by N."""
    table = re.search(r'<table class="steps secondary">(.*?)</table>', html, re.DOTALL)
    assert table
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(1), re.DOTALL)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r, re.DOTALL) for r in rows]
    return {int(c[0]): r for c, r in zip(cells, rows) if c}


def _rate(value: float | None) -> str:
    assert value is not None
    return f"{value:.1f}"


def test_the_sweeps_found_what_the_fakes_do(cap4: Report, corrupt: Report) -> None:
    """The premise of the other tests: the envelope holds what the fakes were built to show."""
    assert cap4.envelope and corrupt.envelope
    assert cap4.envelope.knee_n == 4 and cap4.envelope.engine_cap == 4
    assert cap4.envelope.first_failing_n is None and cap4.envelope.largest_correct_n == 16
    assert corrupt.envelope.first_failing_n == 2 and corrupt.envelope.threshold_pinned
    assert corrupt.envelope.largest_correct_n == 1


def test_envelope_figure_marks_knee_cap_and_failing_n(cap4: Report, corrupt: Report,
                                                      pass_verdict: Path) -> None:
    healthy = envelope_figure(cap4)
    assert healthy is not None and healthy.key == ENVELOPE_KEY
    assert "<svg" in healthy.svg and "knee 4" in healthy.svg and "engine cap 4" in healthy.svg
    assert "serial baseline" in healthy.svg and "first failing" not in healthy.svg
    assert "TTFT p99" in healthy.svg and "running max (server gauge)" in healthy.svg
    # The x axis is N: every step's depth is a tick label.
    for step in cap4.envelope.steps if cap4.envelope else []:
        assert f">{step.n}<" in healthy.svg or f"{step.n}</text>" in healthy.svg
    broken = envelope_figure(corrupt)
    assert broken is not None and "first failing N=2 (pinned)" in broken.svg
    assert "#c62828" in broken.svg  # the failing region and line are red
    assert "Red from N=2" in broken.caption
    # Only a sweep has one; it is the last builder, after the per-N plots (no per-arm bars).
    assert envelope_figure(load(pass_verdict)) is None
    keys = [f.key for f in figures(cap4)]
    assert keys[-1] == ENVELOPE_KEY and "plot-decode" not in keys and "plot-timeline" in keys


def test_html_envelope_section_follows_the_verdict(cap4: Report, corrupt: Report,
                                                    sweeps_dir: Path) -> None:
    for report, name in ((cap4, "sweep-cap4"), (corrupt, "sweep-corrupt")):
        html = render_html(report)
        (keep(sweeps_dir / f"{name}.json")).with_suffix(".html").write_text(html)
        assert html.index("</header>") < html.index('id="envelope"') < html.index('id="arms"')
        section = _section(html, "envelope")
        assert f'id="{ENVELOPE_KEY}"' in section and "<svg" in section
        # the per-N plots, and the envelope twice (a desktop and a phone layout)
        assert html.count("<svg") == len(figures(report)) + 1
        env = report.envelope
        assert env is not None
        header = html[: html.index("</header>")]
        assert f"{_rate(env.peak_decode_tokens_per_s)} tok/s at N={env.peak_n}" in header
        rows = _step_rows(html)
        more = _more_rows(html)
        assert sorted(more) == sorted(rows)
        assert sorted(rows) == [s.n for s in env.steps]
        for step in env.steps:
            row = rows[step.n]
            assert _rate(step.decode_tokens_per_s) in row
            assert f"{step.speedup:.2f}x" in row and f"<td>{step.requests}</td>" in more[step.n]
            arm = report.arm(step.arm)
            assert arm and arm.metrics and arm.metrics.ttft_s
            assert f"{arm.metrics.ttft_s.p99 * 1000:.1f} ms" in row
            if step.server_load is not None:
                assert f"{step.server_load.running_max} / " in more[step.n]
    cap_html = render_html(cap4)
    assert "knee</dt><dd>N=4" in cap_html and "4 running at once" in cap_html
    assert all("✓" in row for row in _step_rows(render_html(cap4)).values())
    html = render_html(corrupt)
    assert "first failing N</dt><dd>2 (pinned)" in html
    assert "Correct: up to N=1; first wrong at N=2 (pinned by bisection)." in html
    failing = re.search(r'<tr class="step-wrong"[^>]*id="first-failing">(.*?)</tr>', html, re.DOTALL)
    assert failing and "✗" in failing.group(1)
    step = corrupt.envelope.step(2) if corrupt.envelope else None
    assert step is not None and step.reasons
    assert str(escape(step.reasons[0][:30])) in failing.group(1)


def test_html_grid_groups_steps_without_losing_a_session(cap4: Report, corrupt: Report) -> None:
    for report in (cap4, corrupt):
        g = grid(report)
        assert len(g.columns) == 2 and g.columns[-1] == "the step"  # not one per arm
        assert len(report.arms) >= 3
        shown = [(c.session.arm, c.session.request_id) for group in g.groups
                 for row in group.rows for c in row.cells if c.session is not None]
        every = [(a.spec.name, s.request_id) for a in report.arms for s in a.sessions]
        assert sorted(shown) == sorted(every)
        env = report.envelope
        assert env is not None
        titles = [group.title or "" for group in g.groups]
        for step in env.steps:
            assert any(t.startswith(f"{step.arm} · N={step.n}") for t in titles), titles
        html = render_html(report)
        cells = len(re.findall(r"<td[^>]*>\s*<details>", _section(html, "sessions")))
        assert cells == g.rows * len(g.columns)


def test_markdown_envelope_table(cap4: Report, corrupt: Report) -> None:
    for report in (cap4, corrupt):
        md = render_markdown(report)
        assert md.index("### Envelope") < md.index("| arm |")
        tokens = MarkdownIt("commonmark").enable("table").parse(md)
        assert [t for t in tokens if t.type == "table_open"]
        env = report.envelope
        assert env is not None
        part = md[md.index("### Envelope"):md.index("<details><summary>more columns")]
        rows = {int(line.split("|")[1]): line for line in part.splitlines()
                if re.match(r"\| \d+ \|", line)}
        assert sorted(rows) == [s.n for s in env.steps]
        for step in env.steps:
            assert _rate(step.decode_tokens_per_s) in rows[step.n]
            assert ("✓" in rows[step.n]) is (step.correct is True)
    md = render_markdown(corrupt)
    assert "first failing N: **2 (pinned)**" in md and "first wrong at N=2 (pinned" in md
    assert "knee: **N=4**" in render_markdown(cap4)
    assert "engine cap: **4 running at once" in render_markdown(cap4)


def _cases(xml: str, tmp_path: Path) -> dict[str, object]:
    path = tmp_path / "sweep.junit.xml"
    path.write_text(xml)
    return {f"{c.classname}.{c.name}": c for suite in JUnitXml.fromfile(str(path)) for c in suite}


def test_junit_has_a_case_per_step(cap4: Report, corrupt: Report, tmp_path: Path) -> None:
    for report in (cap4, corrupt):
        cases = _cases(render_junit(report), tmp_path)
        env = report.envelope
        assert env is not None
        assert {f"batchprobe.{c.name}" for c in run_checks(report)} <= set(cases)
        assert {f"batchprobe.envelope.sweep@{s.n}" for s in env.steps} <= set(cases)
    cases = _cases(render_junit(corrupt), tmp_path)
    step: SweepStep | None = corrupt.envelope.step(2) if corrupt.envelope else None
    assert step is not None and step.correct is False
    results = cases["batchprobe.envelope.sweep@2"].result  # type: ignore[attr-defined]
    failures = [r for r in results if isinstance(r, Failure)]
    assert failures and failures[0].message == step.reasons[0]
    assert not cases["batchprobe.envelope.sweep@1"].result  # type: ignore[attr-defined]
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "sweep.junit.xml"))))
    failed = sum(any(isinstance(r, Failure) for r in c.result) for c in suite)
    skipped = sum(any(isinstance(r, Skipped) for r in c.result) for c in suite)
    assert suite.failures == failed and suite.skipped == skipped and suite.tests == len(cases)
    healthy = _cases(render_junit(cap4), tmp_path)
    assert not any(healthy[f"batchprobe.envelope.sweep@{n}"].result  # type: ignore[attr-defined]
                   for n in (1, 2, 4, 8, 16))


def test_console_prints_the_compact_envelope(cap4: Report, corrupt: Report) -> None:
    text = CONSOLE.render(cap4)
    assert "sweep envelope" in text and "knee: N=4" in text and "engine cap: 4" in text
    env = cap4.envelope
    assert env is not None
    for step in env.steps:
        assert _rate(step.decode_tokens_per_s) in text
    broken = CONSOLE.render(corrupt)
    assert "first failing N: 2 (pinned" in broken and "✗" in broken


MEASURE = """JSON.stringify({
  figure: (() => { const e = [...document.querySelectorAll('#envelope figure svg')]
      .find(s => s.getBoundingClientRect().width > 0);  // the layout shown at this width
    if (!e) return null; const r = e.getBoundingClientRect(); return [r.width, r.height]; })(),
  table: document.querySelectorAll('#steps tr').length,
  pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
})"""


@pytest.mark.slow
def test_envelope_in_headless_chromium(corrupt: Report, tmp_path: Path) -> None:
    html = tmp_path / "sweep-corrupt.html"
    html.write_text(render_html(corrupt), encoding="utf-8")

    async def inspect() -> dict[str, object]:
        found: dict[str, object] = {}
        async with chromium_page() as page:
            for view, (width, height, mobile) in {"desktop": (1280, 900, False),
                                                  "phone": (390, 844, True)}.items():
                await page.open(html.as_uri(), width, height, mobile)
                found[view] = json.loads(await page.evaluate(MEASURE))
                await page.screenshot(artifacts_dir() / f"sweep-corrupt-{view}.png")
            found["log"] = page.log.console
        return found

    found = asyncio.run(inspect())
    assert found["log"] == []
    env = corrupt.envelope
    assert env is not None
    for view in ("desktop", "phone"):
        seen = found[view]
        assert isinstance(seen, dict)
        width, height = seen["figure"]
        assert width > 300 and height > 300, seen  # a real figure, not a collapsed one
        assert seen["table"] == len(env.steps) + 1
        assert seen["pageWidth"] <= seen["viewport"], f"{view}: the page scrolls sideways"
