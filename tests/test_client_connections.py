"""No hidden retries, no stale connections: every request goes out once, on a connection of
its own; a request the server read and dropped is ``disconnected``; connection refused is
``connect_error``."""

from __future__ import annotations

import socket

from batchprobe.client import (
    CompletionRequest,
    ErrorKind,
    OpenAIClient,
    RequestRecord,
    Timeouts,
    run,
)
from rawhttp import raw_server

FAST = Timeouts(connect=1.0, read=2.0, total=5.0)


def _serially(url: str, count: int) -> list[RequestRecord]:
    """``count`` requests one after the other, each sent the moment the last one ended."""

    async def go() -> list[RequestRecord]:
        records = []
        async with OpenAIClient(url, timeouts=FAST) as client:
            for i in range(count):
                req = CompletionRequest(request_id=f"r{i}", prompt="p", max_tokens=4)
                records.append(await client.complete(req))
        return records

    return run(go())


def test_every_request_has_a_connection_of_its_own() -> None:
    with raw_server([["answer"]]) as server:  # the server would keep every connection
        records = _serially(server.url, 4)
    assert all(r.ok for r in records), [r.error for r in records]
    assert server.connections == 4 and server.requests_read == 4


def test_a_server_closing_after_every_reply_costs_no_request() -> None:
    # llama-server closes a connection after each stream: a pooled connection would race it.
    with raw_server([["answer_close"]]) as server:
        records = _serially(server.url, 30)
    assert all(r.ok for r in records), [r.error for r in records]
    assert server.requests_read == 30


def test_request_read_then_dropped_is_disconnected_and_not_sent_again() -> None:
    with raw_server([["answer"], ["drop"], ["answer"]]) as server:
        records = _serially(server.url, 3)
    assert records[0].ok and records[2].ok
    error = records[1].error
    assert error is not None and error.kind is ErrorKind.DISCONNECTED
    # Each request reached the server once: the dropped one was not re-sent.
    assert server.requests_read == 3 and server.connections == 3


def test_connection_refused_is_connect_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    [record] = _serially(f"http://127.0.0.1:{port}", 1)
    assert record.error is not None and record.error.kind is ErrorKind.CONNECT_ERROR
