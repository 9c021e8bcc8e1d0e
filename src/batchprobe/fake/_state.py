"""Per-app mutable state: slots, requests in flight, the prompt cache, the stop signal.

One instance lives on each ``web.Application`` (never at module level), so several fake
servers can run side by side in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Literal

from aiohttp import web

from batchprobe.fake._config import FakeServerConfig

StopReason = Literal["requested", "exit_after"]


@dataclass(frozen=True)
class Flight:
    """A request in flight: its arrival number, the needle code it carries, if any, and
    whether another request was already in flight when it arrived. ``neighbours`` holds the
    codes of the requests it overlapped (kept only for the cross_talk fault)."""

    seq: int
    code: str | None
    crowded_at_arrival: bool
    neighbours: dict[int, str] = field(default_factory=dict)


class ServerState:
    def __init__(self, config: FakeServerConfig) -> None:
        self.config = config
        # Continuous batching admits up to batch_cap generators; serial admits one.
        cap = config.batch_cap if config.batching == "continuous" else 1
        self._slots = asyncio.Semaphore(cap)
        self.active = 0
        self._inflight: dict[int, Flight] = {}
        self._next_seq = 0
        self._cache: set[bytes] = set()
        self.answered = 0
        self.stop_event = asyncio.Event()
        self.stop_reason: StopReason | None = None

    @property
    def total_slots(self) -> int:
        return self.config.batch_cap if self.config.batching == "continuous" else 1

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    @contextlib.contextmanager
    def track(self, code: str | None) -> Iterator[Flight]:
        """Count a request as in flight (queued or generating) for the duration."""
        flight = Flight(self._next_seq, code, crowded_at_arrival=bool(self._inflight))
        self._next_seq += 1
        if self.config.fault == "cross_talk":
            self._meet(flight)
        self._inflight[flight.seq] = flight
        try:
            yield flight
        finally:
            del self._inflight[flight.seq]

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait for a generation slot; ``active`` counts the requests holding one."""
        async with self._slots:
            self.active += 1
            try:
                yield
            finally:
                self.active -= 1

    def step_s(self) -> float:
        """Seconds per token for each generating request, given how many generate now."""
        itl = self.config.itl_ms / 1000.0
        if self.config.batching == "serial":
            return itl
        return itl * (1.0 + self.config.slowdown * (self.active - 1))

    def fault_applies(self, flight: Flight) -> bool:
        """Whether the configured fault hits ``flight``.

        ``concurrent`` means it has shared the server with another request at some point:
        one was in flight when it arrived, or one arrived after it (it is still in flight).
        Checking only "now" would spare the last request of a burst whose peers finished.
        """
        if self.config.fault == "none":
            return False
        if self.config.fault_when == "always":
            return True
        return flight.crowded_at_arrival or self._next_seq > flight.seq + 1

    def _meet(self, flight: Flight) -> None:
        """Record that ``flight`` and every request in flight now overlap."""
        for other in self._inflight.values():
            if other.code is not None:
                flight.neighbours[other.seq] = other.code
            if flight.code is not None:
                other.neighbours[flight.seq] = flight.code

    def other_code(self, flight: Flight) -> str | None:
        """The code of a request that overlapped ``flight``: the next by arrival, wrapping.

        Overlap is remembered from arrival on, so the last request of a burst still leaks a
        peer's code after that peer has finished.
        """
        if not flight.neighbours:
            return None
        later = [seq for seq in flight.neighbours if seq > flight.seq]
        return flight.neighbours[min(later) if later else min(flight.neighbours)]

    def cache_hit(self, prompt: str, *, use_cache: bool) -> bool:
        """Prefix-cache simulation: True when this exact prompt was cached before."""
        if not (self.config.prefix_cache and use_cache):
            return False
        key = hashlib.blake2b(prompt.encode(), digest_size=16).digest()
        if key in self._cache:
            return True
        self._cache.add(key)
        return False

    def note_answered(self) -> None:
        """Count one answered generation request; stop the server when exit_after says so."""
        self.answered += 1
        limit = self.config.exit_after
        if self.config.fault == "exit_after" and limit is not None and self.answered >= limit:
            self.request_stop("exit_after")

    def request_stop(self, reason: StopReason) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stop_event.set()


STATE_KEY = web.AppKey("batchprobe_fake_state", ServerState)
