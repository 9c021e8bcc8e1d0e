"""Incremental parsing of an OpenAI-style reply into a ``RequestRecord``.

Per-token work is the hot path (the client must stream >= 60k tokens/s on one core),
so :meth:`ReplyParser.feed` does one split per network read, one JSON parse per event
and two list appends per content-bearing event; everything else waits for the end.

Every reply is bounded (:class:`~batchprobe.client.limits.Limits`): a line or event longer
than ``max_line_bytes``, or a stream longer than ``max_body_bytes``, is a malformed stream
(oversized), found in time linear in its size (a line's fragments are joined once, when it
ends or grows too long); more content events, or more text, than ``max_tokens`` allows is
``exceeded_max_tokens``. Either stops the reading, and a record keeps no more text than
``max_tokens`` allows. Text is kept as sent, except that an event holding a lone surrogate
(the escape ``\ud800`` or the bytes ED A0 80) or invalid UTF-8 is not JSON the client reads:
a malformed stream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from batchprobe._json import JSONDecodeError, loads
from batchprobe.client._errors import Fault, excerpt
from batchprobe.client.limits import Limits
from batchprobe.client.types import (
    Api,
    ChoiceText,
    ErrorKind,
    RequestError,
    RequestRecord,
    TokenAlternative,
    TokenChoice,
)

_DONE = b"[DONE]"
DEFAULT_LIMITS = Limits()
# A finish_reason is a word ("stop", "length"); a longer one is kept cut to this.
_FINISH_CHARS = 64
# Alternatives kept per token: top-k asks for a handful.
_MAX_ALTERNATIVES = 20
_POSITION = re.compile(r":? line \d+ column \d+.*$")


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars]


def _oversized(what: str, limit: int) -> Fault:
    return Fault(ErrorKind.MALFORMED_STREAM, f"{what} is longer than {limit} bytes (oversized)")


@dataclass(slots=True)
class _Other:
    """A choice past the first, as it streams (``n`` > 1)."""

    pieces: list[str] = field(default_factory=list)
    chars: int = 0
    finish_reason: str | None = None


class ReplyParser:
    """Accumulates one reply: feed it SSE bytes as they arrive, or one JSON body."""

    __slots__ = (
        "_buf",
        "_buf_len",
        "_byte_cap",
        "_bytes",
        "_char_cap",
        "_chars",
        "_chat",
        "_line_cap",
        "_max_events",
        "_max_reported",
        "_max_tokens",
        "_n",
        "_pending",
        "_pending_len",
        "done",
        "finish_reason",
        "logprobs",
        "others",
        "pieces",
        "streamed",
        "token_times",
        "tops",
        "usage",
    )

    def __init__(
        self,
        api: Api,
        *,
        want_logprobs: bool,
        streamed: bool,
        max_tokens: int,
        limits: Limits = DEFAULT_LIMITS,
        want_top: bool = False,
        choices: int = 1,
    ) -> None:
        self._chat = api == "chat"
        # n > 1: choices are read by their index; index 0 is the record's text, the others
        # (at most ``choices`` of them, so an unasked index shows too) are kept apart.
        self._n = choices
        self.others: dict[int, _Other] = {}
        # Fragments of the unfinished last line, joined once when it ends: rebuilding one
        # bytes object per read would make a long line quadratic.
        self._buf: list[bytes] = []
        self._buf_len = 0
        self._line_cap = limits.max_line_bytes
        self._byte_cap = limits.max_body_bytes
        self._bytes = 0
        self._char_cap = limits.max_text_chars(max_tokens)
        self._chars = 0
        self._max_tokens = max_tokens
        self._max_events = limits.max_content_events(max_tokens)
        # Reported usage may count every choice's tokens.
        self._max_reported = self._max_events * choices
        # Data lines of an event that did not parse alone (SSE allows multi-line data).
        self._pending: list[bytes] = []
        self._pending_len = 0
        self.token_times: list[float] = []
        self.pieces: list[str] = []
        self.logprobs: list[float] | None = [] if want_logprobs else None
        self.tops: list[TokenChoice] | None = [] if want_top and want_logprobs else None
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.done = False
        self.streamed = streamed

    def feed(self, data: bytes, now: float) -> bool:
        """Parse the SSE bytes of one network read, all stamped ``now``; True after [DONE]."""
        self._bytes += len(data)
        if self._bytes > self._byte_cap:
            raise Fault(
                ErrorKind.MALFORMED_STREAM,
                f"the stream is longer than {self._byte_cap} bytes (oversized); "
                "not read further",
            )
        if b"\n" not in data:
            self._hold(data)
            return False
        if self._buf:
            self._buf.append(data)
            data = b"".join(self._buf)
            self._buf.clear()
            self._buf_len = 0
        lines = data.split(b"\n")
        tail = lines.pop()
        if len(data) > self._line_cap:
            # Rare (reads are far smaller than the cap): only then can a whole line be too long.
            for line in lines:
                if len(line) > self._line_cap:
                    raise _oversized("a stream line", self._line_cap)
        if tail:
            self._hold(tail)
        for line in lines:
            if line[:5] == b"data:":
                if self._data_line(line[5:].strip(), now):
                    return True
            elif self._pending and not line.strip():
                self._end_of_event(now)
            # Comments (":..."), "event:", "id:" and "retry:" lines carry nothing used here.
        return False

    def _hold(self, fragment: bytes) -> None:
        """Keep part of an unfinished line; a line past the cap is an oversized-event fault."""
        self._buf_len += len(fragment)
        if self._buf_len > self._line_cap:
            raise _oversized("a stream line", self._line_cap)
        self._buf.append(fragment)

    def feed_json(self, body: bytes, now: float) -> None:
        """Parse a whole non-streaming reply that arrived at ``now``."""
        self.streamed = False
        self._event(_json_or_fault(body, "reply"), now, body)
        self.done = True

    def _data_line(self, payload: bytes, now: float) -> bool:
        if self._pending:
            self._pend(payload)
            return False
        if payload == _DONE:
            self.done = True
            return True
        try:
            event = loads(payload)
        except JSONDecodeError:
            # Possibly the first line of a multi-line event; judged at the blank line.
            self._pend(payload)
            return False
        self._event(event, now, payload)
        return False

    def _pend(self, payload: bytes) -> None:
        self._pending_len += len(payload)
        if self._pending_len > self._line_cap:
            raise _oversized("a stream event", self._line_cap)
        self._pending.append(payload)

    def _end_of_event(self, now: float) -> None:
        payload = b"\n".join(self._pending)
        self._pending.clear()
        self._pending_len = 0
        self._event(_json_or_fault(payload, "stream event"), now, payload)

    def _event(self, event: Any, now: float, raw: bytes) -> None:
        try:
            choices = event.get("choices")
            usage = event.get("usage")
            if usage is not None:
                self.usage = usage
            if choices and self._n == 1:
                self._choice(choices[0], now)
            elif choices:
                for choice in choices:
                    self._indexed(choice, now)
            elif choices is None and usage is None:
                self._no_choices(event, raw)
        except (AttributeError, TypeError, IndexError, KeyError):
            raise Fault(
                ErrorKind.MALFORMED_STREAM,
                f"event lacks the expected fields: {excerpt(raw, 200)!r}",
                body_excerpt=excerpt(raw),
            ) from None

    def _text_of(self, choice: Any) -> tuple[Any, Any, Any]:
        """A choice's (delta or text, its text, finish_reason), from either request path."""
        finish = choice.get("finish_reason")
        if self._chat:
            delta = choice.get("delta")
            if delta is None:
                delta = choice.get("message")
            text = None if delta is None else delta.get("content")
        else:
            delta = text = choice.get("text")
        return delta, text, finish

    def _indexed(self, choice: Any, now: float) -> None:
        """One choice of a reply asked for several: index 0 as a plain reply's, any other
        kept by its index."""
        index = choice.get("index", 0)
        if type(index) is not int:
            raise TypeError("choice index is not an integer")
        if index == 0:
            self._choice(choice, now)
            return
        other = self.others.get(index)
        if other is None:
            if len(self.others) >= self._n:
                raise Fault(
                    ErrorKind.MALFORMED_STREAM,
                    f"choice index {index}: more choices than the {self._n} asked for",
                )
            other = self.others[index] = _Other()
        _, text, finish = self._text_of(choice)
        if text:
            if type(text) is not str:
                raise TypeError("text is not a string")
            other.pieces.append(text)
            other.chars += len(text)
            if other.chars > self._char_cap:
                raise self._exceeded(f"{other.chars} characters of choice {index}", self._char_cap)
        if finish is not None:
            other.finish_reason = _cut(str(finish), _FINISH_CHARS)

    def _choice(self, choice: Any, now: float) -> None:
        delta, text, finish = self._text_of(choice)
        if text:
            if type(text) is not str:
                raise TypeError("text is not a string")
            self.token_times.append(now)
            self.pieces.append(text)
            self._chars += len(text)
            if len(self.pieces) > self._max_events:
                raise self._exceeded(f"{len(self.pieces)} content events", self._max_events)
            if self._chars > self._char_cap:
                raise self._exceeded(f"{self._chars} characters of text", self._char_cap)
        elif delta is None and finish is None:
            raise KeyError("choice has no text and no finish_reason")
        if finish is not None:
            self.finish_reason = _cut(str(finish), _FINISH_CHARS)
        if self.logprobs is not None:
            block = choice.get("logprobs")
            if block:
                self._logprobs(block, self.logprobs)

    def _logprobs(self, block: Any, chosen: list[float]) -> None:
        """Chosen-token logprobs (and with top-k, each token's best alternative) from either
        layout: ``content`` entries (chat, and llama.cpp's completions) or the legacy
        completions arrays (``tokens``, ``token_logprobs``, ``top_logprobs`` maps)."""
        content = block.get("content")
        if content is not None:
            tokens = [item.get("token") for item in content]
            values = [item.get("logprob") for item in content]
            tops = [_entry_pairs(item.get("top_logprobs")) for item in content]
        else:
            tokens = block.get("tokens") or []
            values = block.get("token_logprobs") or []
            tops = [_map_pairs(top) for top in block.get("top_logprobs") or ()]
        chosen.extend(float(v) for v in values if _is_number(v))
        if len(chosen) > self._max_events:
            raise self._exceeded(f"{len(chosen)} token logprobs", self._max_events)
        if self.tops is not None:
            self.tops.extend(_token_choices(tokens, values, tops, self._char_cap))

    def _no_choices(self, event: Any, raw: bytes) -> None:
        error = event.get("error")
        if error is not None:
            # An error object in a 200 reply is the server saying the generation failed,
            # the same failure as finish_reason "error".
            message = error.get("message", error) if isinstance(error, dict) else error
            raise Fault(
                ErrorKind.FINISH_REASON_ERROR,
                f"server reported an error in a 200 reply: {message}",
                body_excerpt=excerpt(raw),
            )
        raise KeyError("event has neither choices nor usage")

    def _exceeded(self, seen: str, tolerated: int) -> Fault:
        return Fault(
            ErrorKind.EXCEEDED_MAX_TOKENS,
            f"{seen} for max_tokens {self._max_tokens} (tolerated: {tolerated}); "
            "the reply was not read further",
            body_excerpt=excerpt(self.text()) or None,
        )

    def _check_token_count(self) -> None:
        """The server's own counts (usage, one logprob per token) beyond ``max_tokens``."""
        usage = self.usage if isinstance(self.usage, dict) else {}
        reported = _int_or_none(usage.get("completion_tokens"))
        if reported is not None and reported > self._max_reported:
            raise self._exceeded(f"usage.completion_tokens {reported}", self._max_reported)

    def finish(self, now: float) -> None:
        """The reply ended (EOF or [DONE]): raise a ``Fault`` unless it is a complete answer."""
        tail = b"".join(self._buf).strip()
        self._buf.clear()
        self._buf_len = 0
        if tail[:5] == b"data:" and not self._pending:
            self._last_line(tail[5:].strip(), now)
        if self._pending:
            # Whole lines that never parsed, even joined: not a cut-off, a malformed event.
            self._end_of_event(now)
        if not self.done and self.finish_reason is None:
            raise Fault(
                ErrorKind.DISCONNECTED,
                "stream ended before [DONE] or a finish_reason",
                body_excerpt=excerpt(self.text()) or None,
            )
        self._check_token_count()
        if self._cut_off():
            raise Fault(
                ErrorKind.NO_FINISH_REASON,
                "the stream ended with [DONE] short of max_tokens, with neither a finish_reason "
                "nor usage: the answer was cut off",
                body_excerpt=excerpt(self.text()) or None,
            )
        if self.finish_reason == "error":
            raise Fault(
                ErrorKind.FINISH_REASON_ERROR,
                'HTTP 200 with finish_reason "error"',
                body_excerpt=excerpt(self.text()) or None,
            )
        if not self.pieces and self.finish_reason != "stop":
            # An empty answer the model ended itself (end-of-sequence first) is an answer,
            # judged by the checks like any other; without that reason, the text went missing.
            raise Fault(
                ErrorKind.EMPTY_OUTPUT,
                f"the reply has no text (finish_reason {self.finish_reason!r})",
            )

    def _cut_off(self) -> bool:
        """A stream closed on purpose ([DONE]) that never said why nor accounted for itself.

        A server that reports usage, or reached ``max_tokens``, has finished the answer even
        when it leaves finish_reason out (vllm-mlx 0.4.0's simple engine does at max_tokens).
        """
        return (
            self.streamed
            and self.finish_reason is None
            and self.usage is None
            and len(self.pieces) < self._max_tokens
        )

    def _last_line(self, payload: bytes, now: float) -> None:
        """A final line without its newline: an event if it parses, else a cut-off."""
        if payload == _DONE:
            self.done = True
            return
        try:
            event = loads(payload)
        except JSONDecodeError:
            return
        self._event(event, now, payload)

    def text(self) -> str:
        return "".join(self.pieces)

    def record(
        self,
        request_id: str,
        started_at: float,
        finished_at: float,
        error: RequestError | None,
    ) -> RequestRecord:
        usage = self.usage if isinstance(self.usage, dict) else {}
        details = usage.get("prompt_tokens_details")
        # A reply stopped past its bounds keeps what max_tokens allows, and no more.
        text = self.text()[: self._char_cap]
        ends = [end for end in accumulate(len(piece) for piece in self.pieces)
                if end <= self._char_cap]
        if len(text) > (ends[-1] if ends else 0):
            ends.append(len(text))
        cap = self._max_events
        return RequestRecord(
            request_id=request_id,
            started_at=started_at,
            first_token_at=self.token_times[0] if self.token_times else None,
            finished_at=finished_at,
            token_times=self.token_times[: len(ends)],
            # The output is kept once: the text, and where each chunk of it ended.
            text=text,
            chunk_ends=ends,
            completion_tokens=_int_or_none(usage.get("completion_tokens")),
            prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
            cached_tokens=_int_or_none(
                details.get("cached_tokens") if isinstance(details, dict) else None
            ),
            finish_reason=self.finish_reason,
            choices=[
                ChoiceText(index=index, text="".join(other.pieces), finish_reason=other.finish_reason)
                for index, other in sorted(self.others.items())
            ],
            logprobs=None if self.logprobs is None else self.logprobs[:cap],
            top_logprobs=None if self.tops is None else self.tops[:cap],
            streamed=self.streamed,
            error=error,
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _entry_pairs(top: Any) -> list[tuple[Any, Any]]:
    """``[{token, logprob}, ...]`` (the chat layout) as pairs."""
    return [(t.get("token"), t.get("logprob")) for t in top or ()]


def _map_pairs(top: Any) -> list[tuple[Any, Any]]:
    """``{token: logprob}`` (the legacy completions layout) as pairs; null: none."""
    return list(top.items()) if isinstance(top, dict) else []


def _token_choices(
    tokens: list[Any], values: list[Any], tops: list[list[tuple[Any, Any]]], chars: int
) -> list[TokenChoice]:
    """Each token with a string text and a numeric logprob, and its listed alternatives
    (likeliest first, at most ``_MAX_ALTERNATIVES``); a token's text is kept up to ``chars``."""
    choices = []
    for index, (token, value) in enumerate(zip(tokens, values)):
        if not isinstance(token, str) or not _is_number(value):
            continue
        listed = tops[index] if index < len(tops) else []
        alternatives = [
            TokenAlternative(token=_cut(str(t), chars), logprob=float(lp))
            for t, lp in listed
            if t is not None and _is_number(lp)
        ]
        alternatives.sort(key=lambda alt: -alt.logprob)
        choices.append(TokenChoice(
            token=_cut(token, chars), logprob=float(value),
            alternatives=alternatives[:_MAX_ALTERNATIVES],
        ))
    return choices


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json_or_fault(data: bytes, what: str) -> Any:
    """Parsed JSON, or the malformed-stream fault naming ``what`` was not JSON."""
    try:
        return loads(data)
    except JSONDecodeError as exc:
        # orjson's message names a lone surrogate or invalid UTF-8 ("surrogates not allowed").
        reason = _POSITION.sub("", str(exc))[:120]
        raise Fault(
            ErrorKind.MALFORMED_STREAM,
            f"{what} is not JSON ({reason}): {excerpt(data, 200)!r}",
            body_excerpt=excerpt(data),
        ) from None
