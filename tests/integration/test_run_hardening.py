"""Runs against servers that misbehave in ways the fake server has no mode for, and the
requests the probe sends: no seed unless asked, recorded per arm."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from click.testing import CliRunner

from aioserver import Handler
from batchprobe.cli import main
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe import plan_run, run_plan
from batchprobe.results import SCHEMA_VERSION, Outcome, Status, read_report
from threadserver import serve_in_thread

# The burst wave alone: these servers count requests.
TINY: dict[str, object] = {
    "quick": True, "sessions": 2, "workloads": "decode", "max_tokens": 8, "shapes": "burst"
}


def _completion_stream(tokens: int) -> bytes:
    chunks = [
        {"choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}]} for i in range(tokens)
    ]
    chunks.append({
        "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens},
    })  # fmt: skip
    events = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(events).encode()


Reply = Callable[[int], Awaitable[web.Response | None]]


def openai_like(on_completion: Reply) -> Handler:
    """A minimal completions server; ``on_completion(n)`` may replace the n-th reply (1-based)."""
    count = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal count
        if request.path == "/v1/models":
            return web.json_response({"object": "list", "data": [{"id": "tiny"}]})
        if request.path != "/v1/completions":
            return web.Response(status=404)
        count += 1
        body = await request.json()
        special = await on_completion(count)
        if special is not None:
            return special
        return web.Response(
            body=_completion_stream(min(int(body["max_tokens"]), 8)),
            content_type="text/event-stream",
        )

    return handler


def test_dead_generation_with_a_live_http_side_is_engine_died(tmp_path: Path) -> None:
    async def dies_after_four(count: int) -> web.Response | None:
        # The top-logprobs discovery, the warm-up and 2 decode sessions answered; then the
        # generation side is gone for good while /v1/models still answers (what mlx-lm does
        # when its generation thread dies).
        if count > 4:
            await asyncio.sleep(3600)
        return None

    with serve_in_thread(openai_like(dies_after_four)) as url:
        plan = plan_run(base_url=url, output=tmp_path / "v.json", liveness_timeout_s=1.0, **TINY)
        report = run_plan(plan)
    assert report.status is Status.ENGINE_DIED, report.error
    assert report.arms[0].server_alive_after is False
    assert report.arms[0].metrics is not None and report.arms[0].metrics.ok_sessions == 2
    assert report.verdict.correct is False
    assert read_report(plan.output) == report


def test_a_failed_warm_up_is_an_error_of_its_arm(tmp_path: Path) -> None:
    async def warm_up_fails(count: int) -> web.Response | None:
        # 1: the top-logprobs discovery; 2: the warm-up.
        return web.Response(status=500, text="model failed to load") if count == 2 else None

    with serve_in_thread(openai_like(warm_up_fails)) as url:
        report = run_plan(plan_run(base_url=url, output=tmp_path / "v.json", **TINY))
    assert report.status is Status.OK
    arm = report.arms[0]
    assert arm.warm_up_error is not None and arm.warm_up_error.http_status == 500
    assert report.verdict.outcome is Outcome.FAIL
    assert any(f.kind.value == "warm_up" and f.arm == arm.spec.name and f.hard
               for f in report.findings)
    assert any("the warm-up request failed (http_status)" in r for r in report.verdict.reasons)


def test_a_server_answering_html_is_inconclusive_not_fail(tmp_path: Path) -> None:
    async def html(request: web.Request) -> web.StreamResponse:
        return web.Response(text="<html><body>Welcome to nginx!</body></html>",
                            content_type="text/html")  # fmt: skip

    out = tmp_path / "v.json"
    with serve_in_thread(html) as url:
        result = CliRunner().invoke(
            main, ["run", "--base-url", url, "--model", "m", "--sessions", "2", "--workloads",
                   "decode", "--shapes", "burst", "--output", str(out)],
        )  # fmt: skip
    report = read_report(out)
    assert report.verdict.outcome is Outcome.INCONCLUSIVE, report.verdict.reasons
    assert "got no answer from the server" in report.verdict.reasons[0]
    assert result.exit_code == 2


def test_requests_carry_no_seed_unless_asked_and_the_body_is_recorded(tmp_path: Path) -> None:
    with FakeServerThread(FakeServerConfig(ttft_ms=2, itl_ms=1)) as server:
        plain = run_plan(plan_run(base_url=server.base_url, output=tmp_path / "a.json", **TINY))
        seeded = run_plan(
            plan_run(base_url=server.base_url, output=tmp_path / "b.json", request_seed=7, seed=3,
                     **TINY)
        )  # fmt: skip
    for arm in plain.arms:
        body = arm.request_body
        assert body is not None and "seed" not in body, body
        assert body["temperature"] == 0.0 and body["model"] == "fake-model"
        assert body["max_tokens"] == 8 and body["stream"] is True
    assert all(arm.request_body and arm.request_body["seed"] == 7 for arm in seeded.arms)
    assert seeded.config.seed == 3 and seeded.config.request_seed == 7


def test_a_bug_exits_2_and_the_verdict_keeps_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object, **kwargs: object) -> float:
        raise ZeroDivisionError("a bug in the arm")

    monkeypatch.setattr("batchprobe.probe.run.run_waves", broken)
    out = tmp_path / "v.json"
    with FakeServerThread(FakeServerConfig(ttft_ms=2, itl_ms=1)) as server:
        result = CliRunner().invoke(
            main, ["run", "--base-url", server.base_url, "--sessions", "2", "--workloads",
                   "decode", "--shapes", "burst", "--output", str(out)],
        )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "internal error: ZeroDivisionError: a bug in the arm" in result.stderr
    data = json.loads(out.read_text())
    assert data["schema_version"] == SCHEMA_VERSION and data["status"] == "error"
    assert data["error"]["message"] == "internal error: ZeroDivisionError: a bug in the arm"
    assert "ZeroDivisionError" in data["error"]["traceback"]
    assert "in broken" in data["error"]["traceback"]


def test_a_closed_stdout_pipe_keeps_the_exit_code_and_prints_no_traceback(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    with FakeServerThread(FakeServerConfig(ttft_ms=2, itl_ms=1, batching="serial")) as server:
        probe = subprocess.Popen(
            [sys.executable, "-m", "batchprobe", "run", "--base-url", server.base_url,
             "--sessions", "2", "--workloads", "decode", "--shapes", "burst", "--output", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert probe.stdout is not None and probe.stderr is not None
        probe.stdout.readline()  # like `| head -1`: read one line, then go away
        probe.stdout.close()
        stderr = probe.stderr.read().decode()
        probe.stderr.close()
        probe.wait(timeout=60)
    outcome = json.loads(out.read_text())["verdict"]["outcome"]
    assert outcome == "FAIL"  # a serial server is not parallel
    assert probe.returncode == 1, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
