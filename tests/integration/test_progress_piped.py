"""`batchprobe run` with its output piped, as in a CI log: progress lines arrive as they happen,
and they tell the truth.

The fake server runs in this process behind a middleware that notes, on this test's clock, when
each request's reply ended; a reader thread notes when each progress line arrived. Each step's
line must arrive before any request of the next step has finished: a run that buffers its
progress until the end (what a rich bar does off a terminal) fails this by whole steps. The log
ends with each step's final mark, the final pass's.

The listeners' own tests drive them with a fake clock and call the heartbeat's tick by hand:
nothing here waits for real seconds to pass.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from io import StringIO
from pathlib import Path

import pytest
from aiohttp import web
from rich.console import Console

from batchprobe.cli._render import (
    HEARTBEAT_S,
    Heartbeat,
    PlainListener,
    QuietListener,
    RichListener,
    final_lines,
)
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe.state import PlanSummary, ProbeListener
from batchprobe.results import read_report
from batchprobe.results.findings import Finding, FindingKind
from batchprobe.results.models import (
    ArmResult,
    ArmSpec,
    Environment,
    Report,
    RunConfig,
    SessionResult,
    Status,
    Verdict,
)
from batchprobe.results.sweep import Envelope, SweepStep

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _read_lines(stream: object, into: list[tuple[float, str]]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.append((time.monotonic(), line.rstrip("\n")))


def test_piped_progress_prints_each_step_before_the_next_one_ends(tmp_path: Path) -> None:
    ended: list[tuple[float, str]] = []

    @web.middleware
    async def note_ends(request: web.Request, handler: Handler) -> web.StreamResponse:
        reply = await handler(request)
        ended.append((time.monotonic(), request.headers.get("x-request-id", "")))
        return reply

    output = tmp_path / "verdict.json"
    fake = FakeServerThread(FakeServerConfig(ttft_ms=20.0, itl_ms=8.0, fault="corrupt",
                                             fault_when="above", fault_above=3))
    fake._app.middlewares.append(note_ends)  # before it starts: aiohttp freezes them then
    lines: list[tuple[float, str]] = []
    with fake as server:
        argv = [sys.executable, "-m", "batchprobe", "run", "--base-url", server.base_url,
                "--sessions", "4", "--haystack-tokens", "200", "--max-tokens", "24",
                "--sweep", "1,2,4,8", "--output", str(output)]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              encoding="utf-8") as proc:
            reader = threading.Thread(target=_read_lines, args=(proc.stderr, lines))
            reader.start()
            proc.stdout.read()  # type: ignore[union-attr]
            code = proc.wait(timeout=300)
            reader.join(timeout=30)
            assert code == 1, ("a fault above 3 in flight fails the sweep", lines)
            reader.join(timeout=30)
    report = read_report(output)
    arms = [a for a in report.arms if a.spec.role != "reference"]
    # The sweep's steps (its serial baseline is the references, sent after them), then the
    # bisection's.
    assert len(arms) >= 5 and {a.spec.role for a in arms} == {"step"}, [a.spec.name for a in arms]
    text = [line for _, line in lines]
    at: dict[str, float] = {}
    for arm in arms:
        head = f"] {arm.spec.name} N={arm.spec.concurrency} "
        found = [t for t, line in lines if head in line]
        assert found, f"no progress line {head!r} in {text}"
        at[arm.spec.name] = found[0]
    assert any("bisection starts" in line for line in text), text
    assert "] plan: " in text[0] and any("] estimate: at most about " in line for line in text), text
    env = report.envelope
    assert env is not None and env.first_failing_n == 4, text
    # The log ends with the final pass's marks: every step, ✓ or ✗ as the envelope says.
    finals = [line.split("] ", 1)[1] for line in text if "] final: " in line]
    assert finals == final_lines(report) and text[-len(finals):] == [
        line for line in text if "] final: " in line], text
    assert "final: sweep@1 N=1 ✓ correct" in finals and any(
        line.startswith("final: sweep@4 N=4 ✗") for line in finals), finals
    # A step the final pass calls correct was never called wrong on the way.
    good = {s.arm for s in env.steps if s.correct}
    for line in text:
        name = line.split("] ", 1)[-1].split(" ", 1)[0]
        if name in good:
            assert "✗" not in line and "wrong" not in line, line
    for arm, after in itertools.pairwise(arms):
        next_ends = [t for t, rid in ended if f"-{after.spec.name}-" in rid]
        assert next_ends, f"no request of {after.spec.name} reached the server"
        assert at[arm.spec.name] < min(next_ends), (
            f"the line of {arm.spec.name} came after {after.spec.name}'s first reply ended")


@pytest.mark.parametrize("mode", ["off", "rich"])
def test_progress_off_prints_nothing_and_rich_draws_the_plan(tmp_path: Path, mode: str) -> None:
    output = tmp_path / "verdict.json"
    with FakeServerThread(FakeServerConfig(ttft_ms=5.0, itl_ms=4.0)) as server:
        done = subprocess.run(
            [sys.executable, "-m", "batchprobe", "run", "--base-url", server.base_url,
             "--sessions", "2", "--haystack-tokens", "200", "--max-tokens", "16", "--quick",
             "--progress", mode, "--output", str(output)],
            capture_output=True, text=True, encoding="utf-8", timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = read_report(output)
    if mode == "off":
        assert done.stderr == "", done.stderr
    else:
        assert "plan" in done.stderr and "arm serial (N=1)" in done.stderr, done.stderr
        assert not any(f"] {a.spec.name} N=" in done.stderr for a in report.arms), (
            "rich draws bars, not lines")
        assert all(line in done.stderr for line in final_lines(report)), done.stderr


# --- The listeners, on a fake clock --------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


_ENV = Environment(batchprobe_version="0", python="3", platform="test")


def _session(arm: str, session: int) -> SessionResult:
    return SessionResult(arm=arm, workload="decode", session=session, request_id=f"{arm}-{session}",
                         start_s=0.0, end_s=1.0)


def _step_arm(n: int, sessions: int) -> ArmResult:
    name = f"sweep@{n}"
    return ArmResult(spec=ArmSpec(name=name, concurrency=n, depth=n, role="step"), state="done",
                     sessions=[_session(name, i) for i in range(sessions)])


def _plain() -> tuple[PlainListener, _Clock, list[str]]:
    clock, lines = _Clock(), []
    listener = PlainListener(write=lines.append, clock=clock, timer=False)
    listener.expect(RunConfig(base_url="http://127.0.0.1:1", sweep=[1, 2, 4]))
    return listener, clock, lines


def test_every_listener_is_a_probe_listener() -> None:
    listeners: list[ProbeListener] = [
        PlainListener(write=lambda _: None, timer=False), RichListener(_console()), QuietListener()]
    assert len(listeners) == 3


def _console() -> Console:
    """A quiet console for the rich listener, read back by the test."""
    return Console(file=StringIO(), force_terminal=False, width=200)


def test_the_plan_and_an_estimate_from_the_first_step_s_rate() -> None:
    listener, clock, lines = _plain()
    listener.plan_ready(PlanSummary(requests=100, prompt_tokens=5000, decode_tokens=2400))
    assert lines[-1].endswith("plan: 100 requests, ~5000 prompt tokens, up to 2400 decode tokens "
                              "(the references the judge asks for come after, counted as they go)")
    arm = _step_arm(1, 10)
    listener.arm_started(arm, 10)
    for s in arm.sessions:
        listener.session_done(arm, s)
    clock.now += 5.0  # 10 requests in 5 s: 2 a second, 90 to go
    listener.arm_finished(arm, [], 0)
    assert lines[-2].endswith("sweep@1 N=1 ✓ 10 answers  - tok/s  -")
    assert "estimate: about 0:45 left for 90 more requests" in lines[-1], lines
    listener.arm_finished(_step_arm(2, 4), [], 0)
    assert sum("estimate" in line for line in lines) == 1


def test_the_estimate_prices_the_plan_s_tokens_at_the_first_step_s_serial_rates() -> None:
    listener, clock, lines = _plain()
    listener.plan_ready(PlanSummary(requests=100, prompt_tokens=5000, decode_tokens=2400))
    arm = _step_arm(1, 2)
    # Each: 200 prompt tokens in 0.5 s to the first token, then 10 more tokens in 1 s.
    arm.sessions = [s.model_copy(update={"prompt_tokens": 200, "completion_tokens": 11,
                                         "first_token_s": 0.5, "last_token_s": 1.5})
                    for s in arm.sessions]
    listener.arm_started(arm, 2)
    for s in arm.sessions:
        listener.session_done(arm, s)
    clock.now += 3.0
    listener.arm_finished(arm, [], 0)
    # 4600 prompt tokens at 400/s and 2378 decode tokens at 10/s: 11.5 s + 237.8 s.
    assert ("estimate: at most about 4:09 left for 98 more requests (their tokens at the first "
            "arm's one-at-a-time 400 prompt and 10.0 decode tokens/s") in lines[-1], lines


def test_an_answer_awaiting_its_reference_is_not_called_wrong() -> None:
    listener, _, lines = _plain()
    listener.arm_finished(_step_arm(4, 12), [], 9)
    assert "sweep@4 N=4 … 9 awaiting reference" in lines[-1]
    assert "✗" not in lines[-1] and "wrong" not in lines[-1]
    cross = Finding(arm="sweep@4", step=4, shape="burst", kind=FindingKind.CROSS_TALK,
                    sessions=[3], sources=[5], message="session 3 answered with session 5's code")
    flip = cross.model_copy(update={"kind": FindingKind.FLIP, "severity": "soft", "sessions": [1]})
    listener.arm_finished(_step_arm(4, 12), [cross, flip], 2)
    assert "sweep@4 N=4 ✗ 1 wrong (1 cross talk); soft: 1 flip" in lines[-1]


def _judged_report(steps: list[SweepStep]) -> Report:
    return Report(run_id="r", started_at="2026-01-01T00:00:00Z", status=Status.OK,
                  config=RunConfig(base_url="http://127.0.0.1:1"), environment=_ENV,
                  verdict=Verdict(), envelope=Envelope(baseline="serial", steps=steps))


def test_the_log_ends_with_each_step_s_final_mark() -> None:
    listener, _, lines = _plain()
    steps = [SweepStep(n=1, arm="sweep@1", references="serial", correct=True),
             SweepStep(n=4, arm="sweep@4", references="serial", correct=False,
                       hard_kinds=["recall_miss", "count_broke", "recall_miss"]),
             SweepStep(n=2, arm="sweep@2", references="serial", correct=None)]
    listener.judged(_judged_report(steps))
    assert [line.split("] ", 1)[1] for line in lines] == [
        "final: sweep@1 N=1 ✓ correct", "final: sweep@2 N=2 not judged",
        "final: sweep@4 N=4 ✗ recall miss, count broke"]


def test_the_heartbeat_speaks_in_every_quiet_spell_with_the_phase_and_requests() -> None:
    listener, clock, lines = _plain()
    listener.plan_ready(PlanSummary(requests=40, prompt_tokens=100, decode_tokens=100))
    listener.phase("references, round 1", 8)
    arm = _step_arm(1, 3)
    for s in arm.sessions:
        listener.session_done(arm, s)
    said = len(lines)
    clock.now += 10.0
    listener.tick()
    assert len(lines) == said, "not quiet long enough yet"
    # The timer wakes every 5 s; nothing else is said for five minutes.
    gaps, last = [], clock.now - 10.0
    for _ in range(60):
        clock.now += 5.0
        before = len(lines)
        listener.tick()
        if len(lines) > before:
            gaps.append(clock.now - last)
            last = clock.now
    assert gaps and max(gaps) <= HEARTBEAT_S, gaps
    assert lines[-1].endswith("… references, round 1: 3/48 requests done, 5:00 elapsed"), lines[-1]


def test_the_heartbeat_timer_ticks_until_stopped() -> None:
    ticks: list[int] = []
    waits: list[float] = []
    answers = iter([False, False, False, True])

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return next(answers)

    Heartbeat(lambda: ticks.append(1), every_s=5.0, wait=wait).run()
    assert len(ticks) == 3 and waits == [5.0] * 4
    # The real one starts and stops (an Event) without waiting out its period.
    beat = Heartbeat(lambda: None, every_s=3600.0)
    beat.start()
    beat.stop()


def test_rich_marks_come_from_findings_and_it_prints_the_final_marks() -> None:
    console = _console()
    listener = RichListener(console)
    with listener:
        arm = _step_arm(4, 2)
        listener.arm_started(arm, 2)
        listener.arm_finished(arm, [], 2)
        assert listener.plan.wrong == 0
        listener.judged(_judged_report(
            [SweepStep(n=4, arm="sweep@4", references="serial", correct=True)]))
    assert "final: sweep@4 N=4 ✓ correct" in console.file.getvalue()  # type: ignore[attr-defined]
