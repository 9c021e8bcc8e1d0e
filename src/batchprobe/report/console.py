"""The terminal summary: a table of the arms, the verdict, its reasons and diagnoses."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape as _markup_escape
from rich.table import Table

from batchprobe._safe import console_text
from batchprobe.report._cells import ARM_COLUMNS, arm_cells
from batchprobe.report._envelope import (
    CONSOLE_COLUMNS,
    PAIR_COLUMNS,
    console_cells,
    findings_mark,
    pair_cells,
)
from batchprobe.report._headline import answer, cards, failing_lines
from batchprobe.report.compare import RunsComparison
from batchprobe.results.models import Outcome, Report

_WIDTH = 160


def escape(text: str) -> str:
    """Text for rich markup that a terminal only shows: no markup, no control character
    (``console_text``: a server's ESC c would reset the terminal)."""
    return _markup_escape(console_text(text))


def stdout_console() -> Console:
    """The console for results on stdout; a log file or pipe gets wide lines, not 80 columns,
    unless $COLUMNS says how wide."""
    out = Console()
    return out if out.is_terminal or "COLUMNS" in os.environ else Console(width=_WIDTH)


def fitted_table(title: str, columns: Sequence[str], rows: list[list[str]], width: int,
                 left: Sequence[str] = ()) -> Table:
    """A table of the columns that fit ``width``, in order of importance (the first ones are
    kept); no cell is ever cut: each column is as wide as its widest cell."""
    widths = [max([len(c), *(len(r[i]) if c not in left else min(len(r[i]), 24)
                             for r in rows)]) for i, c in enumerate(columns)]
    keep: list[int] = []
    used = 1
    for i, w in enumerate(widths):
        if used + w + 3 > width and keep:
            break
        keep.append(i)
        used += w + 3
    dropped = [columns[i] for i in range(len(columns)) if i not in keep]
    caption = f"not shown at {width} columns: {', '.join(dropped)}" if dropped else None
    table = Table(title=title, caption=caption, caption_justify="left")
    for i in keep:
        name = columns[i]
        text = name in left
        table.add_column(name, justify="left" if text or i == 0 or name == "kind" else "right",
                         min_width=len(name) if text else widths[i], no_wrap=not text,
                         overflow="fold")
    for row in rows:
        table.add_row(*(escape(row[i]) for i in keep))
    return table


def summary_table(report: Report, width: int = _WIDTH) -> Table:
    rows = [arm_cells(report, arm) for arm in report.arms]
    return fitted_table(f"batchprobe run {report.run_id}", ARM_COLUMNS, rows, width)


def envelope_table(report: Report, width: int = _WIDTH) -> Table | None:
    """The sweep's steps, compact: where throughput, latency and correctness bend."""
    env = report.envelope
    if env is None or not env.steps:
        return None
    steps = sorted(env.steps, key=lambda s: s.n)
    rows = [console_cells(report, step) for step in steps]
    for row, step in zip(rows, steps):
        # The step's findings in words, or only its mark: the reasons follow in full below.
        row[2] = findings_mark(report, step) or row[2][:1]
    return fitted_table("sweep envelope", CONSOLE_COLUMNS, rows, width, left=("correct",))


def pairs_table(report: Report, width: int = _WIDTH) -> Table | None:
    """The throughput pairs parallel was decided on, and the history measurement."""
    env = report.envelope
    if env is None or not env.throughput:
        return None
    rows = [pair_cells(p) for p in env.throughput]
    return fitted_table("throughput pairs (1 alone, then N at once, in turn)", PAIR_COLUMNS,
                        rows, width, left=("machine cores busy", "note"))


def _print_answer(console: Console, report: Report) -> None:
    colour = {Outcome.PASS: "green", Outcome.FAIL: "red"}.get(report.verdict.outcome, "yellow")
    console.print(f"[bold {colour}]{report.verdict.outcome.value}[/] {escape(answer(report))}")
    for fact in cards(report):
        console.print(f"  {escape(fact.label)}: [bold]{escape(fact.value)}[/]", overflow="fold")
    for line in failing_lines(report):
        console.print(f"  [red]✗[/] {escape(line.text)}", overflow="fold")


def _print_envelope(console: Console, report: Report) -> None:
    table = envelope_table(report, console.width)
    if table is None:
        return
    console.print(table)
    pairs = pairs_table(report, console.width)
    if pairs is not None:
        console.print(pairs)
    for note in report.envelope.notes if report.envelope else []:
        console.print(f"  [yellow]note:[/] {escape(note)}")


def print_summary(console: Console, report: Report, output: str | None = None) -> None:
    """What `batchprobe run` prints at the end; ``output`` is the verdict file's path."""
    _print_answer(console, report)
    if report.arms:
        console.print(summary_table(report, console.width))
    _print_envelope(console, report)
    v = report.verdict
    colour = {Outcome.PASS: "green", Outcome.FAIL: "red"}.get(v.outcome, "yellow")
    console.print(
        f"[bold {colour}]{v.outcome.value}[/] parallel={v.parallel} correct={v.correct} "
        f"(status {report.status.value})"
    )
    for reason in v.reasons:
        console.print(f"  - {escape(reason)}")
    for d in report.diagnoses:
        fixed = f"; fixed in {d.fixed_in}" if d.fixed_in else ""
        patch = f"; patch: --patch {d.patch}" if d.patch else ""
        console.print(escape(f"  diagnosis [{d.issue_id}] {d.title}{fixed}{patch}"))
        if d.remedy:
            console.print(f"    remedy: {escape(d.remedy)}")
    for warning in report.warnings:
        console.print(f"  [yellow]warning:[/] {escape(warning)}")
    if output is not None:
        console.print(f"verdict written to {escape(output)}")


def comparison_table(comp: RunsComparison) -> Table:
    table = Table(title="batchprobe compare (deltas against the first run)")
    table.add_column("")
    for i, run in enumerate(comp.runs):
        table.add_column(escape(f"{chr(ord('A') + i)}: {run.label}"), justify="right")
    for row in [*comp.envelope, *comp.per_n, *comp.facts]:
        style = "bold" if row.differs else None
        table.add_row(escape(row.label), *map(escape, row.values), style=style)
    for fig in comp.figures:
        cells = []
        for i in range(len(comp.runs)):
            delta = fig.delta(i)
            cells.append(fig.cell(i) if delta is None else f"{fig.cell(i)} ({delta})")
        table.add_row(escape(fig.label), *cells)
    return table


def print_comparison(console: Console, comp: RunsComparison) -> None:
    console.print(comparison_table(comp))
    if not comp.regressions:
        console.print("[green]no regression[/] against the first run")
    for reg in comp.regressions:
        console.print(f"  [red]regression[/] {escape(reg.run)}: {escape(reg.message)}")
    for fixed in comp.improvements:
        console.print(f"  [green]fixed[/] {escape(fixed.run)}: {escape(fixed.message)}")


class ConsoleRenderer:
    name = "console"
    suffix = ".txt"

    def render(self, report: Report) -> str:
        console = Console(file=io.StringIO(), width=_WIDTH, record=True, color_system=None)
        print_summary(console, report)
        return console.export_text()


RENDERER = ConsoleRenderer()
