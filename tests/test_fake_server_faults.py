"""Each fault and bug mode of the fake server, driven by plain aiohttp requests."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.workload.needle import needle_line

CODES = ["1111111", "2222222", "3333333", "4444444"]


def config(fault: str, **overrides: Any) -> FakeServerConfig:
    values: dict[str, Any] = {"ttft_ms": 30.0, "itl_ms": 2.0, "fault": fault, **overrides}
    return FakeServerConfig(**values)


def recall_body(code: str, *, stream: bool = False) -> dict[str, Any]:
    prompt = f"log start\n{needle_line(code)}\nlog end\nThe access code is"
    return {"prompt": prompt, "max_tokens": 8, "stream": stream}


class Reply:
    """What came back: status, the data events (or JSON body), whether [DONE] arrived."""

    def __init__(self, status: int, events: list[Any], raw_lines: list[str], done: bool) -> None:
        self.status = status
        self.events = events
        self.raw_lines = raw_lines
        self.done = done

    @property
    def text(self) -> str:
        return "".join(e["choices"][0]["text"] for e in self.events if e.get("choices"))

    @property
    def finish_reason(self) -> str | None:
        reasons = [e["choices"][0]["finish_reason"] for e in self.events if e.get("choices")]
        return next((r for r in reversed(reasons) if r), None)


async def send(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Reply:
    async with session.post(url + "/v1/completions", json=body) as response:
        if not body.get("stream") or response.status != 200:
            return Reply(response.status, [await response.json(content_type=None)], [], False)
        events: list[Any] = []
        lines: list[str] = []
        done = False
        async for raw in response.content:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            lines.append(line)
            payload = line[len("data: ") :]
            if payload == "[DONE]":
                done = True
                continue
            try:
                events.append(json.loads(payload))
            except json.JSONDecodeError:
                events.append({"malformed": payload})
        return Reply(response.status, events, lines, done)


async def burst(url: str, bodies: list[dict[str, Any]]) -> list[Reply]:
    async with aiohttp.ClientSession() as session:
        return list(await asyncio.gather(*(send(session, url, b) for b in bodies)))


def one(url: str, body: dict[str, Any]) -> Reply:
    return asyncio.run(burst(url, [body]))[0]


def many(url: str, bodies: list[dict[str, Any]]) -> list[Reply]:
    return asyncio.run(burst(url, bodies))


@pytest.mark.parametrize("stream", [False, True])
def test_http_500_always(stream: bool) -> None:
    with FakeServerThread(config("http_500")) as server:
        reply = one(server.base_url, recall_body(CODES[0], stream=stream))
    assert reply.status == 500
    assert reply.events[0]["error"]["code"] == 500


def test_http_500_concurrent_spares_a_lone_request() -> None:
    with FakeServerThread(config("http_500", fault_when="concurrent")) as server:
        alone = one(server.base_url, recall_body(CODES[0]))
        together = many(server.base_url, [recall_body(c) for c in CODES])
    assert alone.status == 200
    assert [r.status for r in together] == [500] * 4


@pytest.mark.parametrize("stream", [False, True])
def test_finish_error_concurrent_is_200_with_no_text(stream: bool) -> None:
    with FakeServerThread(config("finish_error", fault_when="concurrent")) as server:
        alone = one(server.base_url, recall_body(CODES[0], stream=stream))
        together = many(server.base_url, [recall_body(c, stream=stream) for c in CODES])
    assert alone.status == 200
    assert alone.finish_reason == "stop"
    assert CODES[0] in alone.text
    for reply in together:
        assert reply.status == 200
        assert reply.text == ""
        assert reply.finish_reason == "error"
        assert reply.done == stream


def test_cross_talk_answers_with_another_in_flight_code() -> None:
    with FakeServerThread(config("cross_talk", fault_when="concurrent")) as server:
        alone = one(server.base_url, recall_body(CODES[0]))
        together = many(server.base_url, [recall_body(c, stream=True) for c in CODES])
    assert alone.text.strip() == CODES[0]
    answers = [r.text.strip() for r in together]
    for own, answer in zip(CODES, answers):
        assert answer != own
        assert answer in CODES
    assert sorted(answers) == sorted(CODES)  # every leak names a real source session


def test_corrupt_changes_code_digits_and_decode_tokens() -> None:
    decode = {"prompt": "write a long story", "max_tokens": 24}
    with FakeServerThread(config("none")) as healthy:
        clean = one(healthy.base_url, decode)
    with FakeServerThread(config("corrupt")) as server:
        recall = one(server.base_url, recall_body(CODES[1]))
        bad = one(server.base_url, decode)
    answer = recall.text.strip()
    assert answer.isdigit() and len(answer) == 7
    assert answer != CODES[1]
    assert answer not in CODES
    assert bad.text != clean.text
    assert len(bad.text.split()) == len(clean.text.split()) == 24


def test_busy_503_rejects_overlapping_requests() -> None:
    with FakeServerThread(config("busy_503", ttft_ms=100.0)) as server:
        replies = many(server.base_url, [recall_body(c) for c in CODES[:3]])
        later = one(server.base_url, recall_body(CODES[3]))
    statuses = sorted(r.status for r in replies)
    assert statuses == [200, 503, 503]
    busy = next(r for r in replies if r.status == 503)
    assert busy.events[0]["error"]["message"] == "text_generation_busy"
    assert later.status == 200


def test_exit_after_closes_listener_after_k_requests() -> None:
    with FakeServerThread(
        FakeServerConfig(ttft_ms=1, itl_ms=1, fault="exit_after", exit_after=2)
    ) as server:
        url = server.base_url
        assert one(url, recall_body(CODES[0])).status == 200
        assert server.stop_reason is None
        assert one(url, recall_body(CODES[1])).status == 200
        deadline = time.monotonic() + 5
        while server.stop_reason is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.stop_reason == "exit_after"
        time.sleep(0.5)  # the listener closes right after the stop
        with pytest.raises(aiohttp.ClientConnectorError):
            one(url, recall_body(CODES[2]))


def test_exit_after_cuts_streams_still_in_flight() -> None:
    fake = FakeServerConfig(ttft_ms=1, itl_ms=1, fault="exit_after", exit_after=1)
    short = {"prompt": "short", "max_tokens": 1, "stream": True}
    long = {"prompt": "long story", "max_tokens": 2000, "stream": True}

    async def go(url: str) -> tuple[Reply, BaseException | Reply]:
        async with aiohttp.ClientSession() as session:
            slow = asyncio.ensure_future(send(session, url, long))
            await asyncio.sleep(0.1)
            quick = await send(session, url, short)
            try:
                return quick, await slow
            except aiohttp.ClientError as exc:
                return quick, exc

    with FakeServerThread(fake) as server:
        quick, slow = asyncio.run(go(server.base_url))
    assert quick.done
    if isinstance(slow, Reply):
        assert not slow.done
        assert len(slow.events) < 2000
    else:
        assert isinstance(slow, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError)


def test_hang_never_answers_and_still_stops() -> None:
    async def go(url: str) -> None:
        timeout = aiohttp.ClientTimeout(total=0.5)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            with pytest.raises(asyncio.TimeoutError):
                await send(session, url, recall_body(CODES[0], stream=True))

    started = time.monotonic()
    with FakeServerThread(config("hang")) as server:
        asyncio.run(go(server.base_url))
    assert time.monotonic() - started < 3.0


def test_malformed_sse_inserts_a_non_json_line_mid_stream() -> None:
    body = {"prompt": "a decode prompt", "max_tokens": 10, "stream": True}
    with FakeServerThread(config("malformed_sse")) as server:
        reply = one(server.base_url, body)
    kinds = ["bad" if "malformed" in e else "ok" for e in reply.events]
    assert kinds.count("bad") == 1
    assert 0 < kinds.index("bad") < len(kinds) - 1
    assert reply.done


def test_malformed_non_stream_body_is_not_json() -> None:
    async def go(url: str) -> tuple[int, bytes]:
        async with aiohttp.ClientSession() as session:
            body = {"prompt": "x y", "max_tokens": 4}
            async with session.post(url + "/v1/completions", json=body) as response:
                return response.status, await response.read()

    with FakeServerThread(config("malformed_sse")) as server:
        status, raw = asyncio.run(go(server.base_url))
    assert status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)


def test_truncated_stream_closes_without_done() -> None:
    body = {"prompt": "a decode prompt", "max_tokens": 10, "stream": True}

    async def go(url: str) -> tuple[list[str], BaseException | None]:
        lines: list[str] = []
        async with (
            aiohttp.ClientSession() as session,
            session.post(url + "/v1/completions", json=body) as response,
        ):
            try:
                async for raw in response.content:
                    if raw.startswith(b"data: "):
                        lines.append(raw.decode().strip())
            except aiohttp.ClientPayloadError as exc:
                return lines, exc
        return lines, None

    with FakeServerThread(config("truncated_stream")) as server:
        lines, error = asyncio.run(go(server.base_url))
    assert isinstance(error, aiohttp.ClientPayloadError)
    assert 1 <= len(lines) < 10
    assert "data: [DONE]" not in lines


def test_buffered_sends_every_chunk_at_once_at_the_end() -> None:
    body = {"prompt": "a decode prompt", "max_tokens": 10, "stream": True}

    async def go(url: str) -> tuple[float, list[float]]:
        arrivals: list[float] = []
        async with aiohttp.ClientSession() as session:
            start = time.perf_counter()
            async with session.post(url + "/v1/completions", json=body) as response:
                async for raw in response.content:
                    if raw.startswith(b"data: {"):
                        arrivals.append(time.perf_counter() - start)
        return start, arrivals

    fake = config("buffered", ttft_ms=20.0, itl_ms=20.0)
    with FakeServerThread(fake) as server:
        _, arrivals = asyncio.run(go(server.base_url))
    assert len(arrivals) == 10
    # The first after the whole schedule (20 ms + 9 x 20 ms), where a stream sends it at 20 ms;
    # the rest with it, in one read (bounded loosely: a loaded worker can be descheduled
    # between the lines it reads).
    assert arrivals[0] > 0.18
    assert arrivals[-1] - arrivals[0] < 0.1
