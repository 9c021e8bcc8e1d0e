"""What a shape builds: its items and how its wave sends them."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

from batchprobe.results.items import Api, WorkItem
from batchprobe.workload.needle import CODE_ALPHABET, CODE_LENGTH


@dataclass(frozen=True)
class AfterTokens:
    """Send once each of ``sessions`` (first sends) has streamed ``tokens`` chunks, or ended."""

    sessions: tuple[int, ...]
    tokens: int


@dataclass(frozen=True)
class AfterFinish:
    """Send once ``session``'s first send has finished."""

    session: int


@dataclass(frozen=True)
class AfterStart:
    """Send once ``session``'s first send is on the wire (its body written to the connection;
    or once it ended, where it failed before that)."""

    session: int


Trigger = AfterTokens | AfterFinish | AfterStart


@dataclass(frozen=True)
class HangUp:
    """The client hangs up the stream (a client abort) once it has streamed ``tokens``
    chunks and, when ``beside`` is set, that session's first send is on the wire or another
    request of the wave on the wire waits for its first token (or, where the wave holds every
    slot and none comes, once it has streamed ``latest``); ``settle_s`` after, so that the
    other request reached the server."""

    tokens: int = 1
    beside: int | None = None
    latest: int = 16
    settle_s: float = 0.002


@dataclass(frozen=True)
class Send:
    """One request of a wave. ``phase``: phases run one after the other inside the wave;
    ``delay_s``: how long after its trigger it goes out; ``hang_up``: when its client drops it."""

    item: WorkItem
    copy_index: int = 0
    after: Trigger | None = None
    phase: int = 0
    delay_s: float = 0.0
    hang_up: HangUp | None = None


@dataclass
class ShapePlan:
    """A shape's items (each sent once by the serial arm) and its concurrent wave."""

    shape: str
    items: list[WorkItem]
    sends: list[Send]
    prefix_cache: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def sessions(self) -> list[int]:
        return [i.session for i in self.items]


@dataclass(frozen=True)
class BiasToken:
    """A word the server's tokenizer reads as exactly one token."""

    text: str
    token_id: int


@dataclass
class ShapeContext:
    """What every shape builds from: the run's settings and what the server told us."""

    run_id: str
    seed: int
    sessions: int
    haystack_tokens: int
    max_tokens: int
    recall_max_tokens: int
    prompt_style: str
    chars_per_token: float
    both_paths: bool = False
    """The other request path answered a 1-token generation: every other item takes it."""
    bias_tokens: list[BiasToken] = field(default_factory=list)
    top_logprobs: bool = True
    """The server answers a request asking for top logprobs (params' open rows ask)."""
    logprobs_returned: bool = False
    """And some came back: each greedy row checks its own top-1 without a reference."""
    tokens_per_number: float = 6.0
    constraints: tuple[tuple[str, Api], ...] = ()
    """The constraints the server honours (json_schema, grammar), each with the request path
    that honours it: params sends a row of each over it."""
    choices: bool = False
    """The server answers a request for ``params.CHOICES`` choices with them all: params
    asks for them on its sampled row and on a greedy count row."""
    sliding_window: int | None = None
    context_tokens: int | None = None
    depth: int | None = None
    """A sweep step's depth (requests its wave keeps in flight); None outside a sweep."""
    next_session: int = 0
    _codes: set[str] = field(default_factory=set)

    def rng(self, shape: str) -> random.Random:
        return random.Random(f"{self.seed}:{self.run_id}:{shape}")

    def take_sessions(self, count: int) -> list[int]:
        """The next ``count`` session ids: unique across the run, so an id names one item."""
        first = self.next_session
        self.next_session += count
        return list(range(first, first + count))

    def new_codes(self, rng: random.Random, count: int) -> list[str]:
        """Needle codes no other item of the run has."""
        codes: list[str] = []
        while len(codes) < count:
            code = rng.choice("123456789") + "".join(
                rng.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH - 1)
            )
            if code not in self._codes:
                self._codes.add(code)
                codes.append(code)
        return codes

    @property
    def default_api(self) -> Api:
        return "chat" if self.prompt_style == "chat" else "completions"

    def step_path(self) -> Api:
        """A sweep step's path for a role it sends once: the paths take turns from one step
        to the next (1, 2, 4, 8, ...), so a sweep covers both without sending both at every
        depth."""
        return self.api_for((self.depth or 0).bit_length())

    def api_for(self, index: int) -> Api:
        """Both request paths when the server serves both: every other item takes the other."""
        if not self.both_paths or index % 2 == 0:
            return self.default_api
        return "completions" if self.default_api == "chat" else "chat"


class Shape(Protocol):
    """A traffic shape: one module each, registered in ``batchprobe.workload.shapes``."""

    name: str
    sends: str
    checks: str
    needs_streaming: bool

    def unavailable(self, ctx: ShapeContext) -> str | None:
        """Why this shape cannot run here, or None."""
        ...

    def build(self, ctx: ShapeContext) -> ShapePlan: ...
