"""The fake server's concurrency-sweep support: vLLM-style ``GET /metrics`` gauges, and the
``above`` fault gate (a fault that hits only past a concurrency level)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.fake import FakeServerConfig, FakeServerProcess, FakeServerThread
from batchprobe.workload.needle import needle_line

GAUGE = re.compile(r'^(vllm:num_requests_\w+)\{model_name="((?:[^"\\]|\\.)*)"\} (\d+)$')
# Slow enough that five requests are all in flight, on a loaded machine, long before the
# first finishes: 100 ms + 9 x 50 ms each, in three rounds through two slots.
SLOW: dict[str, Any] = {"ttft_ms": 100.0, "itl_ms": 50.0}
SLOW_TOKENS = 10
# The sweep client's pace: many short replies back to back.
BRISK: dict[str, Any] = {"ttft_ms": 5.0, "itl_ms": 1.0}


def code_for(index: int) -> str:
    return f"{1_000_000 + index * 7_919:07d}"


def recall_body(code: str, *, stream: bool, max_tokens: int = 8) -> dict[str, Any]:
    prompt = f"log start\n{needle_line(code)}\nlog end\nThe access code is"
    return {"prompt": prompt, "max_tokens": max_tokens, "stream": stream}


async def scrape(session: aiohttp.ClientSession, url: str) -> dict[str, int]:
    """The gauges of ``GET /metrics``, by name; each must carry the fake's model label."""
    async with session.get(url + "/metrics") as response:
        assert response.status == 200
        assert response.content_type == "text/plain"
        text = await response.text()
    gauges: dict[str, int] = {}
    lines = text.splitlines()
    for line in lines:
        if line.startswith("# TYPE "):
            assert line.endswith(" gauge")
            continue
        match = GAUGE.match(line)
        assert match is not None, line
        gauges[match[1]] = int(match[3])
    return gauges


def counts(gauges: dict[str, int]) -> tuple[int, int]:
    return gauges["vllm:num_requests_running"], gauges["vllm:num_requests_waiting"]


class Reply:
    def __init__(self, status: int, text: str, finish_reason: str | None) -> None:
        self.status = status
        self.text = text
        self.finish_reason = finish_reason


async def send(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    *,
    on_end: asyncio.Semaphore | None = None,
) -> Reply:
    """Send one completion; release ``on_end`` the moment its end is read (``[DONE]``, or
    the whole JSON body), before the connection is drained, as a pacing client would."""
    released = False

    def end() -> None:
        nonlocal released
        if on_end is not None and not released:
            released = True
            on_end.release()

    try:
        async with session.post(url + "/v1/completions", json=body) as response:
            if not body["stream"] or response.status != 200:
                data = await response.json(content_type=None)
                end()
                if response.status != 200:
                    return Reply(response.status, "", None)
                choice = data["choices"][0]
                return Reply(response.status, choice["text"], choice["finish_reason"])
            pieces: list[str] = []
            reason: str | None = None
            async for raw in response.content:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                payload = line[len("data: ") :]
                if payload == "[DONE]":
                    end()
                    continue
                event = json.loads(payload)
                for choice in event.get("choices", []):
                    pieces.append(choice["text"])
                    reason = choice["finish_reason"] or reason
            return Reply(response.status, "".join(pieces), reason)
    finally:
        end()


async def paced(
    url: str, bodies: list[dict[str, Any]], limit: int, *, fresh: bool = False
) -> list[Reply]:
    """Every body, at most ``limit`` in flight: the next goes out once one's end is read.
    ``fresh``: each on a new connection, so the server reads it while the handler of the
    one before may still be running (on a kept-alive one, aiohttp reads the next request
    only once the previous handler has returned)."""
    gate = asyncio.Semaphore(limit)
    connector = aiohttp.TCPConnector(force_close=fresh)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(body: dict[str, Any]) -> Reply:
            await gate.acquire()
            return await send(session, url, body, on_end=gate)

        return list(await asyncio.gather(*(one(body) for body in bodies)))


async def burst(url: str, bodies: list[dict[str, Any]]) -> list[Reply]:
    async with aiohttp.ClientSession() as session:
        return list(await asyncio.gather(*(send(session, url, body) for body in bodies)))


async def watch(url: str, bodies: list[dict[str, Any]]) -> tuple[list[tuple[int, int]], int]:
    """Send ``bodies`` together and scrape /metrics until they are done: every (running,
    waiting) sample, then how many replies were 200."""
    async with aiohttp.ClientSession() as session:
        sends = [asyncio.create_task(send(session, url, body)) for body in bodies]
        samples: list[tuple[int, int]] = []
        while not all(task.done() for task in sends):
            samples.append(counts(await scrape(session, url)))
            await asyncio.sleep(0.01)
        replies = [await task for task in sends]
        samples.append(counts(await scrape(session, url)))
    return samples, sum(reply.status == 200 for reply in replies)


def slow_bodies(count: int) -> list[dict[str, Any]]:
    return [recall_body(code_for(i), stream=True, max_tokens=SLOW_TOKENS) for i in range(count)]


# --- GET /metrics --------------------------------------------------------------------------


def test_metrics_idle_are_zero_with_the_model_label() -> None:
    async def go(url: str) -> str:
        async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return await response.text()

    with FakeServerThread(FakeServerConfig(ttft_ms=0, itl_ms=0)) as server:
        text = asyncio.run(go(server.base_url))
    assert text == (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="fake-model"} 0\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{model_name="fake-model"} 0\n'
    )


def test_metrics_escape_the_model_label() -> None:
    async def go(url: str) -> str:
        async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as response:
            return await response.text()

    with FakeServerThread(FakeServerConfig(model_id='a"b\\c')) as server:
        text = asyncio.run(go(server.base_url))
    assert 'vllm:num_requests_running{model_name="a\\"b\\\\c"} 0' in text.splitlines()


def test_metrics_count_slot_holders_running_and_the_rest_waiting() -> None:
    config = FakeServerConfig(batch_cap=2, **SLOW)
    with FakeServerThread(config) as server:
        samples, ok = asyncio.run(watch(server.base_url, slow_bodies(5)))
    assert ok == 5
    assert all(running <= 2 for running, _ in samples)
    assert (2, 3) in samples  # all five received, two generating
    assert all(running + waiting <= 5 for running, waiting in samples)
    assert samples[-1] == (0, 0)


def test_metrics_serial_runs_one_at_a_time() -> None:
    config = FakeServerConfig(batching="serial", **SLOW)
    with FakeServerThread(config) as server:
        samples, ok = asyncio.run(watch(server.base_url, slow_bodies(3)))
    assert ok == 3
    assert all(running <= 1 for running, _ in samples)
    assert (1, 2) in samples
    assert samples[-1] == (0, 0)


def test_metrics_continuous_under_the_cap_waits_for_none() -> None:
    config = FakeServerConfig(batch_cap=8, **SLOW)
    with FakeServerThread(config) as server:
        samples, ok = asyncio.run(watch(server.base_url, slow_bodies(3)))
    assert ok == 3
    assert (3, 0) in samples
    assert all(waiting == 0 for _, waiting in samples)


# --- fault_when="above" --------------------------------------------------------------------


def above(fault: str, limit: int, **timing: Any) -> FakeServerConfig:
    values: dict[str, Any] = {"fault": fault, "fault_when": "above", "fault_above": limit}
    return FakeServerConfig(**values, **(timing or BRISK))


def test_config_fault_above_defaults_to_one_and_rejects_negative() -> None:
    assert FakeServerConfig().fault_above == 1
    with pytest.raises(ValueError, match="fault_above"):
        FakeServerConfig(fault_above=-1)


def slow_final_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reply's end (its last bytes) takes 20 ms to flush, as on a busy socket: the
    handler resumes after the client may have read the end and sent its next request."""
    original = web.StreamResponse.write_eof

    async def write_eof(self: web.StreamResponse, data: bytes = b"") -> None:
        await original(self, data)
        await asyncio.sleep(0.02)

    monkeypatch.setattr(web.StreamResponse, "write_eof", write_eof)


@pytest.mark.parametrize("slow_flush", [False, True])
@pytest.mark.parametrize("stream", [True, False])
def test_above_spares_a_client_that_keeps_k_in_flight(
    stream: bool, slow_flush: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crux: a reply stops counting before its last bytes, so the next request, sent
    the moment the end is read, never finds K + 1 in flight, however slow the flush. (With
    the count dropped after the flush instead, the slow-flush stream case has most replies
    corrupted: the next request arrives on its fresh connection during the flush.)"""
    if slow_flush:
        slow_final_flush(monkeypatch)
    codes = [code_for(i) for i in range(40)]
    bodies = [recall_body(code, stream=stream, max_tokens=4) for code in codes]
    with FakeServerThread(above("corrupt", 3)) as server:
        replies = asyncio.run(paced(server.base_url, bodies, limit=3, fresh=slow_flush))
    assert [reply.status for reply in replies] == [200] * 40
    assert [reply.text.strip() for reply in replies] == codes


@pytest.mark.parametrize("stream", [True, False])
def test_above_hits_a_client_that_keeps_k_plus_one_in_flight(stream: bool) -> None:
    codes = [code_for(i) for i in range(40)]
    bodies = [recall_body(code, stream=stream, max_tokens=4) for code in codes]
    with FakeServerThread(above("corrupt", 3, ttft_ms=20.0, itl_ms=1.0)) as server:
        replies = asyncio.run(paced(server.base_url, bodies, limit=4))
    assert [reply.status for reply in replies] == [200] * 40
    wrong = [reply for reply, code in zip(replies, codes) if reply.text.strip() != code]
    assert wrong
    for reply in wrong:
        answer = reply.text.strip()
        assert answer.isdigit() and len(answer) == 7 and answer not in codes


# Four together with K = 2, TTFT far above the burst's arrival spread: the third and fourth
# arrivals find 3 and 4 in flight, the first two find 1 and 2 and are spared for good
# (decided on arrival, unlike "concurrent").
BURST_TIMING: dict[str, Any] = {"ttft_ms": 300.0, "itl_ms": 2.0}


def burst_of_four(fault: str, *, stream: bool) -> tuple[list[str], list[Reply]]:
    codes = [code_for(i) for i in range(4)]
    bodies = [recall_body(code, stream=stream) for code in codes]
    with FakeServerThread(above(fault, 2, **BURST_TIMING)) as server:
        return codes, asyncio.run(burst(server.base_url, bodies))


@pytest.mark.parametrize("stream", [True, False])
def test_above_http_500_hits_the_arrivals_past_k(stream: bool) -> None:
    codes, replies = burst_of_four("http_500", stream=stream)
    assert sorted(reply.status for reply in replies) == [200, 200, 500, 500]
    for reply, code in zip(replies, codes):
        if reply.status == 200:
            assert reply.text.strip() == code


@pytest.mark.parametrize("stream", [True, False])
def test_above_finish_error_hits_the_arrivals_past_k(stream: bool) -> None:
    codes, replies = burst_of_four("finish_error", stream=stream)
    assert sorted(str(reply.finish_reason) for reply in replies) == [
        "error",
        "error",
        "stop",
        "stop",
    ]
    for reply, code in zip(replies, codes):
        assert reply.text.strip() == ("" if reply.finish_reason == "error" else code)


@pytest.mark.parametrize("fault", ["corrupt", "cross_talk"])
def test_above_wrong_answers_hit_the_arrivals_past_k(fault: str) -> None:
    codes, replies = burst_of_four(fault, stream=True)
    answers = [reply.text.strip() for reply in replies]
    wrong = [(answer, code) for answer, code in zip(answers, codes) if answer != code]
    assert len(wrong) == 2
    for answer, _ in wrong:
        if fault == "cross_talk":
            assert answer in codes  # another session's code
        else:
            assert answer.isdigit() and answer not in codes


@pytest.mark.parametrize(("limit", "faulted"), [(0, True), (1, False)])
def test_above_a_lone_request_counts_itself(limit: int, faulted: bool) -> None:
    code = code_for(0)
    with FakeServerThread(above("http_500", limit)) as server:
        (reply,) = asyncio.run(burst(server.base_url, [recall_body(code, stream=True)]))
    assert (reply.status == 500) is faulted


def test_cli_fault_above_is_a_usage_error_below_zero() -> None:
    result = CliRunner().invoke(main, ["fake-server", "--fault-above", "-1"])
    assert result.exit_code == 2
    assert "--fault-above" in result.output
    help_text = CliRunner().invoke(main, ["fake-server", "--help"]).output
    assert "--fault-above" in help_text
    assert "above" in help_text


def test_cli_fault_when_above_serves_the_gate() -> None:
    args = ("--ttft-ms", "0", "--itl-ms", "0", "--fault", "http_500")
    with FakeServerProcess(*args, "--fault-when", "above", "--fault-above", "0") as server:
        (hit,) = asyncio.run(burst(server.base_url, [recall_body(code_for(0), stream=False)]))
    with FakeServerProcess(*args, "--fault-when", "above", "--fault-above", "1") as server:
        (spared,) = asyncio.run(burst(server.base_url, [recall_body(code_for(0), stream=False)]))
    assert (hit.status, spared.status) == (500, 200)
