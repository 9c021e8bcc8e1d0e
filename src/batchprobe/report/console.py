"""The terminal summary: a table of the arms, the verdict, its reasons and diagnoses."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from batchprobe.report._cells import ARM_COLUMNS, arm_cells
from batchprobe.report._envelope import CONSOLE_COLUMNS, console_cells, envelope_facts
from batchprobe.report.compare import RunsComparison
from batchprobe.results.models import Outcome, Report

_WIDTH = 160


def stdout_console() -> Console:
    """The console for results on stdout; a log file or pipe gets wide lines, not 80 columns."""
    out = Console()
    return out if out.is_terminal else Console(width=_WIDTH)


def summary_table(report: Report) -> Table:
    table = Table(title=f"batchprobe run {report.run_id}")
    for column in ARM_COLUMNS:
        table.add_column(column, justify="right" if column != "arm" else "left")
    for arm in report.arms:
        table.add_row(*arm_cells(report, arm))
    return table


def envelope_table(report: Report) -> Table | None:
    """The sweep's steps, compact: where throughput, latency and correctness bend."""
    env = report.envelope
    if env is None or not env.steps:
        return None
    table = Table(title="sweep envelope")
    for column in CONSOLE_COLUMNS:
        table.add_column(column, justify="left" if column in ("kind", "correct") else "right",
                         overflow="ellipsis", max_width=44 if column == "correct" else None)
    for step in env.steps:
        style = "red" if step.correct is False else None
        table.add_row(*map(escape, console_cells(report, step)), style=style)
    return table


def _print_envelope(console: Console, report: Report) -> None:
    table = envelope_table(report)
    if table is None:
        return
    console.print(table)
    for fact in envelope_facts(report):
        console.print(f"  {escape(fact.label)}: [bold]{escape(fact.value)}[/]", overflow="fold")
    for note in report.envelope.notes if report.envelope else []:
        console.print(f"  [yellow]note:[/] {escape(note)}")


def print_summary(console: Console, report: Report, output: str | None = None) -> None:
    """What `batchprobe run` prints at the end; ``output`` is the verdict file's path."""
    if report.arms:
        console.print(summary_table(report))
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
        table.add_column(f"{chr(ord('A') + i)}: {run.label}", justify="right")
    for fact in comp.facts:
        style = "bold" if fact.differs else None
        table.add_row(escape(fact.label), *map(escape, fact.values), style=style)
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
