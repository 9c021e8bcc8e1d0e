"""Which failed sends provably never reached the server, and so may be sent once more.

llama-server closes a kept-alive connection after a stream without saying so; a client that
takes that connection from its pool before the close has been read gets a failed request
that the server never saw. Anything else (the server read the request, then dropped it) must
stay an error: re-sending it would hide exactly the dropped requests batchprobe looks for.

Three cases are provable, and only for a connection taken from the pool:

* before writing, the pooled socket is already readable: the server closed it (or sent
  something unasked) while it was idle. :class:`CheckedConnector` finds this with one
  non-blocking ``poll`` and raises :class:`StaleConnection` before a byte is written;
* aiohttp refuses to write to a transport that is already closing;
* the kernel answers with a reset (ECONNRESET/EPIPE) before any reply byte: a peer that
  closes a socket with unread data resets it, so the server closed it with the request
  unread (a server that read the request and closed sends a clean FIN: ``disconnected``).

Connection refused is never retried: a crashed server must show as ``connect_error``.
"""

from __future__ import annotations

import asyncio
import errno
import select
import weakref
from types import SimpleNamespace
from typing import TYPE_CHECKING

import aiohttp

if TYPE_CHECKING:
    from aiohttp.client_proto import ResponseHandler
    from aiohttp.client_reqrep import ClientRequest
    from aiohttp.connector import Connection
    from aiohttp.tracing import Trace

_RESET_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE})


class StaleConnection(aiohttp.ClientConnectionError):
    """A pooled connection the server had closed, found before the request was written."""


class Attempt:
    """One send of a request; ``reused`` is set when it went out on a pooled connection."""

    __slots__ = ("reused",)

    def __init__(self) -> None:
        self.reused = False


def _peer_spoke(transport: asyncio.BaseTransport | None) -> bool:
    """True when an idle socket is readable: EOF, a reset or unasked bytes, all fatal to it."""
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


class CheckedConnector(aiohttp.TCPConnector):
    """A TCP connector that never hands out a pooled connection the server already closed.

    aiohttp drops a pooled connection whose close it has processed; the event loop may not
    have read a close that the kernel already holds, and only a look at the socket tells.
    """

    def __init__(self, *, limit: int) -> None:
        super().__init__(limit=limit, limit_per_host=0)
        self._handed_out: weakref.WeakSet[ResponseHandler] = weakref.WeakSet()

    async def connect(
        self, req: ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> Connection:
        conn = await super().connect(req, traces, timeout)
        proto = conn.protocol
        if proto is None:
            return conn
        if proto not in self._handed_out:
            self._handed_out.add(proto)  # a fresh connection: nothing to check yet
        elif _peer_spoke(conn.transport):
            conn.close()
            raise StaleConnection(
                "a kept-alive connection was closed by the server before the request was written"
            )
        return conn


async def _on_reuse(
    session: aiohttp.ClientSession,
    ctx: SimpleNamespace,
    params: aiohttp.TraceConnectionReuseconnParams,
) -> None:
    attempt = ctx.trace_request_ctx
    if isinstance(attempt, Attempt):
        attempt.reused = True


def reuse_trace() -> aiohttp.TraceConfig:
    """The trace that marks an :class:`Attempt` sent on a pooled connection."""
    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(_on_reuse)
    return trace


def never_sent(exc: BaseException, attempt: Attempt) -> str | None:
    """Why the failed send ``exc`` provably never reached the server, or None.

    Only for a failure before any reply byte (the caller asks only for errors of the send).
    """
    if isinstance(exc, StaleConnection):
        return "stale_connection: " + str(exc)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return None  # refused, unreachable: a fresh connect, never retried
    if isinstance(exc, aiohttp.ClientConnectionResetError):
        return "closing_connection: aiohttp found the connection closing before writing to it"
    if attempt.reused and isinstance(exc, aiohttp.ClientOSError) and exc.errno in _RESET_ERRNOS:
        return (
            "reset_connection: a kept-alive connection was reset before any reply byte "
            "(the server closed it with the request unread)"
        )
    return None
