"""Kept-alive connections, each target's learnt policy, and which failed sends provably never
reached the server.

A client starts by reusing kept-alive connections (a fresh one per request costs a connect
and a slow start per request, half the client's speed at 256 streams). Some servers close a
connection after every reply without saying so (llama-server after a stream): a pooled
connection then races that close, and the request written into it fails like one the server
read and dropped. So each target's policy is learnt, once, and recorded:

* an answer with ``Connection: close``, or
* a kept-alive connection the server closed while it sat idle in the pool, within
  :data:`KEEPALIVE_S` of its reply (longer idle connections are not reused at all), or
* a reused connection that failed before any reply byte

switch the target to a fresh connection per request (:class:`ConnectionPolicy`).

A request is sent a second time only when it provably never reached the server, at most once,
on a fresh connection, and is recorded as a reconnect (never as a retry of a request the server
read). Three cases are provable, and only for a connection taken from the pool:

* before writing, the pooled socket is already readable: the server closed it (or sent
  something unasked) while it was idle. :class:`PolicyConnector` finds this with one
  non-blocking ``poll`` and raises :class:`StaleConnection` before a byte is written;
* aiohttp refuses to write to a transport that is already closing;
* the kernel answers with a reset (ECONNRESET/EPIPE) before any reply byte: a peer that
  closes a socket with unread data resets it, so the server closed it with the request
  unread (a server that read the request and closed sends a clean FIN: ``disconnected``).

Connection refused is never sent again: a crashed server must show as ``connect_error``.

(An unmeasured discovery read is also re-sent after any failure of a pooled connection before
its reply: ``OpenAIClient._send``.)
"""

from __future__ import annotations

import errno
import select
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from types import SimpleNamespace
from typing import TYPE_CHECKING, Literal

import aiohttp

if TYPE_CHECKING:
    from aiohttp.client_proto import ResponseHandler
    from aiohttp.client_reqrep import ClientRequest, ConnectionKey
    from aiohttp.connector import Connection
    from aiohttp.tracing import Trace

_RESET_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE})
KEEPALIVE_S = 2.0
"""An idle connection is reused for this long at most: below the shortest keep-alive timeout
common servers have (5 s: uvicorn, cpp-httplib, Node), so the client never races one."""

Mode = Literal["reuse", "fresh"]


@dataclass
class ConnectionPolicy:
    """How one target's connections are used: ``reuse`` until the server shows it closes
    them, then ``fresh`` (a connection per request) for good, with the reason."""

    mode: Mode = "reuse"
    reason: str | None = None

    def go_fresh(self, reason: str) -> None:
        if self.mode == "reuse":
            self.mode, self.reason = "fresh", reason


class StaleConnection(aiohttp.ClientConnectionError):
    """A pooled connection the server had closed, found before the request was written."""


class Attempt:
    """One send of a request; ``reused`` is set when it went out on a pooled connection;
    ``on_sent`` is called (once) as its body is written to the connection."""

    __slots__ = ("on_sent", "reused")

    def __init__(self, on_sent: Callable[[], None] | None = None) -> None:
        self.reused = False
        self.on_sent = on_sent


def _peer_spoke(transport: object) -> bool:
    """True when an idle socket is readable: EOF, a reset or unasked bytes, all fatal to it."""
    get = getattr(transport, "get_extra_info", None)
    sock = None if get is None else get("socket")
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


class PolicyConnector(aiohttp.TCPConnector):
    """A TCP connector that follows a :class:`ConnectionPolicy` and learns it.

    It never hands out a pooled connection the server already closed: aiohttp drops one
    whose close it has processed (which this connector takes as the server's policy), and
    only a look at the socket tells of a close the kernel holds and the loop has not read.
    """

    def __init__(self, policy: ConnectionPolicy, *, limit: int) -> None:
        super().__init__(limit=limit, limit_per_host=0, keepalive_timeout=KEEPALIVE_S)
        self.policy = policy
        self._ours: weakref.WeakSet[ResponseHandler] = weakref.WeakSet()

    async def connect(
        self, req: ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> Connection:
        conn = await super().connect(req, traces, timeout)
        proto = conn.protocol
        if proto is None:
            return conn
        if proto not in self._ours:
            self._ours.add(proto)  # a fresh connection: nothing to check yet
        elif _peer_spoke(conn.transport):
            conn.close()
            self.policy.go_fresh("the server closed a kept-alive connection after a reply")
            raise StaleConnection(
                "a kept-alive connection was closed by the server before the request was written"
            )
        return conn

    async def _get(self, key: ConnectionKey, traces: list[Trace]) -> Connection | None:
        if self.policy.mode == "fresh":
            return None
        pooled = self._conns.get(key, ())
        now = monotonic()
        if any(not p.is_connected() and now - t0 <= KEEPALIVE_S for p, t0 in pooled):
            # Only the server closes an idle pooled connection (ours are closed on release),
            # and one that does so within KEEPALIVE_S of a reply closes after every reply.
            self.policy.go_fresh("the server closed an idle kept-alive connection after a reply")
            return None
        return await super()._get(key, traces)

    def _release(
        self, key: ConnectionKey, protocol: ResponseHandler, *, should_close: bool = False
    ) -> None:
        super()._release(key, protocol, should_close=should_close or self.policy.mode == "fresh")


async def _on_reuse(
    session: aiohttp.ClientSession,
    ctx: SimpleNamespace,
    params: aiohttp.TraceConnectionReuseconnParams,
) -> None:
    attempt = ctx.trace_request_ctx
    if isinstance(attempt, Attempt):
        attempt.reused = True


async def _on_body(
    session: aiohttp.ClientSession,
    ctx: SimpleNamespace,
    params: aiohttp.TraceRequestChunkSentParams,
) -> None:
    attempt = ctx.trace_request_ctx
    if isinstance(attempt, Attempt) and attempt.on_sent is not None:
        on_sent, attempt.on_sent = attempt.on_sent, None
        on_sent()


def attempt_trace() -> aiohttp.TraceConfig:
    """The trace that marks an :class:`Attempt` sent on a pooled connection and tells it
    when its body goes out."""
    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(_on_reuse)
    trace.on_request_chunk_sent.append(_on_body)
    return trace


def never_sent(exc: BaseException, attempt: Attempt) -> str | None:
    """Why the failed send ``exc`` provably never reached the server, or None.

    Only for a failure before any reply byte (the caller asks only for errors of the send).
    """
    if isinstance(exc, StaleConnection):
        return "stale_connection: " + str(exc)
    if not attempt.reused or isinstance(exc, aiohttp.ClientConnectorError):
        return None  # a fresh connect, refused or unreachable: never sent again
    if isinstance(exc, aiohttp.ClientConnectionResetError):
        return "closing_connection: aiohttp found the kept-alive connection closing before writing"
    if isinstance(exc, aiohttp.ClientOSError) and exc.errno in _RESET_ERRNOS:
        return (
            "reset_connection: a kept-alive connection was reset before any reply byte "
            "(the server closed it with the request unread)"
        )
    return None
