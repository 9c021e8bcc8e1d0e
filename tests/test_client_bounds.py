"""Every reply is bounded: line, event and body size, and content events past max_tokens."""

from __future__ import annotations

import json
import time

import pytest
from aiohttp import web

from batchprobe.client import ErrorKind, Limits
from batchprobe.client._errors import Fault
from batchprobe.client._stream import ReplyParser
from batchprobe.results.models import SessionResult
from client_replies import DONE, completion, exchange, sse, text_event


def _parser(limits: Limits | None = None) -> ReplyParser:
    return ReplyParser(
        "completions", want_logprobs=False, streamed=True, max_tokens=8, limits=limits or Limits()
    )


def test_a_50_mb_event_is_rejected_after_the_cap_with_bounded_memory() -> None:
    parser = _parser()
    read = b"x" * 65536
    fed = 0
    with pytest.raises(Fault) as info:
        parser.feed(b'data: {"choices":[{"text":"', 0.0)
        while fed < 50_000_000:
            parser.feed(read, 0.0)
            fed += len(read)
    assert info.value.kind is ErrorKind.MALFORMED_STREAM and "oversized" in str(info.value)
    assert fed <= Limits().max_line_bytes  # stopped at the cap, not at 50 MB


def test_a_long_line_in_small_reads_is_joined_once_linear_time() -> None:
    # 20 MB in 4 KiB reads: rebuilding the buffer per read copies ~50 GB (minutes);
    # joining the fragments once is milliseconds.
    parser = _parser(
        Limits(max_line_bytes=64 << 20, max_body_bytes=64 << 20, chars_per_token=1 << 30)
    )
    head = b'data: {"choices":[{"index":0,"text":"'
    started = time.perf_counter()
    parser.feed(head, 0.0)
    piece = b"y" * 4096
    for _ in range(5000):
        parser.feed(piece, 0.0)
    parser.feed(b'","finish_reason":"stop"}]}\n\n' + DONE, 1.0)
    elapsed = time.perf_counter() - started
    parser.finish(2.0)
    assert parser.text() == "y" * 4096 * 5000
    assert elapsed < 2.0, elapsed


def test_a_multi_line_event_past_the_cap_is_oversized() -> None:
    parser = _parser(Limits(max_line_bytes=1024))
    with pytest.raises(Fault, match="stream event is longer"):
        for _ in range(20):
            parser.feed(b"data: " + b"z" * 100 + b"\n", 0.0)


def test_stream_past_max_tokens_is_exceeded_and_not_read_further() -> None:
    events = [text_event(f" w{i}") for i in range(10_000)]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, events + [DONE])

    record = exchange(handler, completion(max_tokens=16))
    assert record.error is not None and record.error.kind is ErrorKind.EXCEEDED_MAX_TOKENS
    allowed = Limits().max_content_events(16)
    assert len(record.chunk_ends) == allowed + 1
    assert record.text == "".join(f" w{i}" for i in range(allowed + 1))


def test_reported_usage_past_max_tokens_is_exceeded() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = {"choices": [{"index": 0, "text": "a b c", "finish_reason": "length"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 5000}}
        return web.json_response(body)

    record = exchange(handler, completion(max_tokens=16, stream=False))
    assert record.error is not None and record.error.kind is ErrorKind.EXCEEDED_MAX_TOKENS
    assert "usage.completion_tokens 5000" in record.error.message


def test_within_max_tokens_and_slack_is_fine() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, [text_event("a")] * 17 + [text_event("", "length"), DONE])

    record = exchange(handler, completion(max_tokens=16))
    assert record.ok and len(record.chunk_ends) == 17


@pytest.mark.parametrize("chunked", [False, True])
def test_oversized_json_body_is_rejected(chunked: bool) -> None:
    big = json.dumps({"choices": [{"text": "q" * 5000, "finish_reason": "stop"}]}).encode()

    async def handler(request: web.Request) -> web.StreamResponse:
        if not chunked:
            return web.Response(body=big, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(0, len(big), 512):
            await resp.write(big[i : i + 512])
        await resp.write_eof()
        return resp

    record = exchange(handler, completion(stream=False), limits=Limits(max_body_bytes=2048))
    assert record.error is not None and record.error.kind is ErrorKind.MALFORMED_STREAM
    assert "oversized" in record.error.message


def test_output_is_stored_once_and_chunks_are_derived() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, [text_event("ab"), text_event("c"), text_event("de", "stop"), DONE])

    record = exchange(handler, completion())
    assert (record.text, record.chunk_ends, record.pieces) == ("abcde", [2, 3, 5], ["ab", "c", "de"])
    session = SessionResult(arm="a", workload="decode", session=0, request_id="r", start_s=0.0,
                            end_s=1.0, text=record.text, chunk_ends=record.chunk_ends)
    dumped = session.model_dump()
    assert "pieces" not in dumped and session.pieces == ["ab", "c", "de"]
