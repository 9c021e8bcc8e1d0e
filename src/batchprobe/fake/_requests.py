"""Parsing OpenAI-style request bodies into one normalised generation request.

Unknown fields are ignored, not rejected: real clients send many engine-specific options
(temperature, seed, stop, ...) and an OpenAI-compatible server must accept them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from batchprobe import _json

Api = Literal["completions", "chat"]
DEFAULT_MAX_TOKENS = 16
# Far above any real context window; keeps a typo from allocating a billion tokens.
MAX_TOKENS_LIMIT = 1 << 17


class BadRequest(ValueError):
    """The body is not a valid request; ``param`` names the offending field."""

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(f"{param}: {message}")


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore")
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)
    stream: bool = False
    stream_options: _StreamOptions | None = None
    cache_prompt: bool = True


class _CompletionBody(_Common):
    prompt: str | list[str]
    logprobs: int | None = Field(default=None, ge=0)


class _TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str = "text"
    text: str = ""


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str
    content: str | list[_TextPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if part.type == "text")


class _ChatBody(_Common):
    messages: list[_Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0)


@dataclass(frozen=True)
class GenRequest:
    """One generation request, the same shape for both APIs."""

    api: Api
    prompt: str
    max_tokens: int
    stream: bool
    include_usage: bool
    logprobs: bool
    top_logprobs: int
    cache_prompt: bool

    @property
    def prompt_tokens(self) -> int:
        """Whitespace words: a stable stand-in for a tokenizer."""
        return len(self.prompt.split())


def parse(api: Api, raw: bytes) -> GenRequest:
    """Validate ``raw`` as a request for ``api``; raise :class:`BadRequest` naming the field."""
    try:
        data = _json.loads(raw)
    except _json.JSONDecodeError as exc:
        raise BadRequest("body", f"not valid JSON ({exc})") from exc
    try:
        if api == "completions":
            return _from_completion(_CompletionBody.model_validate(data))
        return _from_chat(_ChatBody.model_validate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"]) or "body"
        raise BadRequest(param, first["msg"]) from exc


def _from_completion(body: _CompletionBody) -> GenRequest:
    prompt = body.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise BadRequest("prompt", "the fake server takes one prompt per request")
        prompt = prompt[0]
    return GenRequest(
        api="completions",
        prompt=prompt,
        max_tokens=body.max_tokens or DEFAULT_MAX_TOKENS,
        stream=body.stream,
        include_usage=_include_usage(body),
        logprobs=body.logprobs is not None,
        top_logprobs=body.logprobs or 0,
        cache_prompt=body.cache_prompt,
    )


def _from_chat(body: _ChatBody) -> GenRequest:
    return GenRequest(
        api="chat",
        prompt="\n".join(message.text() for message in body.messages),
        max_tokens=body.max_completion_tokens or body.max_tokens or DEFAULT_MAX_TOKENS,
        stream=body.stream,
        include_usage=_include_usage(body),
        logprobs=body.logprobs,
        top_logprobs=body.top_logprobs or 0,
        cache_prompt=body.cache_prompt,
    )


def _include_usage(body: _Common) -> bool:
    return body.stream_options is not None and body.stream_options.include_usage
