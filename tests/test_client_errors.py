"""Every per-request failure becomes a RequestRecord with the right ErrorKind, never an exception."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
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
from batchprobe.errors import EngineError, EngineUnreachable

FAST = Timeouts(connect=0.5, read=0.3, total=5.0)




def event(text: str | None = None, finish: str | None = None) -> bytes:
    choice = {"index": 0, "text": text, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


async def sse(request: web.Request, packets: list[bytes], gap: float = 0.0) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for packet in packets:
        await resp.write(packet)
        await asyncio.sleep(gap)
    return resp


def exchange(
    handler: Handler, req: CompletionRequest | None = None, timeouts: Timeouts = FAST
) -> RequestRecord:
    async def go() -> RequestRecord:
        async with serve(handler) as url, OpenAIClient(url, timeouts=timeouts) as client:
            return await client.complete(
                req or CompletionRequest(request_id="r", prompt="p", max_tokens=4)
            )

    return run(go())


def stream_of(packets: list[bytes], gap: float = 0.0) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, packets, gap)

    return handler


@contextmanager
def closed_port() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    yield port


@contextmanager
def port_that_never_accepts() -> Iterator[int]:
    """A listening socket whose accept queue is full, so a further connect never completes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port: int = server.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        yield port
    finally:
        for filler in fillers:
            filler.close()
        server.close()


def complete_at(port: int, timeouts: Timeouts = FAST) -> RequestRecord:
    async def go() -> RequestRecord:
        async with OpenAIClient(f"http://127.0.0.1:{port}", timeouts=timeouts) as client:
            return await client.complete(
                CompletionRequest(request_id="r", prompt="p", max_tokens=4)
            )

    return run(go())


# --- connection --------------------------------------------------------------------


def test_connect_error() -> None:
    with closed_port() as port:
        record = complete_at(port)
    assert record.error is not None
    assert record.error.kind is ErrorKind.CONNECT_ERROR
    assert record.started_at <= record.finished_at
    assert record.token_times == []


def test_connect_timeout() -> None:
    with port_that_never_accepts() as port:
        record = complete_at(port, Timeouts(connect=0.3, read=5.0, total=5.0))
    assert record.error is not None
    assert record.error.kind is ErrorKind.CONNECT_TIMEOUT
    assert 0.25 <= record.finished_at - record.started_at < 3.0


# --- timeouts ------------------------------------------------------------------------


def test_read_timeout_is_a_gap_between_chunks_and_keeps_the_text() -> None:
    record = exchange(stream_of([event("a"), event("b")], gap=1.5))
    assert record.error is not None
    assert record.error.kind is ErrorKind.READ_TIMEOUT
    assert record.pieces == ["a"]
    assert record.finished_at - record.started_at < 1.2


def test_read_timeout_before_any_reply() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(1.5)
        return web.Response(text="late")

    record = exchange(handler)
    assert record.error is not None
    assert record.error.kind is ErrorKind.READ_TIMEOUT


def test_a_server_silent_to_the_end_is_a_total_timeout_when_no_read_limit_is_given() -> None:
    # The read limit defaults to the total. Both used to go to aiohttp, which rounds a limit
    # over 5 s up to a whole second, so the two fired in the same second and such a request
    # ended read_timeout or total_timeout by chance (the merge-crash case saw both).
    async def handler(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(text="late")

    async def go() -> list[RequestRecord]:
        async with serve(handler) as url, OpenAIClient(
            url, timeouts=Timeouts(connect=1.0, total=5.5)
        ) as client:
            return await asyncio.gather(*(
                client.complete(CompletionRequest(request_id=f"r{i}", prompt="p", max_tokens=4))
                for i in range(8)
            ))

    kinds = [r.error.kind if r.error else None for r in run(go())]
    assert kinds == [ErrorKind.TOTAL_TIMEOUT] * 8


def test_total_timeout_while_tokens_keep_coming() -> None:
    record = exchange(
        stream_of([event("t")] * 100, gap=0.05), timeouts=Timeouts(connect=1, read=1, total=0.5)
    )
    assert record.error is not None
    assert record.error.kind is ErrorKind.TOTAL_TIMEOUT
    assert 3 <= len(record.pieces) < 20


# --- HTTP and protocol ---------------------------------------------------------------


def test_http_status_with_body_excerpt() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503, text="busy " + "x" * 2000)

    record = exchange(handler)
    assert record.error is not None
    assert record.error.kind is ErrorKind.HTTP_STATUS
    assert record.error.http_status == 503
    assert record.error.body_excerpt is not None
    assert record.error.body_excerpt.startswith("busy x")
    assert len(record.error.body_excerpt) == 500
    assert "\n" not in record.error.message


def test_finish_reason_error_keeps_the_text() -> None:
    record = exchange(stream_of([event("par"), event("tial", "error"), DONE]))
    assert record.error is not None
    assert record.error.kind is ErrorKind.FINISH_REASON_ERROR
    assert record.text == "partial"
    assert record.finish_reason == "error"


def test_finish_reason_error_without_text() -> None:
    record = exchange(stream_of([event("", "error"), DONE]))
    assert record.error is not None
    assert record.error.kind is ErrorKind.FINISH_REASON_ERROR


def test_done_without_a_finish_reason_is_a_cut_off_answer() -> None:
    # llama-cpp-python's server ends a stream like this when another request waits.
    record = exchange(stream_of([event("Once "), event("upon"), DONE]))
    assert record.error is not None
    assert record.error.kind is ErrorKind.NO_FINISH_REASON
    assert record.text == "Once upon" and record.finish_reason is None
    whole = exchange(stream_of([event("Once "), event("upon", "length"), DONE]))
    assert whole.error is None


def test_done_without_a_finish_reason_is_whole_with_usage_or_at_max_tokens() -> None:
    # vllm-mlx 0.4.0's simple engine leaves finish_reason out at max_tokens, usage in.
    usage = b'data: {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 3}}\n\n'
    with_usage = exchange(stream_of([event("Once "), event("upon"), usage, DONE]))
    assert with_usage.error is None and with_usage.completion_tokens == 2
    at_max = exchange(stream_of([event("a")] * 4 + [DONE]))  # max_tokens is 4
    assert at_max.error is None


def test_error_object_in_a_200_stream() -> None:
    error = b'data: {"error": {"message": "shared_kv", "code": 500}}\n\n'
    record = exchange(stream_of([event("a"), error, DONE]))
    assert record.error is not None
    assert record.error.kind is ErrorKind.FINISH_REASON_ERROR
    assert "shared_kv" in record.error.message


@pytest.mark.parametrize("finish_reason", ["length", "content_filter"])
def test_empty_output(finish_reason: str | None) -> None:
    record = exchange(stream_of([event(""), event("", finish_reason), DONE]))
    assert record.error is not None
    assert record.error.kind is ErrorKind.EMPTY_OUTPUT


def test_an_empty_answer_the_model_stopped_is_an_answer() -> None:
    # End-of-sequence as the first token (a tiny random model does it now and then).
    record = exchange(stream_of([event("", "stop"), DONE]))
    assert record.error is None
    assert record.text == "" and record.finish_reason == "stop"


@pytest.mark.parametrize(
    "bad",
    [
        b"data: this is not json\n\n",
        b'data: {"unexpected": 1}\n\n',
        b'data: {"choices": [{"index": 0}]}\n\n',
        b'data: {"choices": "nope"}\n\n',
        b'data: {"choices": [{"index": 0, "text": 5}]}\n\n',
        b"data: [1, 2]\n\n",
    ],
    ids=["non-json", "no-choices", "no-text", "choices-not-list", "text-not-str", "not-object"],
)
def test_malformed_stream(bad: bytes) -> None:
    record = exchange(stream_of([event("a"), bad, event("b", "stop"), DONE]))
    assert record.error is not None
    assert record.error.kind is ErrorKind.MALFORMED_STREAM
    assert record.pieces == ["a"]


def test_malformed_last_line_without_blank_line() -> None:
    record = exchange(stream_of([event("a"), b"data: {broken\n"]))
    assert record.error is not None
    assert record.error.kind is ErrorKind.MALFORMED_STREAM


def test_non_json_reply_to_non_streaming_request() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text="{oops", content_type="application/json")

    req = CompletionRequest(request_id="r", prompt="p", max_tokens=4, stream=False)
    record = exchange(handler, req)
    assert record.error is not None
    assert record.error.kind is ErrorKind.MALFORMED_STREAM
    assert record.streamed is False


def test_plain_text_200_reply_is_malformed() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text="Internal error\nplease retry")

    record = exchange(handler)
    assert record.error is not None
    assert record.error.kind is ErrorKind.MALFORMED_STREAM
    assert record.error.body_excerpt == "Internal error\nplease retry"


# --- disconnects ---------------------------------------------------------------------


def test_connection_dropped_mid_stream() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await sse(request, [event("a"), event("b")])
        assert request.transport is not None
        request.transport.close()
        return resp

    record = exchange(handler)
    assert record.error is not None
    assert record.error.kind is ErrorKind.DISCONNECTED
    assert record.pieces == ["a", "b"]


def test_stream_ends_cleanly_without_done_or_finish_reason() -> None:
    record = exchange(stream_of([event("a"), event("b")]))
    assert record.error is not None
    assert record.error.kind is ErrorKind.DISCONNECTED


def test_stream_cut_inside_an_event() -> None:
    record = exchange(stream_of([event("a"), event("b")[:15]]))
    assert record.error is not None
    assert record.error.kind is ErrorKind.DISCONNECTED
    assert record.pieces == ["a"]


def test_finish_reason_without_done_is_complete() -> None:
    record = exchange(stream_of([event("a"), event("b", "stop")]))
    assert record.ok, record.error
    assert record.text == "ab"


# --- discovery -----------------------------------------------------------------------


def test_list_models_unreachable_is_one_clear_line() -> None:
    async def go(port: int) -> None:
        async with OpenAIClient(f"http://127.0.0.1:{port}") as client:
            await client.list_models()

    with closed_port() as port, pytest.raises(EngineUnreachable) as info:
        run(go(port))
    message = str(info.value)
    assert message.startswith(f"nothing answers at http://127.0.0.1:{port}")
    assert "\n" not in message


def test_get_json_and_tokenize_unreachable() -> None:
    async def go(port: int, which: str) -> None:
        async with OpenAIClient(f"http://127.0.0.1:{port}") as client:
            if which == "get_json":
                await client.get_json("/props")
            else:
                await client.tokenize("x")

    for which in ("get_json", "tokenize"):
        with closed_port() as port, pytest.raises(EngineUnreachable):
            run(go(port, which))


def test_list_models_from_a_server_that_is_not_openai() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=404, text="no such route")

    async def go() -> None:
        async with serve(handler) as url, OpenAIClient(url) as client:
            await client.list_models()

    with pytest.raises(EngineError, match="HTTP 404") as info:
        run(go())
    assert not isinstance(info.value, EngineUnreachable)


def test_list_models_cut_off_is_an_engine_error() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(b'{"data": [')
        assert request.transport is not None
        request.transport.close()
        return resp

    async def go() -> None:
        async with serve(handler) as url, OpenAIClient(url) as client:
            await client.list_models()

    with pytest.raises(EngineError, match="GET .*/v1/models failed"):
        run(go())
