"""One wave's bookkeeping: who is in flight, how far each has streamed, who waits for whom.

``send.waves`` sends the requests; this module only answers its questions (is a trigger met,
who waits for a first token, who left while another streamed) and wakes the sends waiting on
a trigger.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from batchprobe.results.shapes import MAX_DEPARTURES, Departure
from batchprobe.send.load import InFlight
from batchprobe.workload.shapes import AfterFinish, AfterStart, AfterTokens, HangUp, Trigger


@dataclass
class Live:
    session: int
    copy_index: int
    choices: int = 1
    """What it counts in the client's requests in flight: a server runs each choice apart."""
    tokens: int = 0
    sent: bool = False
    """Its body was written to the connection (it may be at the server)."""
    done: bool = False
    departures: list[Departure] = field(default_factory=list)
    more_departures: int = 0
    waiting_at_hang_up: list[int] | None = None
    cut: tuple[int, asyncio.Event] | None = None
    """A hang-up due at this many chunks with nothing else to wait for: set from ``progress``
    itself, so the client stops before its next read (a short reply may be whole by then)."""


@dataclass(frozen=True)
class Waiting:
    """Met while a request of the wave other than ``session``'s waits for its first token."""

    session: int


@dataclass
class _Waiter:
    trigger: Trigger | Waiting
    ready: asyncio.Future[None]


class Wave:
    """Who is in flight, how far each has streamed, and who waits for whom."""

    def __init__(self, flight: InFlight | None = None) -> None:
        self.flight = flight or InFlight()
        self.live: dict[tuple[int, int], Live] = {}
        self.first: dict[int, Live] = {}
        self.waiters: list[_Waiter] = []
        self.moved_at = time.perf_counter()
        """When a stream of this wave last received a token."""
        self.alive_at = 0.0
        """When a liveness check last found the server generating."""
        self.checking = asyncio.Lock()

    def _waiting(self, session: int) -> list[int]:
        """Requests of the wave on the wire, not done and with no token yet, but ``session``'s."""
        return sorted(s.session for s in self.live.values()
                      if s.session != session and s.sent and not s.done and not s.tokens)

    def _met(self, trigger: Trigger | Waiting) -> bool:
        if isinstance(trigger, Waiting):
            return bool(self._waiting(trigger.session))
        if isinstance(trigger, AfterStart):
            state = self.first.get(trigger.session)
            return state is not None and (state.sent or state.done)
        if isinstance(trigger, AfterFinish):
            state = self.first.get(trigger.session)
            return state is not None and state.done
        states = [self.first.get(s) for s in trigger.sessions]
        return all(s is not None and (s.done or s.tokens >= trigger.tokens) for s in states)

    def _wake(self) -> None:
        for waiter in list(self.waiters):
            if self._met(waiter.trigger) and not waiter.ready.done():
                waiter.ready.set_result(None)
                self.waiters.remove(waiter)

    async def wait(self, trigger: Trigger | Waiting | None) -> None:
        if trigger is None or self._met(trigger):
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(trigger, ready)
        self.waiters.append(waiter)
        try:
            await ready
        finally:
            if waiter in self.waiters:
                self.waiters.remove(waiter)

    def arrive(self, session: int, copy_index: int, choices: int = 1) -> tuple[Live, int, int]:
        """Register a request (of ``choices``); (its state, others in flight, of those
        already decoding)."""
        others = [s for s in self.live.values() if not s.done]
        state = Live(session, copy_index, choices)
        self.live[(session, copy_index)] = state
        self.flight.n += choices
        if copy_index == 0:
            self.first[session] = state
        if self.waiters:
            self._wake()
        return state, len(others), sum(1 for s in others if s.tokens > 0)

    async def hang_up(self, state: Live, when: HangUp, event: asyncio.Event) -> None:
        """Set ``event`` (the client hangs up ``state``'s stream) once ``when`` is met, and
        record who of the wave still waited for a first token at that moment."""
        me = state.session
        if when.beside is None:
            state.cut = (when.tokens, event)
            self._cut(state)
            return
        await self.wait(AfterTokens((me,), when.tokens))
        # Until the long prompt is on the wire or another request waits for its first token
        # (a slot freed), or, the wave holding every slot, ``latest`` chunks in.
        triggers: list[Trigger | Waiting] = [
            AfterStart(when.beside), Waiting(me), AfterTokens((me,), when.latest)]
        waits = [asyncio.ensure_future(self.wait(t)) for t in triggers]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if when.beside in self.first:
            # It holds a slot, so it is on its way to the wire: ``latest`` is for a long
            # prompt that has none, not for one a busy client worker process relays late.
            await self.wait(AfterStart(when.beside))
        if self._waiting(me):
            await asyncio.sleep(when.settle_s)  # its request on the wire, at the server
        self._hang_up_now(state, event)

    def _hang_up_now(self, state: Live, event: asyncio.Event) -> None:
        if state.done:
            return
        state.waiting_at_hang_up = self._waiting(state.session)
        event.set()

    def _cut(self, state: Live) -> None:
        if state.cut is not None and state.tokens >= state.cut[0]:
            self._hang_up_now(state, state.cut[1])
            state.cut = None

    def progress(self, state: Live, tokens: int) -> None:
        """``state``'s request is on the wire (``tokens`` 0, its first call) or has read a
        reply with ``tokens`` chunks in it."""
        if tokens or state.sent:
            self.moved_at = time.perf_counter()
        state.tokens = tokens
        state.sent = True
        self._cut(state)
        if self.waiters:
            self._wake()

    def leave(self, state: Live) -> None:
        state.done = True
        self.flight.n -= state.choices
        survivors = [s for s in self.live.values() if not s.done]
        for other in survivors:
            if len(other.departures) >= MAX_DEPARTURES:
                other.more_departures += 1
                continue
            other.departures.append(
                Departure(session=state.session, at_token=other.tokens, in_flight=len(survivors))
            )
        self._wake()
