"""The KV pool a run filled: what the server holds, where that was read, what the wave sent."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Oversize = Literal["refused", "answered", "hung", "not sent"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class KvPool(_Model):
    """The tokens of KV cache the server's requests in flight share."""

    tokens: int = Field(ge=1, description="Tokens the pool holds.")
    per_request: int | None = Field(
        default=None, description="The most one request may use (llama.cpp's n_ctx per slot)."
    )
    source: str = Field(description="Where it was read: the launch, a server endpoint, --kv-tokens.")
    assumption: str | None = Field(
        default=None, description="What the reading assumes that the server does not say."
    )


class PoolPressure(_Model):
    """The KV-pressure wave: requests that each fit the pool alone, together past it."""

    pool: KvPool
    requests: int = Field(description="Requests sent at once.")
    tokens_per_request: int = Field(description="Prompt and max_tokens of each, planned.")
    planned_tokens: int = Field(
        description="What the wave asked of the pool at once: each request's prompt tokens (as "
        "the server counted them, where it said) and its max_tokens, together."
    )
    peak_tokens: int | None = Field(
        default=None,
        description="The most tokens in flight at once, from the replies: prompt tokens plus "
        "the tokens streamed so far, over the requests not yet ended.",
    )
    refused: int = Field(
        default=0, description="Requests refused up front (HTTP 429 or 503, before any token)."
    )
    preemptions: int | None = Field(
        default=None, description="Preemptions the server counted during the wave (/metrics)."
    )
    oversize: Oversize = Field(
        default="not sent",
        description="The request larger than the pool, sent alone after the wave: refused with "
        "an error (right), answered, or neither within its deadline (hung).",
    )
    oversize_tokens: int | None = None
    oversize_deadline_s: float | None = None

    @property
    def asked(self) -> float:
        """What the wave asked of the pool, as a share of it."""
        return self.planned_tokens / self.pool.tokens

