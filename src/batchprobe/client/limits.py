"""How much of a reply the client reads before it calls the reply wrong (bounded memory)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Caps on one reply. A server past them is recorded as an error and no longer read, so a
    runaway server (ignored ``max_tokens``, one endless event) costs bounded memory and time."""

    # Frozen so that one default instance can be shared safely as a default argument.
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_line_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        description="Longest SSE line, and longest event (its data lines together).",
    )
    max_body_bytes: int = Field(
        default=4 << 20,
        ge=1024,
        description="Most bytes of one reply: a whole event stream, or a JSON body.",
    )
    token_slack: int = Field(
        default=8,
        ge=0,
        description="Content events tolerated beyond max_tokens, plus max_tokens // 8: "
        "servers may split a token across events, never add whole tokens.",
    )

    chars_per_token: int = Field(
        default=64,
        ge=1,
        description="Text characters tolerated per tolerated content event: no tokenizer's "
        "tokens come near it on average, and it bounds the text a verdict keeps per reply.",
    )

    def max_content_events(self, max_tokens: int) -> int:
        """Content-bearing events (or reported tokens) after which a reply exceeds ``max_tokens``."""
        return max_tokens + self.token_slack + max_tokens // 8

    def max_text_chars(self, max_tokens: int) -> int:
        """Text characters after which a reply exceeds ``max_tokens`` (and the most kept)."""
        return self.max_content_events(max_tokens) * self.chars_per_token
