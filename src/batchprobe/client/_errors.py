"""The one place where a failed request becomes a ``RequestError``.

Failures reach :func:`classify` either as aiohttp/timeout exceptions or as a
:class:`Fault` raised by the stream parser for what only the protocol can see
(HTTP status, ``finish_reason: "error"``, empty output, malformed or cut-off stream).
"""

from __future__ import annotations

import asyncio

import aiohttp

from batchprobe._safe import no_surrogates
from batchprobe.client.timeouts import Timeouts
from batchprobe.client.types import ErrorKind, RequestError

BODY_EXCERPT_CHARS = 500
# asyncio.TimeoutError is the builtin TimeoutError only from Python 3.11 on.
TIMEOUT_ERRORS = (TimeoutError, asyncio.TimeoutError)


class Fault(Exception):
    """A per-request failure detected from the reply itself, already classified."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        http_status: int | None = None,
        body_excerpt: str | None = None,
    ) -> None:
        self.kind = kind
        self.http_status = http_status
        self.body_excerpt = body_excerpt
        super().__init__(message)


def excerpt(data: bytes | str, limit: int = BODY_EXCERPT_CHARS) -> str:
    """The head of a reply as text: invalid UTF-8 and lone surrogates become U+FFFD."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return no_surrogates(text[:limit])


def _one_line(text: str) -> str:
    # A message may quote a header value or reason phrase, which aiohttp decodes with
    # surrogateescape: no lone surrogate reaches the verdict (no UTF-8 file can hold one).
    return no_surrogates(" ".join(text.split())[:BODY_EXCERPT_CHARS])


def classify(exc: BaseException, timeouts: Timeouts) -> RequestError:
    """Map a failure to its ``ErrorKind``; the most specific class wins."""
    if isinstance(exc, Fault):
        return RequestError(
            kind=exc.kind,
            message=_one_line(str(exc)),
            http_status=exc.http_status,
            body_excerpt=None if exc.body_excerpt is None else no_surrogates(exc.body_excerpt),
        )
    kind, message = _kind_of(exc, timeouts)
    detail = _one_line(str(exc)) or type(exc).__name__
    return RequestError(kind=kind, message=f"{message} ({detail})")


def _kind_of(exc: BaseException, timeouts: Timeouts) -> tuple[ErrorKind, str]:
    # The aiohttp timeout classes are also TimeoutErrors and ClientConnectionErrors,
    # so they are tested before either of those.
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ErrorKind.CONNECT_TIMEOUT, f"no connection within {timeouts.connect:g} s"
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return ErrorKind.READ_TIMEOUT, f"no data from the server for {timeouts.read:g} s"
    if isinstance(exc, TIMEOUT_ERRORS):
        return ErrorKind.TOTAL_TIMEOUT, f"request not finished within {timeouts.total:g} s"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ErrorKind.CONNECT_ERROR, "cannot connect"
    if isinstance(exc, aiohttp.ClientResponseError):
        # aiohttp raises this for a reply that is not valid HTTP.
        return ErrorKind.MALFORMED_STREAM, "invalid HTTP reply"
    # ClientPayloadError (truncated body), ServerDisconnectedError, a reset socket:
    # the connection was made, then lost before the reply was complete.
    return ErrorKind.DISCONNECTED, "connection lost before the reply was complete"
