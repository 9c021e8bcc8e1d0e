"""A request's progress starts once it is on the wire: ``on_progress(0)`` comes when its body
has been written to the connection, before any reply, from the client and from a client worker
process alike (a hang-up timed beside another request waits for that request to be at the
server, not merely handed to a worker)."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from aioserver import serve
from batchprobe.client import (
    ClientPool,
    CompletionRequest,
    OpenAIClient,
    RequestRecord,
    Timeouts,
    run,
)


def _event(text: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice], "object": "text_completion"}).encode() + b"\n\n"


@pytest.mark.parametrize("procs", [0, 1])
def test_progress_says_the_request_is_on_the_wire_before_any_reply(procs: int) -> None:
    """The server answers only once the client has said the request is on the wire; it has
    read the whole body by then."""

    async def go() -> tuple[list[int], list[str], RequestRecord]:
        on_wire = asyncio.Event()
        bodies: list[str] = []
        calls: list[int] = []

        async def handler(request: web.Request) -> web.StreamResponse:
            bodies.append(json.loads(await request.read())["prompt"])
            await on_wire.wait()
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(_event("a"))
            await resp.write(_event("b", "stop") + b"data: [DONE]\n\n")
            return resp

        def progress(chunks: int) -> None:
            calls.append(chunks)
            on_wire.set()

        request = CompletionRequest(request_id="r", prompt="on the wire", max_tokens=2)
        timeouts = Timeouts(connect=2.0, total=10.0)
        async with serve(handler) as url, OpenAIClient(url, timeouts=timeouts) as client:
            if procs:
                async with ClientPool(client, procs) as pool:
                    record = await pool.complete(request, progress)
            else:
                record = await client.complete(request, progress)
        return calls, bodies, record

    calls, bodies, record = run(go())
    assert record.error is None and record.text == "ab"
    assert bodies == ["on the wire"]
    assert calls[0] == 0, calls
