"""No hidden retries: a request is sent again only when it provably never reached the
server, at most once, and every retry is recorded; a drop after the request was read is
``disconnected``; connection refused is never retried."""

from __future__ import annotations

import socket
import time

from batchprobe.client import (
    CompletionRequest,
    ErrorKind,
    OpenAIClient,
    RequestRecord,
    Timeouts,
    run,
)
from rawhttp import After, raw_server

FAST = Timeouts(connect=1.0, read=2.0, total=5.0)


def _serially(url: str, count: int, *, pause_s: float) -> list[RequestRecord]:
    """``count`` requests one after the other; between them the event loop is blocked for
    ``pause_s``, so a close the server sent meanwhile is still unread when the next starts."""

    async def go() -> list[RequestRecord]:
        records = []
        async with OpenAIClient(url, timeouts=FAST) as client:
            for i in range(count):
                if i:
                    time.sleep(pause_s)  # noqa: ASYNC251 - blocks the loop on purpose
                req = CompletionRequest(request_id=f"r{i}", prompt="p", max_tokens=4)
                records.append(await client.complete(req))
        return records

    return run(go())


def test_pooled_connection_closed_while_idle_is_replaced_before_writing() -> None:
    script: list[After] = ["close"]
    with raw_server([script]) as server:
        records = _serially(server.url, 3, pause_s=0.05)
    assert all(r.ok for r in records), [r.error for r in records]
    assert records[0].retries == []
    for r in records[1:]:
        assert len(r.retries) == 1 and r.retries[0].startswith("stale_connection")
    # Each request reached the server application once: nothing was sent twice.
    assert server.requests_read == 3


def test_pooled_connection_reset_with_the_request_unread_is_retried_once() -> None:
    with raw_server([["reset_unread"], ["keep"]]) as server:
        records = _serially(server.url, 2, pause_s=0.0)
    assert all(r.ok for r in records), [r.error for r in records]
    assert records[1].retries and records[1].retries[0].startswith("reset_connection")
    assert server.requests_read == 2 and server.connections == 2


def test_request_read_then_dropped_is_disconnected_not_retried() -> None:
    with raw_server([["drop"]]) as server:
        records = _serially(server.url, 2, pause_s=0.0)
    assert records[0].ok
    error = records[1].error
    assert error is not None and error.kind is ErrorKind.DISCONNECTED
    assert records[1].retries == []
    assert server.requests_read == 2 and server.connections == 1


def test_connection_refused_is_not_retried() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    [record] = _serially(f"http://127.0.0.1:{port}", 1, pause_s=0.0)
    assert record.error is not None and record.error.kind is ErrorKind.CONNECT_ERROR
    assert record.retries == []


def test_kept_alive_connection_is_reused_without_retries() -> None:
    with raw_server([["keep"]]) as server:
        records = _serially(server.url, 3, pause_s=0.01)
    assert all(r.ok and r.retries == [] for r in records)
    assert server.connections == 1 and server.requests_read == 3
