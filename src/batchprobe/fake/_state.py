"""Per-app mutable state: slots, the requests in flight and their situation, the prompt
cache, the stop signal.

One instance lives on each ``web.Application`` (never at module level), so several fake
servers can run side by side in one process. Every event (arrival, token, departure) costs
O(1), or O(requests in flight) only where a configured trigger needs to look at them all.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from aiohttp import web

from batchprobe.fake import _triggers
from batchprobe.fake._config import ABORT_FAULTS, CROWD, WARMUP_PREFIX, FakeServerConfig
from batchprobe.fake._model import checkable
from batchprobe.fake._pool import KvPool, PoolCut
from batchprobe.fake._requests import GenRequest, Sampling
from batchprobe.fake._tokens import Vocabulary
from batchprobe.fake._turns import TurnMemory

StopReason = Literal["requested", "exit_after"]
# The run id a batchprobe prompt opens with ("[run 3f2a9c1e session 4] ..."), where a
# replay may put a fresh nonce.
RUN_ID = re.compile(r"\[run (\S+) session ")
# Requests a busy period remembers at most (repeat and cross_talk look back over it).
PERIOD_LIMIT = 8192
# Prompts wrong_resend remembers over the server's life (16 bytes each); then it starts over.
SENT_LIMIT = 1 << 20
_Key = TypeVar("_Key", bound=Hashable)


@dataclass(eq=False)
class Flight:
    """A request in flight (queued or generating) and what the triggers need of its story.

    ``*_tick`` fields order events on one counter (arrivals and first tokens), so "was it
    already decoding when this one arrived" never depends on clock resolution.
    """

    seq: int
    gen: GenRequest
    code: str | None
    arrival_tick: int
    crowded_at_arrival: bool
    load_at_arrival: int
    """Requests in flight when it arrived, itself included (the ``above`` trigger)."""
    joined_decoding: bool
    """Another request in flight had streamed a token when this one arrived."""
    planned: int
    """Tokens it will generate: its healthy answer's length, then its actual answer's."""
    generated: int = 0
    first_tick: int | None = None
    fault_from: int | None = None
    """The ``early`` trigger: its tokens from this index on are faulted."""
    departed: bool = False
    lengths_at_arrival: tuple[int, ...] = ()
    """The ragged trigger: shortest and longest prompt in flight when it arrived."""
    holds_slot: bool = False
    finished: bool = False
    """Its reply is complete but for its last bytes (see ``ServerState.finish``)."""
    resent: bool = False
    """wrong_resend: the server received this prompt before, in its lifetime."""
    sending: int = 1
    """``fault_every``: the how-many-th time its prompt came (its run id aside)."""
    hung_up: bool = False
    """Its client closed the connection before the reply's end."""
    connection: asyncio.BaseTransport | None = None
    pool_cut: tuple[int, PoolCut] | None = None
    """A pool fault cut its reply at this token: ended with an error, or repeating."""


class ServerState:
    def __init__(self, config: FakeServerConfig) -> None:
        self.config = config
        # Continuous batching admits up to batch_cap generators; serial admits one.
        cap = config.batch_cap if config.batching == "continuous" else 1
        self._slots = asyncio.Semaphore(cap)
        self.pool = KvPool(config.kv_tokens, config.fault) if config.kv_tokens else None
        self.active = 0
        # What /metrics and the above trigger count: requests not finished (see finish),
        # and those of them holding a slot.
        self._unfinished = 0
        self._running = 0
        self._inflight: dict[int, Flight] = {}
        # The busy period: every request since the server was last idle, in arrival order.
        self._period: list[Flight] = []
        self._sendings: Counter[bytes] = Counter()
        """How often each prompt came, its run id aside (``fault_every``)."""
        # The same requests filed by their prompt's head (see _triggers.HEAD).
        self._period_heads: dict[str, list[Flight]] = {}
        self._next_seq = 0
        self._ticks = 0
        self._decoding = 0  # requests in flight that have streamed a token
        # What the ragged and params triggers compare, counted over the requests in flight
        # so each check is a look-up, not a scan of a thousand streams.
        self._lengths: Counter[int] = Counter()
        self._samplings: Counter[Sampling] = Counter()
        self._cache: set[bytes] = set()
        self._sent: set[bytes] = set()
        self.flipped = False
        """flip_once: the one wrong answer of the server's life was given."""
        self.vocab = Vocabulary()
        self.turns = TurnMemory()  # the conversation bug modes' cache (fake._turns)
        self.answered = 0
        self.stalled = False  # the stall fault: no generation request is answered any more
        self.wedged = False  # abort_wedge: not even the requests in flight generate
        self.dropped: Flight | None = None
        """abort_leak: the last request of the busy period whose client hung up."""
        self.requests: Counter[str] = Counter()
        """Generation requests received, by path (``completions``, ``chat``), served or not."""
        self.stop_event = asyncio.Event()
        self.stop_reason: StopReason | None = None

    @property
    def total_slots(self) -> int:
        return self.config.batch_cap if self.config.batching == "continuous" else 1

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    @property
    def running(self) -> int:
        """Requests holding a generation slot, not finished."""
        return self._running

    @property
    def waiting(self) -> int:
        """Requests received, not finished, without a slot."""
        return self._unfinished - self._running

    @contextlib.contextmanager
    def track(
        self, gen: GenRequest, code: str | None, planned: int,
        connection: asyncio.BaseTransport | None = None,
    ) -> Iterator[Flight]:
        """Count a request as in flight (queued or generating) for the duration; leaving is
        its departure from the batch, however the reply ended. ``connection``: its client's,
        whose close (a hang-up) takes it out of the load a later arrival sees."""
        self._notice_hang_ups()
        self._unfinished += 1
        hung_up = self._hung_up_unfinished()
        flight = Flight(
            seq=self._next_seq,
            gen=gen,
            code=code,
            arrival_tick=self._tick(),
            crowded_at_arrival=bool(self._inflight),
            load_at_arrival=self._unfinished - hung_up,
            connection=connection,
            joined_decoding=self._decoding > 0,
            planned=planned,
        )
        if self.config.fault_when == "ragged" and self._lengths:
            flight.lengths_at_arrival = (min(self._lengths), max(self._lengths))
        if self.config.fault == "wrong_resend":
            flight.resent = self._seen_before(gen.prompt)
        if self.config.fault_every > 1:
            flight.sending = self._sending(gen.prompt)
        self._next_seq += 1
        self._inflight[flight.seq] = flight
        self._remember(flight)
        self._lengths[gen.prompt_tokens] += 1
        self._samplings[gen.sampling] += 1
        try:
            yield flight
        finally:
            self.finish(flight)
            self._depart(flight)
            del self._inflight[flight.seq]
            _discount(self._lengths, gen.prompt_tokens)
            _discount(self._samplings, gen.sampling)
            if flight.first_tick is not None:
                self._decoding -= 1
            if not self._inflight:
                self._period.clear()
                self._period_heads.clear()
                self.dropped = None

    def _notice_hang_ups(self) -> None:
        """Take the hang-ups a next arrival finds as gone before it: a closed connection is
        otherwise noticed at the next write, after a retry sent a few ms later may arrive."""
        for f in list(self._inflight.values()):
            if not f.finished and f.connection is not None and f.connection.is_closing():
                self.client_gone(f)

    def _hung_up_unfinished(self) -> int:
        """Requests in flight, not finished, whose client has closed its connection: the
        server has not written to it since, but no client waits for them any more."""
        return sum(
            1 for f in self._inflight.values()
            if not f.finished and f.connection is not None and f.connection.is_closing()
        )

    def note_token(self, flight: Flight) -> None:
        """``flight`` generated one more token; its last one is its departure."""
        flight.generated += 1
        if self.pool is not None and self.pool.optimistic:
            # Only a pool fault's optimistic pool grows per token (healthy: reserved whole).
            running = [f.seq for f in self._inflight.values() if f.holds_slot and not f.finished]
            for seq, cut in self.pool.grow(flight.seq, running).items():
                victim = self._inflight[seq]
                if victim.pool_cut is None:
                    victim.pool_cut = (victim.generated, cut)
        if flight.first_tick is None:
            flight.first_tick = self._tick()
            self._decoding += 1
        if flight.generated >= flight.planned:
            self._depart(flight)

    def finish(self, flight: Flight) -> None:
        """``flight`` stops counting as in flight (for /metrics and the above trigger): once,
        before its reply's last bytes are written, and at the latest when it leaves
        ``track``. A client that sends its next request on reading a reply's end must find
        that reply no longer counted."""
        if flight.finished:
            return
        flight.finished = True
        self._unfinished -= 1
        if flight.holds_slot:
            self._running -= 1

    @contextlib.asynccontextmanager
    async def slot(self, flight: Flight) -> AsyncIterator[None]:
        """Wait for room in the KV pool (when there is one), then for a generation slot;
        ``active`` counts the requests holding one, and ``running`` those of them not
        finished."""
        async with self._admitted(flight), self._slots:
            self.active += 1
            flight.holds_slot = True
            if not flight.finished:
                self._running += 1
            try:
                yield
            finally:
                self.active -= 1
                flight.holds_slot = False
                if not flight.finished:
                    self._running -= 1

    def _admitted(self, flight: Flight) -> contextlib.AbstractAsyncContextManager[None]:
        if self.pool is None:
            return contextlib.nullcontext()
        gen = flight.gen
        return self.pool.admit(flight.seq, gen.prompt_tokens, gen.prompt_tokens + flight.planned)

    def step_s(self) -> float:
        """Seconds per token for each generating request, given how many generate now."""
        itl = self.config.itl_ms / 1000.0
        if self.config.batching == "serial":
            return itl
        after = self.config.degrade_after
        slowdown = 1.0 if after is not None and self._next_seq > after else self.config.slowdown
        return itl * (1.0 + slowdown * (self.active - 1))

    def fault_applies(self, flight: Flight) -> bool:
        """Whether the configured fault hits ``flight`` from its first token on.

        ``concurrent`` means it has shared the server with another request at some point:
        one was in flight when it arrived, or one arrived after it (it is still in flight).
        Checking only "now" would spare the last request of a burst whose peers finished.
        ``early`` never applies here: it strikes later, at a departure (``_depart``).
        """
        config = self.config
        if config.fault == "none":
            return False
        if config.fault in ABORT_FAULTS:
            if config.fault != "abort_leak":
                return False
            # A client that closed before this first token is due has dropped its request,
            # whether or not the server has written to it since (a loaded loop writes late).
            self._notice_hang_ups()
            dropped = self.dropped
            return dropped is not None and flight.seq > dropped.seq
        if config.fault == "wrong_resend" and not flight.resent:
            return False
        if config.fault == "flip_once" and (self.flipped or not checkable(flight.gen, flight.code)):
            return False
        if flight.sending % config.fault_every:
            return False
        return self._when(flight)

    def _when(self, flight: Flight) -> bool:
        """Whether ``flight`` is in the situation ``fault_when`` names."""
        config = self.config
        when = config.fault_when
        if when == "always":
            return True
        if when == "concurrent":
            return flight.crowded_at_arrival or self._next_seq > flight.seq + 1
        if when == "above":
            # Decided by its arrival alone: a client keeping at most fault_above requests
            # in flight never sets it off (a reply stops counting before its last bytes).
            return flight.load_at_arrival > config.fault_above
        if when == "join":
            joined = flight.joined_decoding
            return joined and not _triggers.repeated(flight.gen, self._peers(flight))
        if when == "ragged":
            # Those in flight at its arrival count too: a short one may have left before a
            # long one's prefill is done, and which does depends on arrival jitter.
            return _triggers.ragged([*self._lengths, *flight.lengths_at_arrival])
        if when == "repeat":
            return _triggers.repeated(flight.gen, self._peers(flight))
        if when == "params":
            # Another in flight has other parameters: not all in flight share its own.
            return self._samplings[flight.gen.sampling] < len(self._inflight)
        if when == "warmup":
            return flight.gen.prompt.startswith(WARMUP_PREFIX)
        if when == "crowd":
            return len(self._inflight) >= CROWD and _triggers.ragged(self._lengths)
        return False

    def beside(self, flight: Flight) -> list[Flight]:
        """The other requests in flight now (stop_shared runs ``flight`` with their stops)."""
        return [f for f in self._inflight.values() if f is not flight]

    def partner(self, flight: Flight, fits: Callable[[Flight], bool]) -> Flight | None:
        """Another request of the busy period that ``fits``: the next by arrival, wrapping.

        The busy period, not only those in flight now, so the last request of a burst still
        finds a peer after its peers have finished (cross_talk, param_leak).
        """
        period = self._period
        start = bisect.bisect_left(period, flight.seq, key=lambda f: f.seq)
        for offset in range(1, len(period)):
            other = period[(start + offset) % len(period)]
            if fits(other):
                return other
        return None

    def cache_hit(self, prompt: str, *, use_cache: bool) -> bool:
        """Prefix-cache simulation: True when this exact prompt was cached before."""
        if not (self.config.prefix_cache and use_cache):
            return False
        key = hashlib.blake2b(prompt.encode(), digest_size=16).digest()
        if key in self._cache:
            return True
        self._cache.add(key)
        return False

    def _sending(self, prompt: str) -> int:
        """Count ``prompt`` (its run id aside: a replay may put a fresh nonce there); the
        how-many-th time it came."""
        key = hashlib.blake2b(RUN_ID.sub("[run session ", prompt).encode(), digest_size=16)
        if len(self._sendings) >= SENT_LIMIT:
            self._sendings.clear()
        self._sendings[key.digest()] += 1
        return self._sendings[key.digest()]

    def _seen_before(self, prompt: str) -> bool:
        """Remember ``prompt``; True when the server had received it before."""
        key = hashlib.blake2b(prompt.encode(), digest_size=16).digest()
        if key in self._sent:
            return True
        if len(self._sent) >= SENT_LIMIT:
            self._sent.clear()
        self._sent.add(key)
        return False

    def client_gone(self, flight: Flight) -> None:
        """``flight``'s client hung up mid-reply: what the abort faults do about it (once)."""
        if flight.hung_up:
            return
        flight.hung_up = True
        fault = self.config.fault
        if fault == "abort_leak":
            self.dropped = flight
        elif fault == "abort_wedge" and any(
            f.first_tick is None
            for f in self._inflight.values() if f is not flight
        ):
            # The drop came during another's prefill: nothing generates any more.
            self.stalled = self.wedged = True

    def note_answered(self) -> None:
        """Count one answered generation request; stop the server when exit_after says so."""
        self.answered += 1
        if self.config.fault == "stall" and self.answered >= (self.config.exit_after or 0):
            self.stalled = True
        limit = self.config.exit_after
        if self.config.fault == "exit_after" and limit is not None and self.answered >= limit:
            self.request_stop("exit_after")

    def request_stop(self, reason: StopReason) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stop_event.set()

    def _remember(self, flight: Flight) -> None:
        """Add ``flight`` to the busy period. A server never idle would grow it forever:
        past ``PERIOD_LIMIT`` the older half is forgotten, except requests still in flight
        (amortised O(1) per arrival)."""
        period = self._period
        if len(period) >= PERIOD_LIMIT:
            recent = period[len(period) // 2 :]
            older = [f for f in period[: len(period) // 2] if f.seq in self._inflight]
            period[:] = older + recent
            self._period_heads.clear()
            for kept in period:
                self._file_head(kept)
        period.append(flight)
        self._file_head(flight)

    def _file_head(self, flight: Flight) -> None:
        self._period_heads.setdefault(flight.gen.prompt[: _triggers.HEAD], []).append(flight)

    def _tick(self) -> int:
        self._ticks += 1
        return self._ticks

    def _peers(self, flight: Flight) -> Sequence[GenRequest]:
        """The other requests of the busy period (finished, in flight, arrived later) that
        ``flight``'s prompt could repeat: those under its head, unless it is short."""
        prompt = flight.gen.prompt
        if _triggers.prefix_needed(prompt) >= _triggers.HEAD:
            candidates = self._period_heads.get(prompt[: _triggers.HEAD], [])
        else:
            candidates = self._period
        return [f.gen for f in candidates if f is not flight]

    def _depart(self, flight: Flight) -> None:
        """``flight`` left the batch (its last token, or its reply ended otherwise): once,
        mark the early trigger's victims among those still decoding."""
        if flight.departed:
            return
        flight.departed = True
        if self.config.fault_when != "early" or self.config.fault == "none":
            return
        for other in self._inflight.values():
            # Queued or in prefill counts too: which step a request is at when another
            # leaves depends on arrival jitter, which a trigger must not.
            if other is flight or other.fault_from is not None:
                continue
            if _triggers.left_early(
                generated=flight.generated,
                first_tick=flight.first_tick,
                survivor_planned=other.planned,
                survivor_generated=other.generated,
                survivor_arrival_tick=other.arrival_tick,
            ):
                other.fault_from = other.generated


def _discount(counter: Counter[_Key], key: _Key) -> None:
    counter[key] -= 1
    if not counter[key]:
        del counter[key]


STATE_KEY = web.AppKey("batchprobe_fake_state", ServerState)
