"""Parsing OpenAI-style request bodies into one normalised generation request.

Unknown fields are ignored, not rejected: real clients send many engine-specific options
(temperature, seed, stop, ...) and an OpenAI-compatible server must accept them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from batchprobe import _json

Api = Literal["completions", "chat"]
DEFAULT_MAX_TOKENS = 16
# Far above any real context window; keeps a typo from allocating a billion tokens.
MAX_TOKENS_LIMIT = 1 << 17
MAX_CHOICES = 8


class BadRequest(ValueError):
    """The body is not a valid request; ``param`` names the offending field."""

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(f"{param}: {message}")


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False


class _ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str = "text"


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore")
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_LIMIT)
    stream: bool = False
    stream_options: _StreamOptions | None = None
    cache_prompt: bool = True
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    logit_bias: dict[str, float] | None = None
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    response_format: _ResponseFormat | None = None
    grammar: str | None = None
    n: int = Field(default=1, ge=1, le=MAX_CHOICES)


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
class Sampling:
    """The parameters an engine must keep per row of its batch (the ``params`` trigger
    compares these between requests in flight; ``param_leak`` swaps them).

    A parameter not sent holds its neutral value (temperature 0, top_p 1), so a request
    that sends none equals one that sends them neutral: the fake's text stays deterministic
    for clients that send no sampling parameters, and omitting one is no difference in flight.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    constraint: Literal["json_schema", "grammar"] | None = None
    """A JSON schema (``response_format``) or a grammar (llama.cpp's ``grammar``) fixes the
    answer: the fake answers ``{"answer": "yes"}`` or ``yes``."""

    @property
    def sampled(self) -> bool:
        return self.temperature > 0

    def forced_token(self) -> int | None:
        """The token id a bias of at least ``FORCING_BIAS`` forces at every position."""
        strong = [(bias, -tid) for tid, bias in self.logit_bias if bias >= FORCING_BIAS]
        return -max(strong)[1] if strong else None


GREEDY = Sampling()
# A logit bias this strong outweighs any logit, as +100 does on llama.cpp and vLLM.
FORCING_BIAS = 50.0


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
    sampling: Sampling = GREEDY
    seed: int | None = None
    stop: tuple[str, ...] = ()
    n: int = 1
    """Choices asked for: every one past the first answered as the first is (greedy)."""

    @cached_property
    def prompt_tokens(self) -> int:
        """Whitespace words: a stable stand-in for a tokenizer (computed once: haystack
        prompts are long and several triggers compare lengths)."""
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


class _TokenizeBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    content: str


def parse_tokenize(raw: bytes) -> str:
    """The text of a llama.cpp-style ``POST /tokenize`` body ``{"content": str}``."""
    try:
        data = _json.loads(raw)
    except _json.JSONDecodeError as exc:
        raise BadRequest("body", f"not valid JSON ({exc})") from exc
    try:
        return _TokenizeBody.model_validate(data).content
    except ValidationError as exc:
        raise BadRequest("content", exc.errors()[0]["msg"]) from exc


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
        sampling=_sampling(body),
        seed=body.seed,
        stop=_stops(body),
        n=body.n,
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
        sampling=_sampling(body),
        seed=body.seed,
        stop=_stops(body),
        n=body.n,
    )


def _stops(body: _Common) -> tuple[str, ...]:
    stops = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    if any(not stop for stop in stops):
        raise BadRequest("stop", "stop strings must not be empty")
    return stops


def _sampling(body: _Common) -> Sampling:
    return Sampling(
        temperature=body.temperature or 0.0,
        top_p=1.0 if body.top_p is None else body.top_p,
        logit_bias=_logit_bias(body.logit_bias or {}),
        presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty,
        constraint=_constraint(body),
    )


def _constraint(body: _Common) -> Literal["json_schema", "grammar"] | None:
    if body.response_format is not None and body.response_format.type in (
        "json_schema", "json_object"
    ):
        return "json_schema"
    return "grammar" if body.grammar else None


def _logit_bias(raw: dict[str, float]) -> tuple[tuple[int, float], ...]:
    """OpenAI's ``{"<token id>": bias}``, sorted by id so equal biases compare equal."""
    pairs = []
    for key, bias in raw.items():
        if not key.isdigit():
            raise BadRequest("logit_bias", f"keys are token ids (digits), got {key!r}")
        if not -100.0 <= bias <= 100.0:
            raise BadRequest("logit_bias", f"bias for token {key} must be in [-100, 100]")
        pairs.append((int(key), bias))
    return tuple(sorted(pairs))


def _include_usage(body: _Common) -> bool:
    return body.stream_options is not None and body.stream_options.include_usage
