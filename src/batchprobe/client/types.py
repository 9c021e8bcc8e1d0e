"""What the client is asked to send and what it records (the contract with probe/)."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

Api = Literal["completions", "chat"]
MAX_CHOICES = 8
"""The most choices (``n``) one request may ask for."""


class ErrorKind(str, Enum):
    """Why a request failed, classified once in the client."""

    CONNECT_ERROR = "connect_error"
    CONNECT_TIMEOUT = "connect_timeout"
    READ_TIMEOUT = "read_timeout"
    TOTAL_TIMEOUT = "total_timeout"
    HTTP_STATUS = "http_status"
    FINISH_REASON_ERROR = "finish_reason_error"
    EMPTY_OUTPUT = "empty_output"
    """No text, and no finish_reason "stop" to say the model ended it (an empty answer that
    stopped at end-of-sequence is an answer, left to the checks)."""
    MALFORMED_STREAM = "malformed_stream"
    DISCONNECTED = "disconnected"
    EXCEEDED_MAX_TOKENS = "exceeded_max_tokens"
    """More output than ``max_tokens`` allows: a stop-condition bug, a correctness failure."""
    NO_FINISH_REASON = "no_finish_reason"
    """A stream closed with [DONE] short of ``max_tokens`` with neither a finish_reason nor
    usage: an answer cut off (llama-cpp-python's server does this to a stream as soon as
    another request waits)."""


class RequestError(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    kind: ErrorKind
    message: str
    http_status: int | None = None
    body_excerpt: str | None = Field(default=None, description="First 500 characters of the body.")


class ChatMessage(BaseModel):
    """One earlier message of a chat conversation."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class CompletionRequest(BaseModel):
    """One request. For ``api="chat"`` the prompt becomes the last user message, after
    ``messages`` (the conversation so far; none for a one-shot prompt)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    request_id: str
    api: Api = "completions"
    prompt: str
    messages: list[ChatMessage] = Field(
        default_factory=list, description="chat: the messages before ``prompt``."
    )
    max_tokens: int = Field(ge=1)
    temperature: float = 0.0
    seed: int | None = None
    logprobs: int | None = Field(
        default=None, ge=0, description="Ask for per-token logprobs (top-k count; 0 = chosen only)."
    )
    stream: bool = True
    n: int = Field(
        default=1, ge=1, le=MAX_CHOICES,
        description="Choices asked for (OpenAI's ``n``); every one past the first is kept apart.",
    )
    extra_body: dict[str, JsonValue] = Field(
        default_factory=dict, description="Engine-specific fields, e.g. {'cache_prompt': False}."
    )

    @model_validator(mode="after")
    def _messages_are_chat(self) -> CompletionRequest:
        if self.messages and self.api != "chat":
            raise ValueError("messages: only a chat request (api 'chat') carries earlier messages")
        return self


class TokenAlternative(BaseModel):
    """One token the server listed among a position's likeliest."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    token: str
    logprob: float


class TokenChoice(BaseModel):
    """One generated token with its logprob and the top alternatives the server returned."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    token: str
    logprob: float
    alternatives: list[TokenAlternative] = Field(
        default_factory=list, description="The listed top tokens, likeliest first (may hold it)."
    )

    @property
    def top1(self) -> bool:
        """The chosen token was the likeliest listed (ties count as top-1)."""
        return all(self.logprob >= alt.logprob for alt in self.alternatives)


class ChoiceText(BaseModel):
    """A choice past the first of a request that asked for several (``n`` > 1)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    index: int = Field(description="Its index, as the server numbered it.")
    text: str = ""
    finish_reason: str | None = None


class RequestRecord(BaseModel):
    """What happened to one request. Times are ``time.perf_counter()`` seconds."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    request_id: str
    started_at: float
    first_token_at: float | None = None
    finished_at: float
    token_times: list[float] = Field(
        default_factory=list, description="Arrival time of each content-bearing chunk."
    )
    text: str = Field(default="", description="The whole generated text.")
    chunk_ends: list[int] = Field(
        default_factory=list,
        description="End offset in ``text`` of each content-bearing chunk, in order.",
    )
    completion_tokens: int | None = Field(default=None, description="usage.completion_tokens")
    prompt_tokens: int | None = Field(default=None, description="usage.prompt_tokens")
    cached_tokens: int | None = Field(
        default=None, description="usage.prompt_tokens_details.cached_tokens"
    )
    finish_reason: str | None = None
    choices: list[ChoiceText] = Field(
        default_factory=list,
        description="n > 1: every choice but index 0 (whose text is ``text``), by index.",
    )
    logprobs: list[float] | None = None
    top_logprobs: list[TokenChoice] | None = Field(
        default=None, description="Each token and its listed alternatives (asked with top-k > 0)."
    )
    streamed: bool = True
    error: RequestError | None = None
    reconnect: str | None = Field(
        default=None,
        description="Why the request was sent a second time, on a fresh connection: the first "
        "send provably never reached the server (a kept-alive connection it had closed).",
    )
    hung_up: bool = Field(
        default=False,
        description="The client hung up mid-stream on purpose (a client abort): the text is what "
        "came before; no finish_reason or usage is expected.",
    )

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def pieces(self) -> list[str]:
        """The text of each content-bearing chunk, derived from ``text`` and ``chunk_ends``."""
        return chunk_texts(self.text, self.chunk_ends)


def chunk_texts(text: str, chunk_ends: list[int]) -> list[str]:
    """Split ``text`` at the chunk end offsets (the one stored form of a streamed output)."""
    return [text[start:end] for start, end in zip([0, *chunk_ends], chunk_ends)]
