"""When a dropped stream's client hangs up beside a long prompt: once that prompt is on the
wire, however late a client worker process says so; at ``latest`` chunks only while the long
prompt holds no slot (the wave has every slot)."""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web

from aioserver import serve
from batchprobe.client import CompletionRequest, OpenAIClient, RequestRecord, Timeouts, run
from batchprobe.send.wave_state import Live, Wave
from batchprobe.workload.shapes import HangUp

DROPPED, LONG = 0, 1
WHEN = HangUp(tokens=1, beside=LONG, latest=4)


def _event(text: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice], "object": "text_completion"}).encode() + b"\n\n"


async def _stream(wave: Wave, dropped: Live, chunks: int) -> None:
    for n in range(1, chunks + 1):
        wave.progress(dropped, n)
        await asyncio.sleep(0)


def test_a_long_prompt_holding_a_slot_is_waited_for_past_latest() -> None:
    async def go() -> tuple[bool, bool, list[int] | None]:
        wave = Wave()
        dropped, _, _ = wave.arrive(DROPPED, 0)
        event = asyncio.Event()
        watch = asyncio.ensure_future(wave.hang_up(dropped, WHEN, event))
        wave.progress(dropped, 0)
        long, _, _ = wave.arrive(LONG, 0)  # its send began: a slot, not yet on the wire
        await _stream(wave, dropped, 3 * WHEN.latest)
        before = event.is_set()
        wave.progress(long, 0)  # on the wire, relayed late
        await asyncio.wait_for(watch, 1.0)
        return before, event.is_set(), dropped.waiting_at_hang_up

    before, after, waiting = asyncio.run(go())
    assert (before, after) == (False, True)
    assert waiting == [LONG]


def test_a_long_prompt_with_no_slot_lets_the_drop_go_at_latest() -> None:
    async def go() -> tuple[bool, list[int] | None]:
        wave = Wave()
        dropped, _, _ = wave.arrive(DROPPED, 0)
        event = asyncio.Event()
        watch = asyncio.ensure_future(wave.hang_up(dropped, WHEN, event))
        wave.progress(dropped, 0)
        await _stream(wave, dropped, WHEN.latest)
        await asyncio.wait_for(watch, 1.0)
        return event.is_set(), dropped.waiting_at_hang_up

    assert asyncio.run(go()) == (True, [])


def test_a_drop_after_the_first_chunk_holds_when_the_rest_of_a_short_reply_is_already_here() -> None:
    """A dropped turn's short reply: the client's loop is held up just after the first chunk
    (a busy client) while the server sends the rest and ends. The hang-up still lands before
    the next read, with the first chunk only: a wave in which the drop came too late to be one
    is the situation the shape promised and did not make."""

    async def go() -> RequestRecord:
        async def handler(request: web.Request) -> web.StreamResponse:
            await request.read()
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(_event("a"))
            await asyncio.sleep(0.05)  # the client has read it, and is busy
            for text in "bcdefg":
                await resp.write(_event(text))
            await resp.write(_event("h", "stop") + b"data: [DONE]\n\n")
            return resp

        wave = Wave()
        state, _, _ = wave.arrive(DROPPED, 0)
        event = asyncio.Event()
        await wave.hang_up(state, HangUp(tokens=1), event)

        def progress(chunks: int) -> None:
            wave.progress(state, chunks)
            if chunks:
                time.sleep(0.3)  # the rest arrives and waits in the socket meanwhile

        request = CompletionRequest(request_id="r", prompt="drop me", max_tokens=8)
        async with serve(handler) as url, OpenAIClient(url, timeouts=Timeouts(connect=2.0, total=10.0)) as client:
            return await client.complete(request, progress, event)

    record = run(go())
    assert record.hung_up and record.error is None
    assert record.text == "a"
