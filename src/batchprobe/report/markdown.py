"""The markdown summary: for pull requests and `$GITHUB_STEP_SUMMARY`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from batchprobe._safe import md_cell, md_code, md_fence
from batchprobe.report._cells import ARM_COLUMNS, arm_cells, headline, subject
from batchprobe.report._envelope import (
    PAIR_COLUMNS,
    PRIMARY_STEP_COLUMNS,
    SECONDARY_STEP_COLUMNS,
    load_sources,
    pair_cells,
    split_cells,
)
from batchprobe.report._error import run_error
from batchprobe.report._headline import answer, cards, failing_lines
from batchprobe.report.compare import RunsComparison
from batchprobe.results.models import Outcome, Report

_ICON = {Outcome.PASS: "✅", Outcome.FAIL: "❌", Outcome.INCONCLUSIVE: "⚠️"}


def _cell(text: str) -> str:
    """Inline text (a table cell, a list item): one line, no tag, link or code (``md_cell``)."""
    return md_cell(text)


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    head = list(header)
    lines = ["| " + " | ".join(_cell(h) for h in head) + " |",
             "|" + "|".join(" --- " for _ in head) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _code(text: str) -> list[str]:
    return md_fence(text)


def _envelope(report: Report) -> list[str]:
    env = report.envelope
    if env is None:
        return []
    lines = ["", "### Envelope", ""]
    lines += [f"- note: {_cell(note)}" for note in env.notes]
    if env.steps:
        steps = sorted(env.steps, key=lambda s: s.n)
        split = [split_cells(report, s) for s in steps]
        lines += ["", *_table(PRIMARY_STEP_COLUMNS, (p for p, _ in split))]
        lines += ["", "<details><summary>more columns per step</summary>", "",
                  *_table(SECONDARY_STEP_COLUMNS, (m for _, m in split)), "", "</details>"]
        sources = load_sources(env)
        if sources:
            lines += ["", f"Server load from {_cell(', '.join(sources))}."]
    if env.throughput:
        lines += ["", "Throughput pairs (one request alone, then N at once, in turn):", "",
                  *_table(PAIR_COLUMNS, (pair_cells(p) for p in env.throughput))]
    return lines


def _answer_detail(report: Report) -> list[str]:
    """The cards in one line, one line per failing step and shape, the reasons folded away."""
    found = cards(report)
    lines = [" · ".join(f"{f.label}: **{_cell(f.value)}**" for f in found), ""] if found else []
    lines += [f"- ❌ {_cell(line.text)}" for line in failing_lines(report)]
    reasons = report.verdict.reasons
    if reasons:
        lines += ["", f"<details><summary>the verdict's reasons ({len(reasons)})</summary>", "",
                  *(f"- {_cell(reason)}" for reason in reasons), "", "</details>"]
    return lines


def render_markdown(report: Report) -> str:
    v = report.verdict
    lines = [f"## {_ICON[v.outcome]} batchprobe: {v.outcome.value}. {_cell(answer(report))}", "",
             (f"{_cell(subject(report))} · run {md_code(report.run_id)} · "
              f"{_cell(headline(report))}"), ""]
    lines += _answer_detail(report)
    lines += _envelope(report)
    if report.arms:
        lines += ["", *_table(ARM_COLUMNS, (arm_cells(report, a) for a in report.arms))]
    if report.diagnoses:
        lines += ["", "### Diagnoses"]
    for d in report.diagnoses:
        extra = [f"fixed in {_cell(d.fixed_in)}" if d.fixed_in else "",
                 f"patch {md_code(f'--patch {d.patch}')}" if d.patch else ""]
        tail = "; ".join(e for e in extra if e)
        lines += ["", f"**{_cell(f'[{d.issue_id}] {d.title}')}**" + (f" ({tail})" if tail else "")]
        if d.remedy:
            lines += ["", f"Remedy: {_cell(d.remedy)}"]
        if d.evidence:
            lines += ["", *_code("\n".join(d.evidence))]
    message, _ = run_error(report)
    if message:
        lines += ["", "### Error", "", _cell(message)]
    if report.warnings:
        lines += ["", "### Warnings", "", *(f"- {_cell(w)}" for w in report.warnings)]
    return "\n".join(lines) + "\n"


def render_comparison_markdown(comp: RunsComparison) -> str:
    header = ["", *(f"{chr(ord('A') + i)}: {r.label}" for i, r in enumerate(comp.runs))]
    rows = [[f"**{f.label}**" if f.differs else f.label, *f.values]
            for f in [*comp.envelope, *comp.per_n, *comp.facts]]
    for fig in comp.figures:
        cells = [fig.cell(i) + (f" ({d})" if (d := fig.delta(i)) else "")
                 for i in range(len(comp.runs))]
        rows.append([fig.label, *cells])
    verdict = "❌ regression" if comp.regressions else "✅ no regression"
    lines = [f"## batchprobe compare: {verdict}", "", *_table(header, rows), ""]
    lines += [f"- ❌ {_cell(r.run)}: {_cell(r.message)}" for r in comp.regressions]
    lines += [f"- ✅ {_cell(r.run)}: {_cell(r.message)}" for r in comp.improvements]
    return "\n".join(lines) + "\n"


def append_step_summary(markdown: str, summary: Path) -> None:
    """Append to a GitHub Actions step summary (the file ``$GITHUB_STEP_SUMMARY`` names)."""
    with summary.open("a", encoding="utf-8") as handle:
        handle.write(markdown + "\n")


class MarkdownRenderer:
    name = "md"
    suffix = ".md"

    def render(self, report: Report) -> str:
        return render_markdown(report)


RENDERER = MarkdownRenderer()
