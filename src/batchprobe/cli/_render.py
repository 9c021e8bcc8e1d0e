"""Progress of `batchprobe run` (the closing summary lives in batchprobe.report).

Three ways to show it, chosen by ``--progress``:

- ``plain`` (the default off a terminal: CI logs, pipes): the plan at the start (requests,
  prompt and decode tokens), one line per arm or sweep step as it ends, an estimate of the
  time left once the first one has run, a line per phase (the references, the replays, the
  bisection) and for each install or launch step, and a heartbeat whenever nothing else was
  said for a while (the phase, requests done of planned, elapsed): a piped log is never silent
  for more than ``HEARTBEAT_S``. Each line is flushed at once;
- ``rich`` (the default on a terminal): a bar per arm with elapsed time and ETA, and a line for
  the plan (arms done of planned, the wrong answers the judge has found so far);
- ``off``: nothing.

Every mark is read from the judge's findings, never from a raw answer: an arm's line says what
the judge could say as it ended (errors, cross-talk, broken streams: ✗; answers that wait for
their cold reference: "awaiting reference", not wrong), and after the final pass
(``judged``) one line per step or arm gives its final mark, so the log ends with the truth.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Literal

from rich.console import Console
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

from batchprobe._safe import console_text
from batchprobe.cli._plan import RunPlan
from batchprobe.judge.checks import arm_correct, run_checks
from batchprobe.probe.state import PlanSummary
from batchprobe.probe.state import QuietListener as LibraryQuiet
from batchprobe.report.console import escape
from batchprobe.results.findings import Finding
from batchprobe.results.models import ArmResult, Report, RunConfig, SessionResult

ProgressMode = Literal["auto", "plain", "rich", "off"]
PROGRESS_MODES: tuple[ProgressMode, ...] = ("auto", "plain", "rich", "off")

HEARTBEAT_S = 30.0  # a piped log says something at least this often
_WAKE_S = 5.0  # how often the heartbeat looks (a quiet spell ends within this of HEARTBEAT_S)


def _kinds(findings: Sequence[Finding]) -> str:
    """``2 recall miss, 1 error`` (per finding kind, the sessions it names)."""
    kinds: Counter[str] = Counter()
    for f in findings:
        kinds[f.kind.value.replace("_", " ")] += max(len(f.sessions), 1)
    return ", ".join(f"{n} {k}" for k, n in kinds.most_common())


def finding_mark(arm: ArmResult, findings: Sequence[Finding], awaiting: int) -> str:
    """What the judge could say of an arm as it ended: ``✗ 3 wrong (2 cross talk, 1 error)``,
    ``… 4 awaiting reference``, or ``✓ 12 answers``."""
    hard = [f for f in findings if f.hard]
    if hard:
        sessions = {(f.arm, s) for f in hard for s in f.sessions}
        what = f"{len(sessions)} wrong" if sessions else "failed"
        mark = f"✗ {what} ({_kinds(hard)})"
    elif awaiting:
        mark = f"… {awaiting} awaiting reference"
    else:
        mark = f"✓ {len(arm.sessions)} answers"
    soft = [f for f in findings if f.severity == "soft"]
    return f"{mark}; soft: {_kinds(soft)}" if soft else mark


def arm_line(arm: ArmResult, findings: Sequence[Finding], awaiting: int) -> str:
    """``sweep@8 N=8 ✗ 3 wrong (2 cross talk, 1 error)  812.3 tok/s  2.1 s``."""
    m = arm.metrics
    rate = None if m is None else (m.aggregate_decode_tokens_per_s or m.decode_tokens_per_s)
    tok = "- tok/s" if rate is None else f"{rate:.1f} tok/s"
    wall = "-" if m is None else f"{m.wall_s:.1f} s"
    mark = finding_mark(arm, findings, awaiting)
    return f"{arm.spec.name} N={arm.spec.concurrency} {mark}  {tok}  {wall}"


def final_lines(report: Report) -> list[str]:
    """After the final pass: one line per sweep step (or arm) with its final mark."""
    env = report.envelope
    if env is not None and env.steps:
        return [f"final: {s.arm} N={s.n} {_final_mark(s.correct, s.hard_kinds)}"
                for s in sorted(env.steps, key=lambda s: s.n)]
    checks = run_checks(report)
    lines = []
    for arm in report.arms:
        name = arm.spec.name
        kinds = [f.kind.value for f in report.findings if f.hard and f.arm == name]
        lines.append(f"final: {name} N={arm.spec.concurrency} "
                     f"{_final_mark(arm_correct(checks, name), kinds)}")
    return lines


def _final_mark(correct: bool | None, hard_kinds: Sequence[str]) -> str:
    if correct is False:
        kinds = ", ".join(dict.fromkeys(k.replace("_", " ") for k in hard_kinds))
        return f"✗ {kinds}" if kinds else "✗"
    return "✓ correct" if correct else "not judged"


class Heartbeat:
    """Calls ``tick`` every ``every_s`` until stopped, in a daemon thread. ``wait`` is the
    pause (an ``Event.wait``: True once stopped); a test injects its own and calls ``run``."""

    def __init__(self, tick: Callable[[], None], every_s: float = _WAKE_S,
                 wait: Callable[[float], bool] | None = None) -> None:
        self._tick = tick
        self._every = every_s
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread = threading.Thread(target=self.run, name="progress-heartbeat", daemon=True)

    def run(self) -> None:
        while not self._wait(self._every):
            self._tick()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._every * 2)


class PlainListener:
    """One flushed line per event, and a heartbeat in quiet spells: for logs and pipes,
    where nothing redraws."""

    def __init__(self, write: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 heartbeat_s: float = HEARTBEAT_S, timer: bool = True) -> None:
        self._write = write or _stderr_line
        self.plan = RunPlan(clock)
        self._last = clock()  # when the log last said something
        self._heartbeat_s = heartbeat_s
        self._lock = threading.Lock()
        self._timer = Heartbeat(self.tick) if timer else None

    def __enter__(self) -> Self:
        if self._timer is not None:
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.stop()

    def expect(self, config: RunConfig) -> None:
        self.plan.expect(config)

    def _line(self, text: str) -> None:
        with self._lock:
            self._last = self.plan.clock()
            # A line may quote a server's error: shown, never acted on by the terminal.
            self._write(f"[{self.plan.elapsed()}] {console_text(text)}")

    def tick(self) -> None:
        """The heartbeat: a line when nothing was said for ``heartbeat_s``."""
        if self.plan.clock() - self._last >= self._heartbeat_s - _WAKE_S:
            self._line(self.plan.heartbeat())

    def note(self, text: str) -> None:
        self._line(text)

    def plan_ready(self, summary: PlanSummary) -> None:
        self._line(self.plan.planned(summary))

    def phase(self, name: str, requests: int) -> None:
        self._line(self.plan.entered(name, requests))

    def arm_started(self, arm: ArmResult, total: int) -> None:
        self.plan.started_arm(arm)
        if self.plan.bisection_starts(arm):
            self._line(f"bisection starts: pinning the first failing N (first probe N="
                       f"{arm.spec.concurrency})")

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        self.plan.done += 1

    def arm_finished(self, arm: ArmResult, findings: Sequence[Finding], awaiting: int) -> None:
        self.plan.arms_done += 1
        self._line(arm_line(arm, findings, awaiting))
        estimate = self.plan.estimate(arm)
        if estimate is not None:
            self._line(estimate)

    def judged(self, report: Report) -> None:
        self.plan.phase = "judged"
        for line in final_lines(report):
            self._line(line)


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class RichListener:
    """Draws one progress bar per arm on a terminal, with elapsed time and ETA, under a line for
    the plan: arms done of planned, and the wrong answers the judge found so far."""

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
        self.plan = RunPlan(clock)
        self.tasks: dict[str, TaskID] = {}
        self._overall: TaskID | None = None
        self._estimate = ""

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
        total = max(plan.planned_arms, plan.arms_done, 1)
        note = f"[red]{plan.wrong} wrong answers[/]" if plan.wrong else "0 wrong answers"
        note += f"  {escape(self._estimate)}" if self._estimate else ""
        text = "plan (bisecting)" if plan.bisecting else "plan"
        if self._overall is None:
            self._overall = self.progress.add_task(text, total=total, note=note)
        self.progress.update(self._overall, description=text, total=total,
                             completed=plan.arms_done, note=note)

    def note(self, text: str) -> None:
        self.progress.console.print(f"  {escape(text)}")

    def plan_ready(self, summary: PlanSummary) -> None:
        self.note(self.plan.planned(summary))

    def phase(self, name: str, requests: int) -> None:
        self.note(self.plan.entered(name, requests))

    def arm_started(self, arm: ArmResult, total: int) -> None:
        self.plan.started_arm(arm)
        if self.plan.bisection_starts(arm):
            self.note(f"bisection starts at N={arm.spec.concurrency}")
        self._update_plan()
        self.tasks[arm.spec.name] = self.progress.add_task(
            f"arm {arm.spec.name} (N={arm.spec.concurrency})", total=total, note=""
        )

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        self.plan.done += 1
        task = self.tasks.get(arm.spec.name)
        if task is None:
            return
        # Live throughput: tokens so far over the time since the arm's first request.
        tokens = sum(len(s.chunk_ends) for s in arm.sessions)
        span = max(s.end_s for s in arm.sessions)
        rate = f"{tokens / span:.0f} tok/s" if span > 0 else ""
        self.progress.update(task, advance=1, note=rate)

    def arm_finished(self, arm: ArmResult, findings: Sequence[Finding], awaiting: int) -> None:
        self.plan.arms_done += 1
        self.plan.wrong += len({(f.arm, s) for f in findings if f.hard for s in f.sessions})
        task = self.tasks.get(arm.spec.name)
        if task is not None:
            self.progress.update(task, note=escape(finding_mark(arm, findings, awaiting)))
        estimate = self.plan.estimate(arm)
        if estimate is not None:
            self._estimate = estimate
        self._update_plan()

    def judged(self, report: Report) -> None:
        self._estimate = ""
        self._update_plan()
        for line in final_lines(report):
            self.note(line)


class QuietListener(LibraryQuiet):
    """``--progress off``: the library's quiet listener, with what the CLI calls besides."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def expect(self, config: RunConfig) -> None:
        pass

    def note(self, text: str) -> None:
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
