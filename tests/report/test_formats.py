"""Real verdicts (fake-server PASS and cross-talk FAIL runs) rendered into every format."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml
from markdown_it import MarkdownIt
from markupsafe import escape

from batchprobe.judge import CheckStatus, run_checks
from batchprobe.report import builtin_renderers, render_html, render_junit, render_markdown
from batchprobe.report.html import session_grid
from batchprobe.results import Report, SessionOutcome

from .conftest import keep, load


def _junit_cases(xml: str, tmp_path: Path) -> dict[str, object]:
    path = tmp_path / "report.junit.xml"
    path.write_text(xml)
    suites = JUnitXml.fromfile(str(path))
    cases = {}
    for suite in suites:
        for case in suite:
            cases[f"{case.classname}.{case.name}"] = case
    return cases


def test_pass_verdict_junit_all_pass(pass_verdict: Path, tmp_path: Path) -> None:
    report = load(pass_verdict)
    cases = _junit_cases(render_junit(report), tmp_path)
    checks = run_checks(report)
    assert set(cases) == {f"batchprobe.{c.name}" for c in checks}
    assert "batchprobe.concurrent.burst.cross_talk" in cases and "batchprobe.run.parallel" in cases
    assert "batchprobe.concurrent.params.count" in cases and "batchprobe.run.correct" in cases
    failed = [n for n, c in cases.items() if any(isinstance(r, Failure) for r in c.result)]
    assert failed == []


def test_cross_talk_verdict_junit_failure_carries_the_reason(
    cross_talk_verdict: Path, tmp_path: Path
) -> None:
    report = load(cross_talk_verdict)
    xml = render_junit(report)
    keep(cross_talk_verdict)
    (keep(cross_talk_verdict).with_suffix(".junit.xml")).write_text(xml)
    cases = _junit_cases(xml, tmp_path)
    leak = cases["batchprobe.concurrent.burst.cross_talk"]
    failures = [r for r in leak.result if isinstance(r, Failure)]  # type: ignore[attr-defined]
    assert failures and "answered with the code of session(s)" in (failures[0].message or "")
    serial = cases["batchprobe.serial.burst.errors"]
    assert not serial.result  # type: ignore[attr-defined]
    for run_level in ("batchprobe.run.correct", "batchprobe.run.outcome"):
        assert any(isinstance(r, Failure) for r in cases[run_level].result)  # type: ignore[attr-defined]
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "report.junit.xml"))))
    assert suite.failures == sum(c.status is CheckStatus.FAILED for c in run_checks(report)) >= 2


@pytest.mark.parametrize("which", ["pass_verdict", "cross_talk_verdict"])
def test_markdown_parses_and_carries_the_verdict(which: str, request: pytest.FixtureRequest) -> None:
    report: Report = load(request.getfixturevalue(which))
    text = render_markdown(report)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    kinds = [t.type for t in tokens]
    assert "table_open" in kinds and "heading_open" in kinds
    rows = sum(t.type == "tr_open" for t in tokens)
    assert rows == 1 + len(report.arms)
    heading = tokens[kinds.index("heading_open") + 1].content
    assert report.verdict.outcome.value in heading
    # Each item as read (its escapes undone): the reason as the verdict has it.
    items = ["".join(child.content for child in tokens[i + 2].children or ())
             for i, t in enumerate(tokens) if t.type == "list_item_open"]
    # Every reason is a list item, in the verdict's order (after the failing lines, if any).
    start = items.index(report.verdict.reasons[0])
    assert items[start : start + len(report.verdict.reasons)] == report.verdict.reasons


def test_cross_talk_cells_name_their_source(cross_talk_verdict: Path) -> None:
    report = load(cross_talk_verdict)
    grid = session_grid(report)
    leaked = [(row, cell) for row in grid for cell in row.cells if cell.css == "cross_talk"]
    assert leaked
    for row, cell in leaked:
        assert cell.session is not None and cell.session.outcome is SessionOutcome.CROSS_TALK
        assert [link.text for link in cell.sources] == [
            f"s{src}" for src in cell.session.cross_talk_from]
        assert all(link.anchor for link in cell.sources), "each source links to its cell"
        assert row.session not in cell.session.cross_talk_from
    html = render_html(report)
    assert html.count("<details><summary class=\"cross_talk\">") == len(leaked)


@pytest.mark.parametrize("which", ["pass_verdict", "cross_talk_verdict"])
def test_html_is_self_contained(which: str, request: pytest.FixtureRequest) -> None:
    report: Report = load(request.getfixturevalue(which))
    html = render_html(report)
    keep(request.getfixturevalue(which))
    (keep(request.getfixturevalue(which)).with_suffix(".html")).write_text(html)
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", html)
    assert html.count("<svg") == 4
    assert report.run_id in html
    assert all(str(escape(reason)) in html for reason in report.verdict.reasons)


def test_every_builtin_renderer_renders_a_real_verdict(cross_talk_verdict: Path) -> None:
    report = load(cross_talk_verdict)
    registry = builtin_renderers()
    assert registry.names() == ["console", "csv", "html", "jsonl", "junit", "md"]
    for name in registry.names():
        text = registry.get(name).render(report)
        assert report.run_id in text, name
    console = registry.get("console").render(report)
    assert console.startswith("FAIL Parallel: ") and "concurrent" in console
    assert "FAIL parallel=True correct=False" in console
