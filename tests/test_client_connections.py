"""Kept-alive connections reused where the server keeps them, each target's policy learnt
from the server, and no hidden retries: a request is sent again only when it provably never
reached the server, once, recorded as a reconnect; a request the server read and dropped is
``disconnected``; connection refused is ``connect_error``."""

from __future__ import annotations

import asyncio
import socket

from batchprobe.client import (
    CompletionRequest,
    ErrorKind,
    OpenAIClient,
    RequestRecord,
    Timeouts,
    run,
)
from batchprobe.fake import FakeServerConfig, FakeServerThread
from rawhttp import raw_server

FAST = Timeouts(connect=1.0, read=2.0, total=5.0)


def _request(i: int) -> CompletionRequest:
    return CompletionRequest(request_id=f"r{i}", prompt=f"p {i}", max_tokens=4)


def _serially(url: str, count: int) -> tuple[list[RequestRecord], OpenAIClient]:
    """``count`` requests one after the other, each sent the moment the last one ended."""

    async def go() -> tuple[list[RequestRecord], OpenAIClient]:
        records = []
        async with OpenAIClient(url, timeouts=FAST) as client:
            for i in range(count):
                records.append(await client.complete(_request(i)))
        return records, client

    return run(go())


def test_a_server_that_keeps_connections_gets_them_reused() -> None:
    with raw_server([["answer"]]) as server:
        records, client = _serially(server.url, 4)
    assert all(r.ok for r in records), [r.error for r in records]
    assert server.connections == 1 and server.requests_read == 4
    assert client.connection_policy.mode == "reuse"
    assert all(r.reconnect is None for r in records)


def test_a_server_closing_after_every_reply_costs_no_request() -> None:
    # llama-server closes a connection after each stream: a pooled connection races it.
    with raw_server([["answer_close"]]) as server:
        records, client = _serially(server.url, 30)
    assert all(r.ok for r in records), [r.error for r in records]
    # No request was read twice: a reconnect only re-sends what the server never read.
    assert server.requests_read == 30
    assert client.connection_policy.mode == "fresh"
    assert client.connection_policy.reason is not None
    assert sum(r.reconnect is not None for r in records) <= 1


def test_an_answer_announcing_its_close_switches_the_target_to_fresh_connections() -> None:
    with raw_server([["announce_close"]]) as server:
        records, client = _serially(server.url, 3)
    assert all(r.ok for r in records), [r.error for r in records]
    assert server.requests_read == 3 and server.connections == 3
    assert client.connection_policy.mode == "fresh"
    assert client.connection_policy.reason == "the server answered 'Connection: close'"
    assert all(r.reconnect is None for r in records)


def test_a_request_the_server_closed_unread_is_sent_again_once_as_a_reconnect() -> None:
    with raw_server([["close_unread"]]) as server:
        records, client = _serially(server.url, 3)
    assert all(r.ok for r in records), [r.error for r in records]
    assert records[0].reconnect is None and records[2].reconnect is None
    assert records[1].reconnect is not None and records[1].reconnect.startswith("reset_connection")
    # The server read every request once: the reconnect re-sent one it never read.
    assert server.requests_read == 3
    assert client.connection_policy.mode == "fresh"


def test_discovery_after_a_stale_connection_is_sent_again_too() -> None:
    # llama-server closes its connections after a reply; a discovery request (a /tokenize, a
    # /v1/models) sent on a pooled one failed the whole run as "nothing answers" before the
    # client had learnt that. Every request path re-sends the same way, once, where unread.
    # (aiohttp itself re-sends a GET on a reused connection; a POST it leaves to the caller.)
    async def go() -> tuple[str | None, int | None, OpenAIClient]:
        async with OpenAIClient(server.url, timeouts=FAST) as client:
            return await client.get_text("/health"), await client.tokenize("x"), client

    with raw_server([["close_unread"]]) as server:
        health, tokens, client = run(go())
    assert health is not None and tokens is None  # the raw server has no /tokenize
    # The POST was reset unread on the pooled connection, then read once on a fresh one.
    assert server.requests_read == 2 and server.connections == 2
    assert client.connection_policy.mode == "fresh"


def test_a_discovery_read_dropped_on_a_pooled_connection_is_read_again() -> None:
    # Unmeasured reads (models, tokenize, metrics) are re-sent after any failure of a pooled
    # connection before a reply, read or not: reading twice changes nothing.
    async def go() -> int | None:
        async with OpenAIClient(server.url, timeouts=FAST) as client:
            await client.get_text("/health")
            return await client.tokenize("x")

    with raw_server([["answer", "drop"]]) as server:
        assert run(go()) is None  # answered (the raw server has no /tokenize): no error
    assert server.requests_read == 3 and server.connections == 2


def test_request_read_then_dropped_is_disconnected_and_not_sent_again() -> None:
    # The second request goes out on the kept-alive connection; the server reads it and closes.
    with raw_server([["answer", "drop"]]) as server:
        records, client = _serially(server.url, 3)
    assert records[0].ok and records[2].ok
    error = records[1].error
    assert error is not None and error.kind is ErrorKind.DISCONNECTED
    assert records[1].reconnect is None
    # Each request reached the server once: the dropped one was not re-sent, and the target
    # went over to a connection per request.
    assert server.requests_read == 3 and server.connections == 2
    assert client.connection_policy.mode == "fresh"


def test_connection_refused_is_connect_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    [record], _ = _serially(f"http://127.0.0.1:{port}", 1)
    assert record.error is not None and record.error.kind is ErrorKind.CONNECT_ERROR
    assert record.reconnect is None


def test_fake_closing_after_every_stream_gives_no_false_disconnected() -> None:
    """The fake's llama-server mode, serial back-to-back and in concurrent rounds."""
    config = FakeServerConfig(ttft_ms=0, itl_ms=0, close_after_stream=True)

    async def go(url: str) -> tuple[list[RequestRecord], OpenAIClient]:
        async with OpenAIClient(url, timeouts=FAST) as client:
            records = [await client.complete(_request(i)) for i in range(40)]
            for round_ in range(5):
                batch = (_request(1000 * (round_ + 1) + i) for i in range(16))
                records += await asyncio.gather(*(client.complete(r) for r in batch))
        return records, client

    with FakeServerThread(config) as server:
        records, _ = run(go(server.base_url))
    assert [r.error for r in records if r.error] == []
    # Whether the client learns the fake's policy depends on whether a stream's connection
    # reached the pool at all (its last chunk read with [DONE]): the raw-server tests above
    # pin the learning; this one that a server closing after every stream costs no request.
    assert sum(r.reconnect is not None for r in records) <= 1
