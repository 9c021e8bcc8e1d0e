"""A work item: one prompt for one session, the same in every arm, with its own checker.

The verdict file keeps every item as it was sent, so the judge needs nothing but the file."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from batchprobe import _json
from batchprobe.client.types import MAX_CHOICES, ChatMessage

Api = Literal["completions", "chat"]
Constraint = Literal["json_schema", "grammar"]
_CONSTRAINED = {"json_schema": "a JSON schema", "grammar": "a grammar"}


class SamplingParams(BaseModel):
    """Per-request parameters beyond greedy decoding (the ``params`` shape sets them)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings", frozen=True)

    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    stop: list[str] | None = None
    logit_bias: dict[str, float] | None = Field(
        default=None, description="token id -> bias, as the OpenAI API takes it"
    )
    bias_text: str | None = Field(
        default=None, description="What the biased token reads as: every generated token."
    )
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    constraint: Constraint | None = Field(
        default=None, description="Its output fixed by a JSON schema or a grammar (constraints)."
    )
    n: int | None = Field(
        default=None, ge=2, le=MAX_CHOICES, description="Choices asked for in one request."
    )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def penalised(self) -> bool:
        """Presence or frequency penalties: a count run with them is not determined (the
        params shape's are strong enough to break one)."""
        return bool(self.presence_penalty or self.frequency_penalty)

    def describe(self) -> str:
        """A short human label: 'greedy', 'temperature 0.9, top_p 0.9', 'logit bias ' kiwi''."""
        parts = [] if self.greedy else [f"temperature {self.temperature:g}"]
        if self.top_p is not None:
            parts.append(f"top_p {self.top_p:g}")
        if self.logit_bias:
            parts.append(f"logit bias toward {self.bias_text!r}")
        if self.stop:
            parts.append(f"stop {self.stop!r}")
        if self.presence_penalty is not None:
            parts.append(f"presence_penalty {self.presence_penalty:g}")
        if self.frequency_penalty is not None:
            parts.append(f"frequency_penalty {self.frequency_penalty:g}")
        if self.constraint is not None:
            parts.append(f"constrained by {_CONSTRAINED[self.constraint]} (answer: yes or no)")
        if self.n is not None:
            parts.append(f"n {self.n}")
        return ", ".join(parts) or "greedy"


class CountSpec(BaseModel):
    """A counting item's determined continuation: ``first, first+1, ...`` joined by ', '."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings", frozen=True)

    first: int
    leading_space: bool = Field(description="Completion prompts continue with ' N,'.")
    skip: int = Field(
        default=0, ge=0, description="Characters of the count the prompt already holds (a continuation)."
    )

    def ideal(self, numbers: int) -> str:
        text = ", ".join(str(n) for n in range(self.first, self.first + numbers)) + ","
        return (" " if self.leading_space else "") + text

    def continued(self, answer: str) -> CountSpec | None:
        """The count of a prompt that is this one's plus ``answer``; None when ``answer``
        broke the count (what follows is then not determined). Only a completions count
        (``leading_space``), whose text goes on exactly, is continued."""
        if not self.leading_space:
            return None
        done = self.skip + len(answer)
        if self.ideal(done // 2 + 2)[self.skip : done] != answer:
            return None
        return self.model_copy(update={"skip": done})


class Turn(BaseModel):
    """A conversation turn: its place in its conversation, and the turn it continues.

    A turn that continues another is built at send time from that turn as it was sent and
    answered in the same arm: its prompt (completions) or messages (chat), its answer, then
    this item's ``prompt`` as the next message (see ``workload.conversation``).
    """

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings", frozen=True)

    conversation: int = Field(description="The session of the conversation's first turn.")
    index: int = Field(ge=1, description="1 for the first turn.")
    continues: int | None = Field(default=None, description="The session of the turn before.")


class WorkItem(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings", frozen=True)

    workload: Literal["recall", "decode"]
    session: int = Field(ge=0, description="Unique across the run: a session id names one item.")
    prompt: str
    max_tokens: int = Field(ge=1)
    shape: str = "burst"
    api: Api | None = Field(default=None, description="None: the run's prompt style decides.")
    expected_code: str | None = None
    depth: float | None = Field(default=None, description="recall: needle position, 0 = top")
    count: CountSpec | None = Field(default=None, description="decode: the count it must follow")
    params: SamplingParams = Field(default_factory=SamplingParams)
    role: str | None = Field(
        default=None,
        description="Its part in its shape's wave (params: greedy, open, control, sampled, "
        "bias, stop, penalty; join: starter, joiner; ragged: short .. long); None: the only one.",
    )
    top_logprobs: int | None = Field(
        default=None,
        ge=1,
        le=20,
        description="Ask for this many top logprobs per token (only the rows whose judge "
        "reads them; every other request is what an ordinary client sends).",
    )
    turn: Turn | None = Field(default=None, description="conversation: where this turn stands")
    history: tuple[ChatMessage, ...] = Field(
        default=(), description="chat: the messages before ``prompt`` (a later conversation turn)"
    )

    def key(self) -> str:
        """Its key in the verdict's ``items``: a digest of the whole item as sent."""
        return hashlib.blake2b(self.model_dump_json().encode(), digest_size=10).hexdigest()

    def digest(self) -> str:
        """A digest of what is sent: the prompt and the messages before it."""
        sent = [[m.role, m.content] for m in self.history] + [self.prompt]
        return hashlib.blake2b(_json.dumps(sent), digest_size=12).hexdigest()


class Planted(BaseModel):
    """Every needle and every count window planted on the run (every item built, sent or
    not): an answer is scored against all of them, so cross-talk from any names its source."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    codes: dict[int, str] = Field(default_factory=dict, description="session -> its needle code")
    windows: dict[int, tuple[int, int]] = Field(
        default_factory=dict,
        description="count key (a conversation's first session) -> [first, stop) of its numbers",
    )


class Sending(BaseModel):
    """How the run turned an item into a request body, beyond the item itself (a replay
    sends the very bodies the run sent)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    extra_body: dict[str, JsonValue] = Field(
        default_factory=dict, description="Merged into every cold request (llama.cpp: cache_prompt false)."
    )
    logprobs: int | None = Field(default=None, description="Top logprobs every request asked for.")
    reference_logprobs: int | None = Field(
        default=None, description="Top logprobs every serial request asked for."
    )
    request_seed: int | None = None
