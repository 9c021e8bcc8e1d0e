"""The streamed reply's byte-rate floor and the request timeout against drip servers: a stream
that drips bytes ends as ``read_timeout`` within its window, and a slow but steady one (or a
long prefill, or keep-alive comments before the first token) is never cut."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web

from aioserver import Handler, serve
from batchprobe.client import (
    CompletionRequest,
    ErrorKind,
    OpenAIClient,
    RequestRecord,
    Timeouts,
    run,
)

# The floor scaled down 60 times (60 s -> 1 s, 128 bytes -> 64) so that a test takes seconds.
SCALED = Timeouts(connect=1.0, total=30.0, floor_window=1.0, floor_bytes=64)


def event(text: str | None = None, finish: str | None = None) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice], "object": "text_completion"}).encode() + b"\n\n"


async def _start(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    return resp


def exchange(handler: Handler, timeouts: Timeouts, max_tokens: int = 64) -> tuple[RequestRecord, float]:
    async def go() -> RequestRecord:
        async with serve(handler) as url, OpenAIClient(url, timeouts=timeouts) as client:
            return await client.complete(
                CompletionRequest(request_id="r", prompt="p", max_tokens=max_tokens))

    began = time.monotonic()
    record = run(go())
    return record, time.monotonic() - began


async def drip_after_a_token(request: web.Request) -> web.StreamResponse:
    """One token at once, then the next event one byte a second, for ever."""
    resp = await _start(request)
    await resp.write(event("a"))
    for byte in event("b" * 200):
        await resp.write(bytes([byte]))
        await asyncio.sleep(1.0 / 60)  # a byte a second, at the test's 60x scale
    return resp


def test_a_stream_dripping_after_its_first_token_ends_as_read_timeout_within_its_window() -> None:
    record, took = exchange(drip_after_a_token, SCALED)
    assert record.error is not None and record.error.kind is ErrorKind.READ_TIMEOUT
    assert record.error.message.startswith("streaming stalled: ")
    assert "under the floor of 64 bytes per 1 s" in record.error.message
    assert record.pieces == ["a"], "what came before the stall is kept"
    assert took < 3.0, f"the floor ends it within a window or two, not at the total: {took:.1f} s"


def test_the_default_floor_ends_a_byte_a_second_drip_a_minute_after_the_first_token() -> None:
    defaults = Timeouts(total=300.0)
    assert (defaults.floor_window, defaults.floor_bytes, defaults.read) == (60.0, 128, 300.0)
    assert 60 * 1 < defaults.floor_bytes, "a byte a second is under the floor"


async def silent_after_a_token(request: web.Request) -> web.StreamResponse:
    resp = await _start(request)
    await resp.write(event("a"))
    await asyncio.sleep(20)
    return resp


def test_a_stream_gone_silent_after_its_first_token_ends_within_two_windows() -> None:
    record, took = exchange(silent_after_a_token, SCALED)
    assert record.error is not None and record.error.kind is ErrorKind.READ_TIMEOUT
    assert "streaming stalled: 0 bytes in the last 1 s" in record.error.message
    assert 0.9 < took < 3.0


async def drip_before_any_token(request: web.Request) -> web.StreamResponse:
    """Bytes of an event that never ends: no token ever, so only the request timeout applies."""
    resp = await _start(request)
    await resp.write(b"data: ")
    for _ in range(100):
        await resp.write(b" ")
        await asyncio.sleep(0.1)
    return resp


def test_a_drip_before_any_token_is_bounded_by_the_request_timeout() -> None:
    timeouts = Timeouts(connect=1.0, total=2.0, floor_window=1.0, floor_bytes=64)
    record, took = exchange(drip_before_any_token, timeouts)
    assert record.error is not None and record.error.kind is ErrorKind.TOTAL_TIMEOUT
    assert "request not finished within 2 s" in record.error.message
    assert 1.9 < took < 4.0


def slow_but_steady(silence: float, gap: float, tokens: int, pings: bool = False) -> Handler:
    """``silence`` seconds of nothing (a prefill; with ``pings``: keep-alive comments), then a
    token every ``gap`` seconds, then the end."""

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await _start(request)
        waited = 0.0
        while waited < silence:
            await asyncio.sleep(0.5)
            waited += 0.5
            if pings:
                await resp.write(b":\n\n")  # what an axum/TGI server sends while it waits
        for i in range(tokens):
            await resp.write(event(" t"))
            await asyncio.sleep(gap)
        await resp.write(event(None, "length") + b"data: [DONE]\n\n")
        return resp

    return handler


def test_a_slow_but_steady_stream_after_a_long_silence_is_not_cut() -> None:
    # One token every 0.5 s after 3 s of silence: with the real floor and the scaled one.
    for timeouts in (Timeouts(total=300.0), SCALED):
        record, took = exchange(slow_but_steady(3.0, 0.5, 8), timeouts, max_tokens=8)
        assert record.error is None, (timeouts, record.error)
        assert record.pieces == [" t"] * 8 and record.finish_reason == "length"
        assert 6.5 < took < 12


def test_keep_alive_comments_before_the_first_token_are_not_cut() -> None:
    record, _ = exchange(slow_but_steady(3.0, 0.2, 6, pings=True), SCALED, max_tokens=6)
    assert record.error is None, record.error
    assert len(record.pieces) == 6


def test_a_silence_before_the_first_byte_waits_for_the_request_timeout() -> None:
    """--request-timeout is the one bound on a server still prefilling: no shorter read
    timeout hides under it (the old 120 s one did)."""

    async def late(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(2.5)
        return await slow_but_steady(0.0, 0.0, 2)(request)

    record, _ = exchange(late, Timeouts(connect=1.0, total=4.0), max_tokens=2)
    assert record.error is None, record.error
    record, took = exchange(late, Timeouts(connect=1.0, total=1.5), max_tokens=2)
    assert record.error is not None and record.error.kind is ErrorKind.TOTAL_TIMEOUT
    assert 1.4 < took < 2.4
