"""Progress of `batchprobe run` (the closing summary lives in batchprobe.report).

Three ways to show it, chosen by ``--progress``:

- ``plain`` (the default off a terminal: CI logs, pipes): one line per arm or sweep step as it
  ends, a line when the bisection starts and for each install or launch step, every one
  flushed at once so a piped log shows it then, not at the end of the run;
- ``rich`` (the default on a terminal): a bar per arm with elapsed time and ETA, and a line for
  the plan (arms done of planned, the live count of wrong answers);
- ``off``: nothing.

The ✓/✗ of a line is what the answers themselves showed while the arm ran (errors, cross-talk,
failed self-checks); the verdict's judgement, made after the run, is the summary's.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Literal

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from typing_extensions import Self

from batchprobe.results.models import ArmResult, RunConfig, SessionOutcome, SessionResult

ProgressMode = Literal["auto", "plain", "rich", "off"]
PROGRESS_MODES: tuple[ProgressMode, ...] = ("auto", "plain", "rich", "off")


def wrong_kind(session: SessionResult) -> str | None:
    """What was wrong with one answer on its own (None: nothing it shows by itself)."""
    outcome = session.outcome
    if outcome is SessionOutcome.ERROR and session.error is not None:
        return session.error.kind.value
    if outcome is SessionOutcome.CROSS_TALK:
        return "cross-talk"
    if outcome is SessionOutcome.MISS:
        return "recall miss"
    if session.check is not None and not session.check.passed:
        return f"{session.check.kind} broke"
    return None


def _wrong(arm: ArmResult) -> Counter[str]:
    return Counter(k for s in arm.sessions if (k := wrong_kind(s)) is not None)


def arm_line(arm: ArmResult) -> str:
    """``sweep@8 N=8 ✗ 3 wrong (2 cross-talk, 1 timeout) 812.3 tok/s 2.1 s``."""
    wrong = _wrong(arm)
    if arm.error:
        mark = f"✗ {arm.error}"
    elif wrong:
        kinds = ", ".join(f"{n} {k}" for k, n in wrong.most_common())
        mark = f"✗ {sum(wrong.values())} wrong ({kinds})"
    else:
        mark = f"✓ {len(arm.sessions)} answers"
    m = arm.metrics
    rate = None if m is None else (m.aggregate_decode_tokens_per_s or m.decode_tokens_per_s)
    tok = "- tok/s" if rate is None else f"{rate:.1f} tok/s"
    wall = "-" if m is None else f"{m.wall_s:.1f} s"
    return f"{arm.spec.name} N={arm.spec.concurrency} {mark}  {tok}  {wall}"


class _Plan:
    """What the listeners share: the planned depths, the bisection's start, the clock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.started = clock()
        self.depths: set[int] = set()
        self.planned = 0
        self.done = 0
        self.wrong = 0
        self.bisecting = False

    def expect(self, config: RunConfig) -> None:
        self.depths = set(config.sweep or [])
        self.planned = len(config.arms) + len(self.depths)

    def bisection_starts(self, arm: ArmResult) -> bool:
        """True once: the first sweep step at a depth the plan did not list."""
        first = (arm.spec.role == "step" and bool(self.depths)
                 and arm.spec.concurrency not in self.depths and not self.bisecting)
        self.bisecting = self.bisecting or first
        return first

    def elapsed(self) -> str:
        seconds = int(self.clock() - self.started)
        return f"{seconds // 60}:{seconds % 60:02d}"


class PlainListener:
    """One flushed line per event: for logs and pipes, where nothing redraws."""

    def __init__(self, write: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._write = write or _stderr_line
        self.plan = _Plan(clock)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def expect(self, config: RunConfig) -> None:
        self.plan.expect(config)

    def _line(self, text: str) -> None:
        self._write(f"[{self.plan.elapsed()}] {text}")

    def note(self, text: str) -> None:
        self._line(text)

    def arm_started(self, arm: ArmResult, total: int) -> None:
        if self.plan.bisection_starts(arm):
            self._line(f"bisection starts: pinning the first failing N (first probe N="
                       f"{arm.spec.concurrency})")

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        pass

    def arm_finished(self, arm: ArmResult) -> None:
        self.plan.done += 1
        self._line(arm_line(arm))


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class RichListener:
    """Draws one progress bar per arm on a terminal, with elapsed time and ETA, under a line for
    the plan: arms done of planned, and the live count of wrong answers."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[note]}"),
            console=console,
            transient=False,
        )
        self.plan = _Plan(clock)
        self.tasks: dict[str, TaskID] = {}
        self._overall: TaskID | None = None

    def __enter__(self) -> Self:
        self.progress.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.__exit__(kind, exc, tb)

    def expect(self, config: RunConfig) -> None:
        self.plan.expect(config)

    def _update_plan(self) -> None:
        plan = self.plan
        total = max(plan.planned, plan.done, 1)
        note = f"[red]{plan.wrong} wrong answers[/]" if plan.wrong else "0 wrong answers"
        text = "plan (bisecting)" if plan.bisecting else "plan"
        if self._overall is None:
            self._overall = self.progress.add_task(text, total=total, note=note)
        self.progress.update(self._overall, description=text, total=total,
                             completed=plan.done, note=note)

    def note(self, text: str) -> None:
        self.progress.console.print(f"  {escape(text)}")

    def arm_started(self, arm: ArmResult, total: int) -> None:
        if self.plan.bisection_starts(arm):
            self.note(f"bisection starts at N={arm.spec.concurrency}")
        self._update_plan()
        self.tasks[arm.spec.name] = self.progress.add_task(
            f"arm {arm.spec.name} (N={arm.spec.concurrency})", total=total, note=""
        )

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        task = self.tasks.get(arm.spec.name)
        if task is None:
            return
        if wrong_kind(session) is not None:
            self.plan.wrong += 1
            self._update_plan()
        wrong = sum(_wrong(arm).values())
        # Live throughput: tokens so far over the time since the arm's first request.
        tokens = sum(len(s.chunk_ends) for s in arm.sessions)
        span = max(s.end_s for s in arm.sessions)
        rate = f"{tokens / span:.0f} tok/s" if span > 0 else ""
        note = f"{rate}  [red]{wrong} wrong[/]" if wrong else rate
        self.progress.update(task, advance=1, note=note)

    def arm_finished(self, arm: ArmResult) -> None:
        self.plan.done += 1
        self._update_plan()


class QuietListener:
    """``--progress off``."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def expect(self, config: RunConfig) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def arm_started(self, arm: ArmResult, total: int) -> None:
        pass

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        pass

    def arm_finished(self, arm: ArmResult) -> None:
        pass


Listener = PlainListener | RichListener | QuietListener


def progress_listener(mode: ProgressMode, console: Console) -> Listener:
    """The listener for ``--progress``: auto is rich on a terminal, plain elsewhere."""
    if mode == "auto":
        mode = "rich" if console.is_terminal else "plain"
    if mode == "off":
        return QuietListener()
    if mode == "rich":
        return RichListener(console)
    return PlainListener()
