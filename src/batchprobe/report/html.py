"""The HTML report: one self-contained offline file (jinja2 template, inline SVG plots, no JS)."""

from __future__ import annotations

from dataclasses import dataclass

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from batchprobe.report._cells import ARM_COLUMNS, arm_cells, headline, subject
from batchprobe.report._error import run_error
from batchprobe.report.compare import RunsComparison
from batchprobe.results.checks import run_checks
from batchprobe.results.models import (
    Divergence,
    Report,
    SessionOutcome,
    SessionResult,
    Workload,
)

_ANSWER_CHARS = 600


@dataclass(frozen=True)
class Cell:
    css: str  # the outcome's colour class
    label: str
    session: SessionResult | None
    divergence: Divergence | None


@dataclass(frozen=True)
class GridRow:
    workload: str
    session: int
    copy: int  # repeat: 1 for the same item sent again
    shape: str | None
    cells: list[Cell]


_Key = tuple[Workload, int, int]


def _key(s: SessionResult) -> _Key:
    return s.workload, s.session, s.situation.copy_index if s.situation else 0


def _cell(report: Report, arm: str, s: SessionResult | None) -> Cell:
    if s is None:
        return Cell("none", "not run", None, None)
    comp = report.comparison(arm)
    div = comp.divergence(s.workload, s.session) if comp else None
    outcome = s.outcome
    if outcome is SessionOutcome.ERROR and s.error is not None:
        return Cell("error", s.error.kind.value, s, div)
    if outcome is SessionOutcome.CROSS_TALK:
        sources = ", ".join(f"s{i}" for i in s.cross_talk_from)
        return Cell("cross_talk", f"cross-talk ← {sources}", s, div)
    label = {SessionOutcome.HIT: "hit", SessionOutcome.MISS: "miss"}.get(outcome, "ok")
    if div is not None:
        return Cell("diverged" if outcome is not SessionOutcome.MISS else "miss",
                    f"{label} · ≠ greedy", s, div)
    return Cell(outcome.value, label, s, None)


def session_grid(report: Report) -> list[GridRow]:
    """Requests (rows, each item and each repeat of it) × arms (columns)."""
    keys: dict[_Key, str | None] = {}
    for arm in report.arms:
        for s in arm.sessions:
            keys.setdefault(_key(s), s.shape)
    order = sorted(keys, key=lambda k: (report.config.workloads.index(k[0])
                                        if k[0] in report.config.workloads else 99, k[1], k[2]))
    by_arm = {a.spec.name: {_key(s): s for s in a.sessions} for a in report.arms}
    return [GridRow(k[0], k[1], k[2], keys[k],
                    [_cell(report, a.spec.name, by_arm[a.spec.name].get(k)) for a in report.arms])
            for k in order]


def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("batchprobe.report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_html(report: Report) -> str:
    # matplotlib is imported only when a page is drawn: `batchprobe run` stays quick to start.
    from batchprobe.report._plots import figures

    message, traceback = run_error(report)
    return _environment().get_template("report.html.j2").render(
        report=report,
        headline=headline(report),
        subject=subject(report),
        columns=ARM_COLUMNS,
        rows=[arm_cells(report, a) for a in report.arms],
        figures=figures(report),
        grid=session_grid(report),
        checks=run_checks(report),
        error_message=message,
        error_traceback=traceback,
        answer_chars=_ANSWER_CHARS,
        config_json=report.config.model_dump_json(indent=2),
        environment_json=report.environment.model_dump_json(indent=2),
    )


def render_comparison_html(comp: RunsComparison) -> str:
    return _environment().get_template("compare.html.j2").render(comp=comp)


class HtmlRenderer:
    name = "html"
    suffix = ".html"

    def render(self, report: Report) -> str:
        return render_html(report)


RENDERER = HtmlRenderer()
