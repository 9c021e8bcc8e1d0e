"""One request of one arm, scored: what the client saw and what its checks said."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# The client parses them from every engine's layout; the session keeps them as parsed.
from batchprobe.client.types import (
    ChoiceText,
    RequestError,
    TokenAlternative,  # noqa: F401 - re-exported
    TokenChoice,
    chunk_texts,
)
from batchprobe.results.shapes import SelfCheck, Situation

Workload = Literal["recall", "decode"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class SessionOutcome(str, Enum):
    """One session's outcome on its own: the session grid's colours."""

    HIT = "hit"
    MISS = "miss"
    CROSS_TALK = "cross_talk"
    ERROR = "error"
    ANSWERED = "answered"  # decode: an answer, judged only against the baseline's


class SessionResult(_Model):
    """One request of one arm, scored."""

    arm: str
    workload: Workload
    session: int = Field(description="Index of the item; the same item has the same index in every arm.")
    request_id: str
    error: RequestError | None = None
    reconnect: str | None = Field(
        default=None,
        description="Why the request went out twice: its first send provably never reached the server.",
    )
    hung_up: bool = Field(
        default=False,
        description="The client hung up mid-stream on purpose (the aborts shape): a partial "
        "answer, not judged; its retry and its neighbours are.",
    )
    item: str | None = Field(
        default=None, description="Its key in the report's items: the request as it was sent."
    )
    planned: str | None = Field(
        default=None,
        description="A later conversation turn: its key in the report's items as planned, "
        "before it was built from the turn before as that was sent and answered.",
    )
    prompt_head: str = Field(default="", description="The first characters of the prompt.")
    expected_code: str | None = Field(default=None, description="recall: this session's needle")
    hit: bool | None = Field(default=None, description="recall: own code found in the answer")
    cross_talk_from: list[int] = Field(
        default_factory=list, description="sessions whose codes (or count numbers) appear here"
    )
    shape: str = Field(default="burst", description="The traffic shape whose item this is.")
    situation: Situation | None = Field(
        default=None, description="Where it stood in its wave: arrival, in flight, parameters."
    )
    check: SelfCheck | None = Field(
        default=None, description="The item's own checker on this answer (None: not determined)."
    )
    answer_excerpt: str = ""
    text: str = Field(default="", description="The whole generated text (for greedy comparison).")
    chunk_ends: list[int] = Field(
        default_factory=list,
        description="End offset in text of each streamed chunk (the output is stored once).",
    )
    logprobs: list[float] | None = Field(
        default=None, description="Chosen-token logprobs (with --logprobs, where supported)."
    )
    top_logprobs: list[TokenChoice] | None = Field(
        default=None,
        description="Greedy rows beside sampled ones: each token's top alternatives (where the "
        "server returns them), so a sampled greedy row shows.",
    )
    prompt_digest: str | None = Field(
        default=None,
        description="Digest of the exact prompt (and chat messages) sent: a conversation's later "
        "turn is built from its arm's own answers, so arms compare greedy text only where equal.",
    )
    finish_reason: str | None = None
    choices: list[ChoiceText] = Field(
        default_factory=list,
        description="A row that asked for several choices (n): every one but index 0 (text).",
    )
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    start_s: float = Field(description="Request start, seconds since the arm began.")
    first_token_s: float | None = Field(default=None, description="Seconds since the arm began.")
    last_token_s: float | None = Field(default=None, description="Seconds since the arm began.")
    end_s: float = Field(description="Seconds since the arm began.")
    itl_s: list[float] = Field(default_factory=list, description="Gaps between streamed chunks.")
    streamed: bool = True
    buffered: bool = Field(
        default=False, description="Every token arrived at once: timed end to end instead."
    )

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def pieces(self) -> list[str]:
        """The generated text chunk by chunk, derived from ``text`` and ``chunk_ends``."""
        return chunk_texts(self.text, self.chunk_ends)

    @property
    def outcome(self) -> SessionOutcome:
        """What the session shows on its own (greedy divergence is a comparison, not here)."""
        if self.error is not None:
            return SessionOutcome.ERROR
        if self.cross_talk_from:
            return SessionOutcome.CROSS_TALK
        if self.hit is None:
            return SessionOutcome.ANSWERED
        return SessionOutcome.HIT if self.hit else SessionOutcome.MISS

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.start_s

    @property
    def e2e_s(self) -> float:
        return self.end_s - self.start_s


def refused_up_front(s: SessionResult) -> bool:
    """A request the server refused before any token with HTTP 429 or 503 (a full server
    saying so), not one it took and then failed."""
    return s.error is not None and s.first_token_s is None and s.error.http_status in (429, 503)
