"""The client's edge against a hostile server: no lone surrogate gets in, a reply costs a
bounded number of bytes to read and to keep."""

from __future__ import annotations

import pytest
from aiohttp import web

from batchprobe.client import ErrorKind, Limits
from batchprobe.client._errors import Fault, classify
from batchprobe.client._stream import ReplyParser
from batchprobe.client.timeouts import Timeouts
from batchprobe.client.types import RequestRecord
from client_replies import DONE, completion, exchange, sse, text_event

_SURROGATE_EVENTS = [
    b'data: {"choices":[{"index":0,"text":"a \\ud800 b","finish_reason":null}]}\n\n',
    b'data: {"choices":[{"index":0,"text":"a \xed\xa0\x80 b","finish_reason":null}]}\n\n',
    b'data: {"choices":[{"index":0,"text":"a \xff\xfe b","finish_reason":null}]}\n\n',
]


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


@pytest.mark.parametrize("bad", _SURROGATE_EVENTS, ids=["escape", "raw", "invalid_utf8"])
def test_a_lone_surrogate_or_invalid_utf8_in_the_stream_is_a_malformed_stream(bad: bytes) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, [text_event("ok"), bad, text_event("", "stop"), DONE])

    record = exchange(handler, completion())
    assert record.error is not None and record.error.kind is ErrorKind.MALFORMED_STREAM
    assert "not JSON" in record.error.message
    dumped = record.model_dump_json()  # what crashed the verdict writer
    assert not _has_surrogate(dumped)


@pytest.mark.parametrize("bad", [b'"\\ud800"', b'"\xed\xa0\x80"'], ids=["escape", "raw"])
def test_a_lone_surrogate_in_a_json_body_is_a_malformed_stream(bad: bytes) -> None:
    body = b'{"choices":[{"index":0,"text":' + bad + b',"finish_reason":"stop"}]}'

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="application/json")

    record = exchange(handler, completion(stream=False))
    assert record.error is not None and record.error.kind is ErrorKind.MALFORMED_STREAM
    RequestRecord.model_validate_json(record.model_dump_json())


def test_a_surrogate_escaped_header_in_a_fault_never_reaches_the_record() -> None:
    # aiohttp decodes a reason phrase and header values with surrogateescape.
    reason = b"Bad \xed\xa0\x80 \xff".decode("utf-8", "surrogateescape")
    error = classify(Fault(ErrorKind.HTTP_STATUS, f"HTTP 500 {reason}", body_excerpt=reason),
                     Timeouts())
    assert not _has_surrogate(error.message) and not _has_surrogate(error.body_excerpt or "")
    assert "\ufffd" in error.message


def test_a_stream_past_the_reply_byte_cap_is_oversized_and_not_read_further() -> None:
    limits = Limits()
    parser = ReplyParser("completions", want_logprobs=False, streamed=True, max_tokens=16)
    # Keep-alive comments: no content event, no long line, only bytes.
    read = b": " + b"x" * 65_000 + b"\n"
    fed = 0
    with pytest.raises(Fault) as info:
        while fed < 64 << 20:
            parser.feed(read, 0.0)
            fed += len(read)
    assert info.value.kind is ErrorKind.MALFORMED_STREAM and "oversized" in str(info.value)
    assert fed <= limits.max_body_bytes
    assert limits.max_body_bytes == 4 << 20


def test_a_flood_through_the_client_is_one_oversized_error_and_a_small_record() -> None:
    piece = text_event("B" * 60_000)

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, [piece] * 1100 + [DONE])

    record = exchange(handler, completion(max_tokens=16))
    assert record.error is not None
    # Past the text max_tokens allows long before the byte cap: either bound stops it.
    assert record.error.kind in (ErrorKind.EXCEEDED_MAX_TOKENS, ErrorKind.MALFORMED_STREAM)
    assert len(record.text) <= Limits().max_text_chars(16)
    assert len(record.model_dump_json()) < 64 * 1024


def test_text_past_what_max_tokens_allows_is_exceeded_and_kept_cut() -> None:
    limits = Limits()
    cap = limits.max_text_chars(8)

    async def handler(request: web.Request) -> web.StreamResponse:
        events = [text_event("ab"), text_event("x" * 900_000), text_event("", "stop"), DONE]
        return await sse(request, events)

    record = exchange(handler, completion(max_tokens=8))
    assert record.error is not None and record.error.kind is ErrorKind.EXCEEDED_MAX_TOKENS
    assert "characters of text" in record.error.message
    assert len(record.text) == cap and record.chunk_ends == [2, cap]
    assert len(record.token_times) == len(record.chunk_ends)
    assert record.pieces == ["ab", "x" * (cap - 2)]


def test_honest_text_is_kept_whole() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, [text_event(" 1234,")] * 8 + [text_event("", "length"), DONE])

    record = exchange(handler, completion(max_tokens=8))
    assert record.ok and record.text == " 1234," * 8 and len(record.chunk_ends) == 8


def test_a_long_finish_reason_is_kept_cut() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, [text_event("a", "stop" * 100_000), DONE])

    record = exchange(handler, completion())
    assert record.finish_reason is not None and len(record.finish_reason) <= 64
