"""Checks of one answer against its own request and its serial reference.

Each returns the evidence of what broke, or None. They need no other session: the judge
(``probe.judge``) decides what an answer's failure means (cross-talk, a flip, a failure).
"""

from __future__ import annotations

from batchprobe.client.types import ErrorKind
from batchprobe.results.sessions import SessionResult

# A refusal of the request itself (its path or a parameter), as opposed to a failure to
# answer it: the server does not serve what was asked.
_REFUSED_STATUS = frozenset({404, 405, 422})
# Request fields a 400 may name when the server does not take them.
_FIELDS = (
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "top_p",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "messages",
    "prompt",
)


def refused(s: SessionResult) -> bool:
    """The server refused the request's path or a parameter (404, 405, 422, or a 400 that
    names a request field): not served, rather than answered wrongly."""
    error = s.error
    if error is None or error.kind is not ErrorKind.HTTP_STATUS or error.http_status is None:
        return False
    if error.http_status in _REFUSED_STATUS:
        return True
    body = (error.body_excerpt or "") + error.message
    return error.http_status == 400 and any(f in body for f in _FIELDS)


def tokens(s: SessionResult) -> int:
    """How long the reply is: the pieces streamed, or the usage's count where it says more
    (an engine may stream two tokens in one chunk). Usage that says less than what streamed
    is not this reply's own (``usage_mismatch``), not a short reply."""
    return max(len(s.chunk_ends), s.completion_tokens or 0)


def _max_tokens(s: SessionResult) -> int | None:
    return s.situation.max_tokens if s.situation is not None else None


def _stops(s: SessionResult) -> list[str]:
    return s.situation.stop if s.situation is not None else []


def short_length(s: SessionResult, slack: int) -> str | None:
    """A reply that says it ran out of tokens short of its own max_tokens (it ran with
    another row's): judged on any model, whatever its text."""
    limit = _max_tokens(s)
    got = tokens(s)
    if limit is not None and s.error is None and s.finish_reason == "length" and got + slack < limit:
        return f"finish 'length' after {got} of its max_tokens {limit}"
    return None


def ended_early(s: SessionResult, ref: SessionResult, slack: int) -> str | None:
    """A reply that stopped where its reference, with the same text so far, went on, and with
    no reason of its own to stop: a 'length' finish short of its own max_tokens, or a stop
    before its own stop string (the reference shows where that is) or an end-of-sequence its
    reference did not take there."""
    if _max_tokens(s) is None or s.error is not None:
        return None
    short = short_length(s, slack)
    if short is not None:
        return short
    got, went = tokens(s), tokens(ref)
    if s.finish_reason == "length" or got + slack >= went:
        return None
    if s.prompt_digest != ref.prompt_digest:
        return None  # a later turn built from its own answers: another prompt, another end
    if any(ref.text.startswith(s.text + stop) for stop in _stops(s)):
        return None  # its own stop string, where its reference has it
    if not ref.text.startswith(s.text):
        # It diverged before it stopped: another text may end anywhere (numerics on an engine
        # that is not batch-invariant; the greedy comparison reports it). Only a reply that
        # is its reference's text cut short has no reason of its own to stop.
        return None
    return (
        f"ended with finish {s.finish_reason!r} after {got} tokens; its serial reference, the "
        f"same text so far, went on to {went} tokens (finish {ref.finish_reason!r})"
    )


def usage_mismatch(s: SessionResult, ref: SessionResult | None, slack: int) -> str | None:
    """Usage that is not this reply's: fewer completion tokens than pieces streamed, other
    completion tokens than its reference for the same text, or other prompt tokens than its
    reference for the same prompt (uncached). Without a reference, the stream alone."""
    if s.error is not None:
        return None
    streamed = len(s.chunk_ends)
    said = s.completion_tokens
    if said is not None and s.streamed and said + slack < streamed:
        return f"usage says {said} completion tokens; {streamed} pieces were streamed"
    if ref is None:
        return None
    same_text = s.text == ref.text and ref.completion_tokens is not None
    if said is not None and same_text and abs(said - (ref.completion_tokens or 0)) > slack:
        return (
            f"usage says {said} completion tokens for the text its serial reference "
            f"reported as {ref.completion_tokens}"
        )
    cold = not s.cached_tokens and not ref.cached_tokens
    same_prompt = s.prompt_digest is not None and s.prompt_digest == ref.prompt_digest
    # A reference that says 0 prompt tokens miscounts itself (vllm-mlx 0.4-0.5's simple
    # engine does for chat): nothing to hold the row against.
    known = s.prompt_tokens is not None and bool(ref.prompt_tokens)
    if cold and same_prompt and known and s.prompt_tokens != ref.prompt_tokens:
        return (
            f"usage says {s.prompt_tokens} prompt tokens; the same prompt had "
            f"{ref.prompt_tokens} when sent alone"
        )
    return None


def not_top1(s: SessionResult) -> str | None:
    """A greedy row whose chosen token was not its own top-1 (it was sampled)."""
    sit = s.situation
    if sit is None or sit.sampled or not s.top_logprobs:
        return None
    for index, token in enumerate(s.top_logprobs):
        best = max(token.alternatives, key=lambda a: a.logprob, default=None)
        if best is not None and token.logprob < best.logprob - 1e-3:
            return (
                f"token {index} {token.token!r} (logprob {token.logprob:.2f}) is not its top-1 "
                f"{best.token!r} ({best.logprob:.2f}): a greedy row was sampled"
            )
    return None


def situation(s: SessionResult) -> str:
    """The session's circumstances in words, for a reason line."""
    sit = s.situation
    if sit is None:
        return ""
    words = []
    if sit.copy_index:
        words.append(f"its copy {sit.copy_index + 1}")
    if sit.decoding_at_arrival:
        words.append(f"joined while {sit.decoding_at_arrival} were decoding (client's view)")
    elif sit.in_flight_at_arrival:
        words.append(f"sent with {sit.in_flight_at_arrival} in flight (client's view)")
    token = s.check.token if s.check is not None else None
    gone = [d for d in sit.departures if token is None or d.at_token <= token]
    if gone:
        last = gone[-1]
        words.append(
            f"after session {last.session} left at its token {last.at_token} "
            f"({last.in_flight} still in flight)"
        )
    if sit.params != "greedy":
        words.append(sit.params)
    if s.cached_tokens:
        words.append(f"{s.cached_tokens} prompt tokens cached")
    words.append(f"max_tokens {sit.max_tokens}, {s.prompt_tokens or '?'} prompt tokens, {sit.api}")
    return f" ({'; '.join(words)})"


def passed(s: SessionResult) -> bool | None:
    """The session's self-check; a recall session scored without one counts by its hit."""
    if s.check is not None:
        return s.check.passed
    return s.hit if s.workload == "recall" else None
