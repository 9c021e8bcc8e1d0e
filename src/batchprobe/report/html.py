"""The HTML report: one self-contained offline file (jinja2 template, inline SVG plots, no JS)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from batchprobe.judge.checks import run_checks
from batchprobe.judge.views import RequestStatus, RequestViews
from batchprobe.report._cells import ARM_COLUMNS, arm_cells, headline, subject
from batchprobe.report._envelope import (
    PAIR_COLUMNS,
    PRIMARY_STEP_COLUMNS,
    SECONDARY_STEP_COLUMNS,
    correct_mark,
    load_sources,
    pair_cells,
    split_cells,
)
from batchprobe.report._error import run_error
from batchprobe.report._failures import Link, cell_id, failure_rows, session_of, soft_findings
from batchprobe.report._headline import answer, cards, failing_lines
from batchprobe.report.compare import RunsComparison
from batchprobe.results.findings import FindingKind
from batchprobe.results.models import Divergence, Report, SessionResult, Workload

_ANSWER_CHARS = 600


@dataclass(frozen=True)
class Cell:
    css: str  # the judged status's colour class
    label: str
    session: SessionResult | None
    divergence: Divergence | None
    sources: tuple[Link, ...] = ()  # cross-talk: "← sN", each linked to its source's cell
    anchor: str | None = None  # the cell's id (the first cell of its request only)


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


def _cell(report: Report, arm: str, s: SessionResult | None, found: RequestViews) -> Cell:
    """A request's cell, coloured by its judged status (``judge.views``), never re-judged."""
    if s is None:
        return Cell("none", "not run", None, None)
    comp = report.comparison(arm)
    div = comp.divergence(s.workload, s.session) if comp else None
    view = found.of(arm, s)
    kinds = view.kinds
    if view.status is RequestStatus.FAILED:
        if FindingKind.CROSS_TALK in kinds:
            sources = tuple(Link(f"s{i}", cell_id(src) if (src := session_of(report, s.arm, i))
                                 else None) for i in s.cross_talk_from)
            return Cell("cross_talk", "cross-talk ←", s, div, sources)
        if kinds == (FindingKind.ERROR,) and s.error is not None:
            return Cell("error", s.error.kind.value, s, div)
        return Cell("error" if FindingKind.ERROR in kinds else "miss", view.label, s, div)
    if view.status is RequestStatus.SOFT:
        label = "flip (right on replay)" if FindingKind.FLIP in kinds else view.label
        return Cell("diverged", label, s, div)
    if view.status is RequestStatus.NOT_JUDGED:
        return Cell("none", view.label, s, div)
    return Cell("hit" if s.hit else "ok", "hit" if s.hit else "ok", s, div)


def session_grid(report: Report) -> list[GridRow]:
    """Requests (rows, each item and each repeat of it) × arms (columns)."""
    keys: dict[_Key, str | None] = {}
    for arm in report.arms:
        for s in arm.sessions:
            keys.setdefault(_key(s), s.shape)
    order = sorted(keys, key=lambda k: (report.config.workloads.index(k[0])
                                        if k[0] in report.config.workloads else 99, k[1], k[2]))
    by_arm = {a.spec.name: {_key(s): s for s in a.sessions} for a in report.arms}
    found = RequestViews(report)
    return [GridRow(k[0], k[1], k[2], keys[k],
                    [_cell(report, a.spec.name, by_arm[a.spec.name].get(k), found)
                     for a in report.arms])
            for k in order]


@dataclass(frozen=True)
class GridGroup:
    title: str | None  # a sweep step (or the rest); None: the plain grid of arms
    css: str  # the step's correctness colour class
    rows: list[GridRow]


@dataclass(frozen=True)
class Grid:
    columns: list[str]
    groups: list[GridGroup]

    @property
    def rows(self) -> int:
        return sum(len(g.rows) for g in self.groups)


_STEP_CSS = {True: "hit", False: "error", None: "none"}


def _sweep_grid(report: Report) -> Grid:
    """A sweep's grid: one group of rows per step (its items), not one column per step.

    Each step runs its own items, so a column per step would be mostly "not run". Instead the
    columns are each item's serial reference (the baseline's session, or the bisection's
    reference pass's) and the step's; every session of every arm still has its cell. Where
    two reference arms hold the same item, each keeps its own column.
    """
    env = report.envelope
    assert env is not None
    by_arm = {a.spec.name: {_key(s): s for s in a.sessions} for a in report.arms}
    found = RequestViews(report)
    sources = [a.spec.name for a in report.arms if a.spec.role != "step"]
    merged = len(sources) > 1 and sum(len(by_arm[a]) for a in sources) == len(
        {k for a in sources for k in by_arm[a]})
    order = {w: i for i, w in enumerate(report.config.workloads)}

    def sort(keys: set[_Key]) -> list[_Key]:
        return sorted(keys, key=lambda k: (order.get(k[0], 99), k[1], k[2]))

    def reference_cells(k: _Key) -> list[Cell]:
        if merged:
            arm = next((a for a in sources if k in by_arm[a]), None)
            return [_cell(report, arm, by_arm[arm][k], found) if arm
                    else _cell(report, "", None, found)]
        return [_cell(report, a, by_arm[a].get(k), found) for a in sources]

    groups: list[GridGroup] = []
    in_steps: set[_Key] = set()
    titled: list[tuple[str, str, str]] = []  # (arm, group title, css)
    for step in sorted(env.steps, key=lambda s: s.n):
        kind = " · bisect" if step.kind == "bisect" else ""
        titled.append((step.arm, f"{step.arm} · N={step.n}{kind} · {correct_mark(step)}",
                       _STEP_CSS[step.correct]))
    judged = {s.arm for s in env.steps}
    # A step arm the envelope has no step for (the run stopped during it) keeps its sessions.
    titled += [(a.spec.name, f"{a.spec.name} · N={a.spec.concurrency} · not judged", "none")
               for a in report.arms if a.spec.role == "step" and a.spec.name not in judged]
    for arm, title, css in titled:
        sessions = by_arm.get(arm, {})
        in_steps |= set(sessions)
        rows = [GridRow(k[0], k[1], k[2], sessions[k].shape,
                        [*reference_cells(k), _cell(report, arm, sessions[k], found)])
                for k in sort(set(sessions))]
        groups.append(GridGroup(title, css, rows))
    rest = {k for a in sources for k in by_arm[a]} - in_steps
    if rest:
        rows = []
        for k in sort(rest):
            first = next(s for a in sources if (s := by_arm[a].get(k)))
            rows.append(GridRow(k[0], k[1], k[2], first.shape,
                                [*reference_cells(k), Cell("none", "not run", None, None)]))
        groups.append(GridGroup("in no step", "none", rows))
    columns = ["serial reference"] if merged else sources
    return Grid([*columns, "the step"], groups)


def _anchored(found: Grid) -> Grid:
    """Each request's first cell gets its anchor (a reference shown in two groups keeps one)."""
    seen: set[str] = set()
    groups = []
    for group in found.groups:
        rows = []
        for row in group.rows:
            cells = []
            for cell in row.cells:
                anchor = cell_id(cell.session) if cell.session is not None else None
                if anchor is not None and anchor not in seen:
                    seen.add(anchor)
                    cell = dataclasses.replace(cell, anchor=anchor)
                cells.append(cell)
            rows.append(dataclasses.replace(row, cells=cells))
        groups.append(dataclasses.replace(group, rows=rows))
    return Grid(found.columns, groups)


def grid(report: Report) -> Grid:
    """The page's sessions grid: arms as columns, or, for a sweep, steps as groups of rows."""
    if report.envelope is not None and any(a.spec.role == "step" for a in report.arms):
        return _anchored(_sweep_grid(report))
    return _anchored(Grid([a.spec.name for a in report.arms],
                          [GridGroup(None, "", session_grid(report))]))


def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("batchprobe.report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _log_path(report: Report) -> str | None:
    """The engine log of the last arm that has one (where a dying engine wrote its last words)."""
    return next((a.log_path for a in reversed(report.arms) if a.log_path), None)


def render_html(report: Report) -> str:
    # matplotlib is imported only when a page is drawn: `batchprobe run` stays quick to start.
    from batchprobe.report._plots import ENVELOPE_KEY, figures

    message, traceback = run_error(report)
    drawn = figures(report)
    env = report.envelope
    steps = sorted(env.steps, key=lambda s: s.n) if env else []
    return _environment().get_template("report.html.j2").render(
        report=report,
        headline=headline(report),
        answer=answer(report),
        subject=subject(report),
        columns=ARM_COLUMNS,
        rows=[arm_cells(report, a) for a in report.arms],
        figures=[f for f in drawn if f.key != ENVELOPE_KEY],
        envelope_figure=next((f for f in drawn if f.key == ENVELOPE_KEY), None),
        cards=cards(report),
        failing=failing_lines(report),
        failures=failure_rows(report),
        soft=soft_findings(report),
        primary_columns=PRIMARY_STEP_COLUMNS,
        secondary_columns=SECONDARY_STEP_COLUMNS,
        steps=[(s, *split_cells(report, s)) for s in steps],
        load_sources=load_sources(env) if env else [],
        pair_columns=PAIR_COLUMNS,
        pair_rows=[pair_cells(p) for p in env.throughput] if env else [],
        grid=grid(report),
        checks=run_checks(report),
        error_message=message,
        error_traceback=traceback,
        log_path=_log_path(report),
        answer_chars=_ANSWER_CHARS,
        config_json=report.config.model_dump_json(indent=2),
        environment_json=report.environment.model_dump_json(indent=2),
    )


def render_comparison_html(comp: RunsComparison) -> str:
    from batchprobe.report._sweep_plots import overlay_figure

    return _environment().get_template("compare.html.j2").render(
        comp=comp, overlay=overlay_figure(comp.curves))


class HtmlRenderer:
    name = "html"
    suffix = ".html"

    def render(self, report: Report) -> str:
        return render_html(report)


RENDERER = HtmlRenderer()
