"""OpenAI-shaped reply bodies and SSE chunks.

Streaming chunks are assembled from pre-encoded byte pieces (the request's envelope once,
each token's JSON string once per vocabulary word), so the per-token path of a zero-latency
stream is a single ``bytes.join`` and never a JSON encoder call, unless logprobs are asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from batchprobe import _json
from batchprobe.fake import _tokens
from batchprobe.fake._answer import Answer
from batchprobe.fake._config import LogprobsFormat
from batchprobe.fake._requests import GenRequest

DONE = b"data: [DONE]\n\n"
# A data line that is not JSON, for the malformed_sse fault.
MALFORMED = b'data: {"choices": [{"index": 0, "text": \n\n'

_NULL = b"null"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


class Encoder:
    """Encodes one request's reply; knows its API, id, model and logprob wishes."""

    def __init__(
        self,
        gen: GenRequest,
        *,
        model_id: str,
        request_id: str,
        created: int,
        logprobs_format: LogprobsFormat = "openai",
    ) -> None:
        self._gen = gen
        self._chat = gen.api == "chat"
        self._logprobs = gen.logprobs and logprobs_format != "none"
        # Entries in chat's layout (a list of tokens): chat, and llama.cpp's completions.
        self._entries = self._chat or logprobs_format == "llama_cpp"
        self._envelope: dict[str, Any] = {
            "id": f"{'chatcmpl' if self._chat else 'cmpl'}-{request_id}",
            "object": "chat.completion.chunk" if self._chat else "text_completion",
            "created": created,
            "model": model_id,
        }
        head = _json.dumps(self._envelope)[:-1]  # drop the closing brace to append choices
        opener = b'"delta":{' if self._chat else b'"text":'
        self._prefix = b"data: " + head + b',"choices":[{"index":0,' + opener
        self._offsets: list[int] | None = None

    # -- streaming -------------------------------------------------------------------------

    def token_chunk(self, answer: Answer, index: int) -> bytes:
        """The SSE event carrying token ``index``; the last one carries the finish reason."""
        last = index == len(answer.texts) - 1
        finish = _json.dumps(answer.finish_reason) if last else _NULL
        logprobs = self._chunk_logprobs(answer, index) if self._logprobs else _NULL
        return self._chunk(answer.encoded[index], logprobs, finish, first=index == 0)

    def tokens_chunk(self, answer: Answer, start: int, end: int) -> bytes:
        """One SSE event carrying tokens ``start`` to ``end`` (coalesced); the finish reason
        when ``end`` is the answer's end."""
        if end - start == 1:
            return self.token_chunk(answer, start)
        last = end == len(answer.texts)
        finish = _json.dumps(answer.finish_reason) if last else _NULL
        logprobs = self._range_logprobs(answer, start, end) if self._logprobs else _NULL
        text = _json.dumps("".join(answer.texts[start:end]))
        return self._chunk(text, logprobs, finish, first=start == 0)

    def empty_chunk(self, finish_reason: str) -> bytes:
        """A chunk with no text that ends the stream (finish_reason "error")."""
        return self._chunk(b'""', _NULL, _json.dumps(finish_reason), first=True)

    def choice_chunk(self, index: int, answer: Answer) -> bytes:
        """One SSE event carrying a further choice's whole text (``n`` > 1) and its finish."""
        body = {**self._envelope, "choices": [self._whole(index, answer, "delta")]}
        return b"data: " + _json.dumps(body) + b"\n\n"

    def _whole(self, index: int, answer: Answer, key: str) -> dict[str, Any]:
        """Choice ``index`` with all of ``answer`` (chat: under ``key``, delta or message)."""
        choice: dict[str, Any] = {"index": index}
        if self._chat:
            choice[key] = {"role": "assistant", "content": answer.text}
        else:
            choice["text"] = answer.text
        choice["logprobs"] = None
        choice["finish_reason"] = answer.finish_reason
        return choice

    def usage_chunk(self, usage_body: dict[str, Any]) -> bytes:
        body = {**self._envelope, "choices": [], "usage": usage_body}
        return b"data: " + _json.dumps(body) + b"\n\n"

    def _chunk(self, text: bytes, logprobs: bytes, finish: bytes, *, first: bool) -> bytes:
        parts: tuple[bytes, ...]
        if self._chat:
            role = b'"role":"assistant",' if first else b""
            content = b'"content":' + text + b"}"
            parts = (self._prefix, role, content, b',"logprobs":', logprobs)
        else:
            parts = (self._prefix, text, b',"logprobs":', logprobs)
        return b"".join((*parts, b',"finish_reason":', finish, b"}]}\n\n"))

    def _chunk_logprobs(self, answer: Answer, index: int) -> bytes:
        if self._entries:
            return _json.dumps({"content": [self._entry(answer, index)]})
        return _json.dumps(
            {
                "tokens": [answer.texts[index]],
                "token_logprobs": [answer.logprobs[index]],
                "top_logprobs": [self._top_map(answer, index)] if self._gen.top_logprobs else None,
                "text_offset": [self._offset(answer, index)],
            }
        )

    def _range_logprobs(self, answer: Answer, start: int, end: int) -> bytes:
        indices = range(start, end)
        if self._entries:
            return _json.dumps({"content": [self._entry(answer, i) for i in indices]})
        tops = [self._top_map(answer, i) for i in indices] if self._gen.top_logprobs else None
        return _json.dumps(
            {
                "tokens": list(answer.texts[start:end]),
                "token_logprobs": list(answer.logprobs[start:end]),
                "top_logprobs": tops,
                "text_offset": [self._offset(answer, i) for i in indices],
            }
        )

    def _offset(self, answer: Answer, index: int) -> int:
        if self._offsets is None:
            self._offsets = [0, *accumulate(len(t) for t in answer.texts)]
        return self._offsets[index]

    # -- non-streaming ---------------------------------------------------------------------

    def body(
        self, answer: Answer, usage_body: dict[str, Any], more: Sequence[Answer] = ()
    ) -> bytes:
        """The whole JSON reply of a non-streaming request (``more``: choices 1 and on)."""
        choice: dict[str, Any] = {"index": 0}
        if self._chat:
            choice["message"] = {"role": "assistant", "content": answer.text}
        else:
            choice["text"] = answer.text
        choice["logprobs"] = self._full_logprobs(answer) if self._logprobs else None
        choice["finish_reason"] = answer.finish_reason
        obj = "chat.completion" if self._chat else "text_completion"
        further = [self._whole(i, a, "message") for i, a in enumerate(more, start=1)]
        return _json.dumps(
            {**self._envelope, "object": obj, "choices": [choice, *further], "usage": usage_body}
        )

    def _full_logprobs(self, answer: Answer) -> dict[str, Any]:
        indices = range(len(answer.texts))
        if self._entries:
            return {"content": [self._entry(answer, i) for i in indices]}
        tops = [self._top_map(answer, i) for i in indices] if self._gen.top_logprobs else None
        return {
            "tokens": list(answer.texts),
            "token_logprobs": list(answer.logprobs),
            "top_logprobs": tops,
            "text_offset": [self._offset(answer, i) for i in indices],
        }

    def _entry(self, answer: Answer, index: int) -> dict[str, Any]:
        """One token in the chat layout: the chosen one and its ``top_logprobs`` list."""
        text = answer.texts[index]
        chosen = _piece(text, answer.logprobs[index])
        top = [_piece(t, lp) for t, lp in top_logprobs(answer, index, self._gen.top_logprobs)]
        return {**chosen, "top_logprobs": top}

    def _top_map(self, answer: Answer, index: int) -> dict[str, float]:
        """The legacy completions layout: ``{token: logprob}``, likeliest first."""
        return dict(top_logprobs(answer, index, self._gen.top_logprobs))


def _piece(text: str, logprob: float) -> dict[str, Any]:
    return {"token": text, "logprob": logprob, "bytes": list(text.encode())}


def top_logprobs(answer: Answer, index: int, count: int) -> list[tuple[str, float]]:
    """The ``count`` likeliest tokens at ``index``, likeliest first: the chosen one first,
    unless it was sampled below a likelier one (``Answer.off_top``)."""
    if count <= 0:
        return []
    text, logprob = answer.texts[index], answer.logprobs[index]
    others = _tokens.alternatives(text, index, count)
    if index in answer.off_top:
        ranked = [(others[0], _tokens.PASSED_OVER_LOGPROB), (text, logprob)]
        rest = others[1:]
    else:
        ranked, rest = [(text, logprob)], others
    floor = min(logprob for _, logprob in ranked)
    ranked += [(word, round(floor - 1.0 - rank, 4)) for rank, word in enumerate(rest)]
    return ranked[:count]
