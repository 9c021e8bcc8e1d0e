"""The async OpenAI-compatible client."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from time import perf_counter
from types import TracebackType
from typing import Any, Literal

import aiohttp
from pydantic import JsonValue
from typing_extensions import Self
from yarl import URL

from batchprobe._json import JSONDecodeError, dumps, loads
from batchprobe.client._connection import (
    Attempt,
    ConnectionPolicy,
    PolicyConnector,
    attempt_trace,
    never_sent,
)
from batchprobe.client._errors import TIMEOUT_ERRORS, Fault, classify, excerpt
from batchprobe.client._lag import LagMeter, LoopLag
from batchprobe.client._payload import PATHS, request_body, request_headers
from batchprobe.client._stream import DEFAULT_LIMITS, ReplyParser
from batchprobe.client.limits import Limits
from batchprobe.client.timeouts import Timeouts
from batchprobe.client.types import CompletionRequest, ErrorKind, RequestRecord
from batchprobe.errors import ConfigError, EngineError, EngineUnreachable

DEFAULT_TIMEOUTS = Timeouts()

# Failures of a request that say nothing usable answered at the URL.
_UNREACHABLE = (aiohttp.ClientConnectionError, *TIMEOUT_ERRORS)
# Everything a failed request can raise (the rest are bugs, and propagate).
_REQUEST_FAILURES = (aiohttp.ClientError, Fault, *TIMEOUT_ERRORS)
# Errors of a send that may have never reached the server (never_sent() decides).
_SEND_FAILURES = (aiohttp.ClientConnectionError,)


def _root_url(base_url: str) -> URL:
    """``http://host:port`` from a base URL given with or without ``/v1``."""
    url = URL(base_url.strip())
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError("base_url", f"{base_url!r} is not an http:// or https:// URL with a host")
    path = url.path.rstrip("/").removesuffix("/v1")
    return url.with_path(path or "/").with_query(None).with_fragment(None)


class OpenAIClient:
    """Talks to one OpenAI-compatible server. Use as ``async with OpenAIClient(url) as c``.

    The client owns an aiohttp session unless ``session`` is given (the seam for tests; an
    injected session is left open). Replies are read within ``limits``. Each request carries
    its id as ``x-request-id`` (so the server's log names it) unless ``request_ids`` is false.

    Kept-alive connections are reused until the server shows it closes them; from then on
    each request gets a connection of its own (``connection_policy`` says which, and why; see
    ``_connection``). A request is sent again only when it provably never reached the server,
    at most once, and its record's ``reconnect`` says why. An injected session keeps its own
    connector: its policy is never learnt, and only its stale-connection case is re-sent.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        limits: Limits = DEFAULT_LIMITS,
        max_connections: int = 1024,
        api_key: str | None = None,
        session: aiohttp.ClientSession | None = None,
        request_ids: bool = True,
    ) -> None:
        if max_connections < 1:
            raise ConfigError("max_connections", f"must be >= 1, got {max_connections}")
        self.base_url = str(_root_url(base_url)).rstrip("/")
        self.model = model
        self.timeouts = timeouts
        self.limits = limits
        self._max_connections = max_connections
        self._api_key = api_key
        self._request_ids = request_ids
        self._session = session
        self._owns_session = session is None
        # A silence limit no shorter than the total is no limit of its own: left to aiohttp it
        # would race the total for the same second, and a request that never got a byte
        # would end read_timeout or total_timeout by chance.
        self._timeout = aiohttp.ClientTimeout(
            total=timeouts.total, sock_connect=timeouts.connect,
            sock_read=timeouts.read if timeouts.read < timeouts.total else None,
        )
        self._urls = {api: self._url(path) for api, path in PATHS.items()}
        self.connection_policy = ConnectionPolicy()
        self.lag = LagMeter()

    def settings(self) -> dict[str, Any]:
        """The keyword arguments that build a client like this one (in another process)."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "timeouts": self.timeouts,
            "limits": self.limits,
            "max_connections": self._max_connections,
            "api_key": self._api_key,
            "request_ids": self._request_ids,
        }

    async def loop_lag(self) -> list[LoopLag]:
        """This process's loop lag since the last call (or since ``async with``)."""
        return [self.lag.take()]

    async def __aenter__(self) -> Self:
        self.lag.start()
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=PolicyConnector(self.connection_policy, limit=self._max_connections),
                timeout=self._timeout,
                trace_configs=[attempt_trace()],
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        self.lag.stop()
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _url(self, path: str) -> URL:
        # Appended, not URL.join()ed: a join would drop a proxy prefix such as /engine.
        return URL(f"{self.base_url}/{path.lstrip('/')}")

    def _request_id(self, request_id: str) -> str | None:
        return request_id if self._request_ids else None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("OpenAIClient is used outside 'async with'")
        return self._session

    # --- discovery -----------------------------------------------------------------

    async def list_models(self) -> list[str]:
        """Model ids from ``GET /v1/models``."""
        url = self._url("/v1/models")
        status, body = await self._request("GET", url)
        if status != 200:
            raise EngineError(f"GET {url} answered HTTP {status}: {excerpt(body, 200)!r}")
        try:
            data = loads(body)["data"]
            return [str(item["id"]) for item in data]
        except (JSONDecodeError, KeyError, TypeError) as exc:
            raise EngineError(
                f"GET {url} did not return an OpenAI model list: {excerpt(body, 200)!r}"
            ) from exc

    async def get_json(self, path: str) -> JsonValue | None:
        """``GET path`` as JSON; None when the server has no such JSON resource."""
        status, body = await self._request("GET", self._url(path))
        reply: JsonValue | None = _json_or_none(status, body)
        return reply

    async def get_text(self, path: str) -> str | None:
        """``GET path`` as text; None unless the server answers 200."""
        status, body = await self._request("GET", self._url(path))
        return body.decode("utf-8", errors="replace") if status == 200 else None

    async def tokenize(self, text: str) -> int | None:
        """Token count from a llama.cpp-style ``POST /tokenize``; None when unsupported."""
        ids = await self.token_ids(text)
        return None if ids is None else len(ids)

    async def token_ids(self, text: str) -> list[int] | None:
        """Token ids from ``POST /tokenize``; None when unsupported. One body for every
        engine's: llama.cpp reads ``content``, vLLM and SGLang ``prompt`` (and would add a
        BOS without ``add_special_tokens: false``)."""
        payload: dict[str, Any] = {"content": text, "prompt": text, "add_special_tokens": False}
        if self.model is not None:
            payload["model"] = self.model
        status, body = await self._request("POST", self._url("/tokenize"), data=dumps(payload))
        reply = _json_or_none(status, body)
        tokens = reply.get("tokens") if isinstance(reply, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return None
        return tokens

    async def _request(self, method: str, url: URL, data: bytes | None = None) -> tuple[int, bytes]:
        headers = request_headers(self._request_id("batchprobe-discovery"), self._api_key)
        try:
            resp = await self._send(
                method, url, data=data, headers=headers, reconnects=[], unmeasured=True
            )
            async with resp:
                return resp.status, await _read_body(resp, self.limits.max_body_bytes)
        except Fault as exc:
            raise EngineError(f"{method} {url}: {exc}") from exc
        except _UNREACHABLE as exc:
            reason = classify(exc, self.timeouts).message
            raise EngineUnreachable(f"nothing answers at {self.base_url}: {reason}") from exc
        except aiohttp.ClientError as exc:
            reason = classify(exc, self.timeouts).message
            raise EngineError(f"{method} {url} failed: {reason}") from exc

    # --- completions ---------------------------------------------------------------

    async def complete(
        self,
        req: CompletionRequest,
        on_progress: Callable[[int], None] | None = None,
        hang_up: asyncio.Event | None = None,
    ) -> RequestRecord:
        """Send one request; a per-request failure is recorded in ``error``, never raised.

        ``on_progress`` is called with 0 once the request's body is written to the connection,
        then after each network read with the chunks streamed so far (traffic shapes send a
        request when others have streamed k tokens, or once another is at the server). Once
        ``hang_up`` is set the client closes the connection mid-reply, as a user who stops a
        stream does: the record keeps what came before, ``hung_up`` true and no error. One set
        by ``on_progress`` itself takes effect before the next read, however much of the reply
        is already waiting.
        """
        parser = ReplyParser(
            req.api,
            want_logprobs=req.logprobs is not None,
            streamed=req.stream,
            max_tokens=req.max_tokens,
            limits=self.limits,
            want_top=bool(req.logprobs),
            choices=req.n,
        )
        started = perf_counter()
        error = None
        reconnects: list[str] = []
        hung_up = False
        try:
            exchange = self._exchange(req, parser, reconnects, on_progress, hang_up)
            if hang_up is None:
                await exchange
            else:
                hung_up = await _unless(exchange, hang_up)
            if not hung_up:
                parser.finish(perf_counter())
        except _REQUEST_FAILURES as exc:
            error = classify(exc, self.timeouts)
        record = parser.record(req.request_id, started, perf_counter(), error)
        record.reconnect = reconnects[0] if reconnects else None
        record.hung_up = hung_up
        return record

    def request_body(self, req: CompletionRequest) -> dict[str, Any]:
        """The exact JSON body ``complete(req)`` sends (recorded in the verdict)."""
        return request_body(req, self.model)

    async def _exchange(
        self,
        req: CompletionRequest,
        parser: ReplyParser,
        reconnects: list[str],
        on_progress: Callable[[int], None] | None = None,
        hang_up: asyncio.Event | None = None,
    ) -> bool:
        """One request's exchange: its send (``_send``), then its reply into ``parser``; True
        when it stopped reading on ``hang_up``, set between two reads."""
        body = dumps(self.request_body(req))
        headers = request_headers(self._request_id(req.request_id), self._api_key)
        sent = None if on_progress is None else functools.partial(on_progress, 0)
        resp = await self._send(
            "POST", self._urls[req.api], data=body, headers=headers, reconnects=reconnects,
            on_sent=sent,
        )
        async with resp:
            try:
                stopped = await _read_reply(
                    resp, parser, self.limits.max_body_bytes, self.timeouts, on_progress, hang_up
                )
            except asyncio.CancelledError:
                resp.close()  # a hang-up: the connection goes, never back to the pool
                raise
            if stopped:
                resp.close()
            return stopped

    async def _send(
        self, method: str, url: URL, *, data: bytes | None, headers: dict[str, str],
        reconnects: list[str], unmeasured: bool = False, on_sent: Callable[[], None] | None = None,
    ) -> aiohttp.ClientResponse:
        """Send once; again at most once, on a fresh connection, and only when the first send
        provably never reached the server (``never_sent``), recorded in ``reconnects``. Every
        request goes through here, discovery's too: a server that closes its connections after
        a reply does so after any reply. An ``unmeasured`` request (discovery's reads: models,
        tokenize, metrics) is also sent again after any failure of a pooled connection before
        its reply, as aiohttp does for a GET: reading twice changes nothing."""
        while True:
            attempt = Attempt(on_sent)
            try:
                resp = await self._http().request(
                    method, url, data=data, headers=headers, timeout=self._timeout,
                    trace_request_ctx=attempt,
                )
            except _SEND_FAILURES as exc:
                if attempt.reused:
                    self.connection_policy.go_fresh(
                        f"a kept-alive connection failed before any reply byte ({type(exc).__name__})"
                    )
                reason = never_sent(exc, attempt)
                if reason is None and unmeasured and attempt.reused:
                    reason = f"unmeasured_request: a kept-alive connection failed ({exc})"
                if reason is None or reconnects:
                    raise
                reconnects.append(reason)
                continue
            if resp.headers.get("Connection", "").lower() == "close":
                self.connection_policy.go_fresh("the server answered 'Connection: close'")
            return resp


async def _unless(exchange: Coroutine[Any, Any, bool], hang_up: asyncio.Event) -> bool:
    """Run ``exchange`` until it ends or ``hang_up`` is set; True when the client hung up
    first (the exchange is cancelled, or stopped reading between two reads: ``_exchange``
    closes the connection, whose reply was not read to its end, so it is never reused)."""
    task = asyncio.ensure_future(exchange)
    signal = asyncio.ensure_future(hang_up.wait())
    try:
        await asyncio.wait((task, signal), return_when=asyncio.FIRST_COMPLETED)
    finally:
        hung_up = not task.done()
        if hung_up:
            task.cancel()  # a hang-up, or this request itself cancelled
        signal.cancel()
    if not hung_up:
        return await task  # it ended first: its result, or its failure
    await asyncio.wait((task,))  # the connection closed before the record is made
    return True


async def _read_reply(
    resp: aiohttp.ClientResponse,
    parser: ReplyParser,
    max_body: int,
    timeouts: Timeouts,
    on_progress: Callable[[int], None] | None = None,
    hang_up: asyncio.Event | None = None,
) -> bool:
    """Read the reply into ``parser``; True when a stream stopped early on ``hang_up``."""
    if resp.status >= 300:
        await _raise_http_status(resp)
    first = await resp.content.readany()
    kind = _reply_kind(resp.content_type, first)
    if kind == "sse":
        return await _read_stream(resp.content, parser, first, timeouts, on_progress, hang_up)
    body = await _read_body(resp, max_body, first)
    if kind == "json":
        # Non-streaming, or a server that answers a streaming request with JSON.
        parser.feed_json(body, perf_counter())
        return False
    raise Fault(
        ErrorKind.MALFORMED_STREAM,
        f"reply is neither an event stream nor JSON ({resp.content_type})",
        body_excerpt=excerpt(body) or None,
    )


async def _read_stream(
    content: aiohttp.StreamReader,
    parser: ReplyParser,
    first: bytes,
    timeouts: Timeouts,
    on_progress: Callable[[int], None] | None = None,
    hang_up: asyncio.Event | None = None,
) -> bool:
    """True when it stopped on ``hang_up``, seen set after a read (set by ``on_progress``
    or while the read waited): the rest of a short reply may already be here, but the client
    has hung up."""
    # The hot loop: one timestamp per network read, shared by every event in it.
    feed = parser.feed
    pieces = parser.pieces
    data = first
    # Until the first token: no floor (the server may prefill or queue, or send keep-alives).
    while data:
        if feed(data, perf_counter()):
            return False
        if on_progress is not None:
            on_progress(len(pieces))
        if hang_up is not None and hang_up.is_set():
            return True
        if pieces:
            break
        data = await content.readany()
    if not data:
        return False
    floor = RateFloor(content, timeouts.floor_window, timeouts.floor_bytes)
    try:
        while data := await content.readany():
            floor.received += len(data)
            if feed(data, perf_counter()):
                return False
            if on_progress is not None:
                on_progress(len(pieces))
            if hang_up is not None and hang_up.is_set():
                return True
    finally:
        floor.stop()
    return False


class RateFloor:
    """The byte-rate floor of a stream that has begun (``Timeouts.floor_*``): every
    ``window`` seconds the stream must have delivered ``min_bytes`` more, else its reading
    fails with a ``read_timeout`` fault. One timer per window, not one per read: the reading
    loop only adds to ``received``."""

    __slots__ = ("_checked", "_content", "_handle", "_loop", "_min_bytes", "_window", "received")

    def __init__(self, content: aiohttp.StreamReader, window: float, min_bytes: int) -> None:
        self._content = content
        self._window = window
        self._min_bytes = min_bytes
        self.received = 0
        self._checked = 0
        self._loop = asyncio.get_running_loop()
        self._handle: asyncio.TimerHandle | None = self._loop.call_later(window, self._check)

    def _check(self) -> None:
        if self.received - self._checked < self._min_bytes:
            self._handle = None
            self._content.set_exception(Fault(
                ErrorKind.READ_TIMEOUT,
                f"streaming stalled: {self.received - self._checked} bytes in the last "
                f"{self._window:g} s after the first token, under the floor of "
                f"{self._min_bytes} bytes per {self._window:g} s (a dripping or stalled "
                "stream)",
            ))
            return
        self._checked = self.received
        self._handle = self._loop.call_later(self._window, self._check)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


async def _read_body(resp: aiohttp.ClientResponse, limit: int, first: bytes = b"") -> bytes:
    """The whole body, or a malformed-stream fault as soon as it passes ``limit`` bytes."""
    if resp.content_length is not None and resp.content_length > limit:
        raise _too_large(resp.content_length, limit)
    parts, size = [], 0
    data = first
    while True:
        size += len(data)
        if size > limit:
            raise _too_large(size, limit)
        parts.append(data)
        data = await resp.content.readany()
        if not data:
            return b"".join(parts)


def _too_large(size: int, limit: int) -> Fault:
    return Fault(
        ErrorKind.MALFORMED_STREAM,
        f"reply body of {size}+ bytes is larger than {limit} bytes (oversized); not read further",
    )


_SSE_STARTS = (b"data:", b":", b"event:", b"id:", b"retry:")


def _reply_kind(content_type: str, first: bytes) -> Literal["sse", "json", "other"]:
    """Trust an event-stream or JSON content type; otherwise judge by the first bytes."""
    if "event-stream" in content_type:
        return "sse"
    if "json" in content_type:
        return "json"
    start = first.lstrip()
    if start[:1] in (b"{", b"["):
        return "json"
    if not start or start.startswith(_SSE_STARTS):
        return "sse"
    return "other"


async def _raise_http_status(resp: aiohttp.ClientResponse) -> None:
    try:
        body = excerpt(await resp.content.read(64 * 1024))
    except (aiohttp.ClientError, *TIMEOUT_ERRORS):
        body = ""
    raise Fault(
        ErrorKind.HTTP_STATUS,
        f"HTTP {resp.status} {resp.reason or ''}: {body[:200]}",
        http_status=resp.status,
        body_excerpt=body or None,
    )


def _json_or_none(status: int, body: bytes) -> Any:
    if status != 200:
        return None
    try:
        return loads(body)
    except JSONDecodeError:
        return None
