"""Terminal progress of `batchprobe run` (the closing summary lives in batchprobe.report)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from batchprobe.results.models import ArmResult, SessionResult


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
            # Live throughput: tokens so far over the time since the arm's first request.
            tokens = sum(len(s.chunk_ends) for s in arm.sessions)
            span = max(s.end_s for s in arm.sessions)
            rate = f"{tokens / span:.0f} tok/s" if span > 0 else ""
            note = f"{rate}  errors {errors}" if errors else rate
            self.progress.update(task, advance=1, note=note)

    def arm_finished(self, arm: ArmResult) -> None:
        pass
