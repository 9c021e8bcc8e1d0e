"""Reply builders and one-request helpers shared by the client tests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from aioserver import Handler, serve
from batchprobe.client import CompletionRequest, OpenAIClient, RequestRecord, run


async def sse(request: web.Request, packets: list[bytes], gap: float = 0.0) -> web.StreamResponse:
    """Write each packet separately (``gap`` seconds apart) as an event stream."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for packet in packets:
        await resp.write(packet)
        if gap:
            await asyncio.sleep(gap)
    await resp.write_eof()
    return resp


def event(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def text_event(text: str, finish: str | None = None, **choice: Any) -> bytes:
    return event({"choices": [{"index": 0, "text": text, "finish_reason": finish, **choice}]})


def chat_event(delta: dict[str, Any], finish: str | None = None, **choice: Any) -> bytes:
    return event({"choices": [{"index": 0, "delta": delta, "finish_reason": finish, **choice}]})


USAGE = event(
    {
        "choices": [],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 5},
        },
    }
)
DONE = b"data: [DONE]\n\n"


def complete(url: str, req: CompletionRequest, **kwargs: Any) -> RequestRecord:
    async def go() -> RequestRecord:
        async with OpenAIClient(url, **kwargs) as client:
            return await client.complete(req)

    return run(go())


def completion(**fields: Any) -> CompletionRequest:
    fields.setdefault("request_id", "req-1")
    fields.setdefault("prompt", "The access code for vault 3 is")
    fields.setdefault("max_tokens", 8)
    return CompletionRequest(**fields)


def exchange(handler: Handler, req: CompletionRequest, **kwargs: Any) -> RequestRecord:
    async def go() -> RequestRecord:
        async with serve(handler) as url, OpenAIClient(url, **kwargs) as client:
            return await client.complete(req)

    return run(go())
