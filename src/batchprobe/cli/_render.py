"""Terminal output of `batchprobe run`: progress per arm and the closing summary."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

from batchprobe.results.models import ArmResult, Outcome, Report, SessionResult


class RichListener:
    """Draws one progress bar per arm on stderr."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, TaskID] = {}

    def arm_started(self, arm: ArmResult, total: int) -> None:
        self.tasks[arm.spec.name] = self.progress.add_task(
            f"arm {arm.spec.name} (N={arm.spec.concurrency})", total=total, note=""
        )

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        task = self.tasks.get(arm.spec.name)
        if task is not None:
            errors = sum(1 for s in arm.sessions if s.error is not None)
            self.progress.update(task, advance=1, note=f"errors {errors}" if errors else "")

    def arm_finished(self, arm: ArmResult) -> None:
        pass


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def summary_table(report: Report) -> Table:
    table = Table(title=f"batchprobe run {report.run_id}")
    for column in ("arm", "N", "errors", "recall", "x-talk", "decode tok/s", "speedup",
                   "prefill tok/s", "TTFT p50", "greedy =", "cached tok"):
        table.add_column(column, justify="right" if column != "arm" else "left")
    comparisons = {c.arm: c for c in report.comparisons}
    for arm in report.arms:
        m, c = arm.metrics, comparisons.get(arm.spec.name)
        if m is None:
            table.add_row(arm.spec.name, str(arm.spec.concurrency), arm.state, *["-"] * 8)
            continue
        table.add_row(
            arm.spec.name,
            str(arm.spec.concurrency),
            str(m.sessions - m.ok_sessions),
            "-" if m.recall is None else f"{m.recall_hits}/{m.recall_sessions}",
            str(m.cross_talk_sessions),
            _fmt(m.decode_tokens_per_s, ".1f"),
            _fmt(c.decode_speedup if c else None, ".2f", "x"),
            _fmt(m.prefill_tokens_per_s, ".0f"),
            _fmt(m.ttft_s.p50 * 1000 if m.ttft_s else None, ".0f", " ms"),
            "-" if c is None or not c.greedy_compared else f"{c.greedy_matches}/{c.greedy_compared}",
            _fmt(m.cached_prompt_tokens, "d"),
        )
    return table


def print_summary(console: Console, report: Report, output: str) -> None:
    if report.arms:
        console.print(summary_table(report))
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
    console.print(f"verdict written to {escape(output)}")
