"""`batchprobe run` with its output piped, as in a CI log: progress lines arrive as they happen.

The fake server runs in this process behind a middleware that notes, on this test's clock, when
each request's reply ended; a reader thread notes when each progress line arrived. Each step's
line must arrive before any request of the next step has finished: a run that buffers its
progress until the end (what a rich bar does off a terminal) fails this by whole steps.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from batchprobe.cli._render import arm_line
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.results import read_report

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
    assert [a.spec.role for a in arms][:1] == ["arm"] and len(arms) >= 5, [a.spec.name for a in arms]
    text = [line for _, line in lines]
    at: dict[str, float] = {}
    for arm in arms:
        expected = arm_line(arm)
        found = [t for t, line in lines if line.endswith(expected)]
        assert found, f"no progress line {expected!r} in {text}"
        at[arm.spec.name] = found[0]
    assert any("bisection starts" in line for line in text), text
    # Wrong answers are named on the failing step's line, ✓ on the correct ones.
    step_lines = {a.spec.name: arm_line(a) for a in arms}
    env = report.envelope
    assert env is not None and env.first_failing_n == 4, step_lines
    assert "✓" in step_lines["sweep@1"] and "✗" in step_lines["sweep@4"], step_lines
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
    lines = [arm_line(a) for a in report.arms]
    if mode == "off":
        assert done.stderr == "", done.stderr
    else:
        assert "plan" in done.stderr and "arm serial (N=1)" in done.stderr, done.stderr
        assert not any(line in done.stderr for line in lines), "rich draws bars, not lines"
