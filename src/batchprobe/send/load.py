"""Evidence that the server really batched: what it says it runs, and the engine's memory.

While a sweep step runs, a sampler asks the server every ``interval`` seconds how many
requests it is running and how many wait: Prometheus gauges on ``/metrics`` (llama.cpp with
``--metrics``, vLLM, SGLang), else llama.cpp's ``/slots``. It has its own connection pool,
so it never takes a connection from the measured requests. For a managed engine it also
samples the resident memory of the engine's process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from pydantic import JsonValue
from typing_extensions import Self

from batchprobe.client import OpenAIClient, Timeouts
from batchprobe.errors import EngineError
from batchprobe.processes import group_rss_bytes
from batchprobe.results.arms import CapacityCheck
from batchprobe.results.sweep import ServerLoad

# (what to call the source, the running gauge, the waiting gauge)
GAUGES: tuple[tuple[str, str, str], ...] = (
    ("llama.cpp /metrics", "llamacpp:requests_processing", "llamacpp:requests_deferred"),
    ("vLLM /metrics", "vllm:num_requests_running", "vllm:num_requests_waiting"),
    ("SGLang /metrics", "sglang:num_running_reqs", "sglang:num_queue_reqs"),
)
SLOTS = "llama.cpp /slots"
INTERVAL_S = 0.1
_MB = 1024 * 1024


def gauge(text: str, name: str) -> float | None:
    """The sum of a gauge's samples over its label sets; None when it is not there."""
    values = []
    for line in text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            try:
                values.append(float(line.rsplit(None, 1)[-1]))
            except ValueError:
                continue
    return sum(values) if values else None


def read_gauges(text: str) -> tuple[str, int, int | None] | None:
    """(source, running, waiting) from a Prometheus text page, for the first engine it names."""
    for source, running, waiting in GAUGES:
        value = gauge(text, running)
        if value is not None:
            queued = gauge(text, waiting)
            return source, round(value), None if queued is None else round(queued)
    return None


def read_slots(reply: JsonValue) -> int | None:
    """Slots processing a request, from llama.cpp's ``/slots``."""
    if not isinstance(reply, list) or not reply:
        return None
    busy = 0
    for slot in reply:
        if not isinstance(slot, dict):
            return None
        processing = slot.get("is_processing")
        if processing is None:  # older builds: state 0 is idle
            processing = slot.get("state") not in (0, None)
        busy += bool(processing)
    return busy


def _longest_excess(samples: list[tuple[float, int, int]], interval: float) -> float:
    """The longest run of consecutive samples in which the server ran more requests than
    the client had open, in seconds (one sample alone counts as one interval)."""
    longest, start = 0.0, None
    for at, running, open_ in samples:
        if running > open_:
            start = at if start is None else start
            longest = max(longest, at - start + interval)
        else:
            start = None
    return longest


@dataclass
class InFlight:
    """The client's requests in flight now (a step's waves count them up and down)."""

    n: int = 0


@dataclass
class LoadSampler:
    """Samples while its block runs; ``server_load()`` and ``rss_peak_mb`` afterwards.

    With ``flight`` each running count is kept beside the client's own requests in flight
    (the more of the counts before and after the sample), so ``capacity()`` can tell a
    server that runs requests its clients dropped."""

    base_url: str
    pgid: int | None = None
    flight: InFlight | None = None
    interval: float = INTERVAL_S
    source: str | None = None
    running: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    rss_peak_mb: float | None = None
    beside: list[tuple[float, int, int]] = field(default_factory=list)
    """(monotonic time, server running, client in flight) per sample, with ``flight``."""
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _probe_server: bool = True

    async def __aenter__(self) -> Self:
        self._tasks = [asyncio.create_task(self._server_loop())]
        if self.pgid is not None:
            self._tasks.append(asyncio.create_task(self._rss_loop(self.pgid)))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.pgid is not None:
            await self._sample_rss(self.pgid)  # a step shorter than one interval has one too

    def server_load(self) -> ServerLoad | None:
        if self.source is None or not self.running:
            return None
        return ServerLoad(
            source=self.source,
            samples=len(self.running),
            running_max=max(self.running),
            running_mean=round(sum(self.running) / len(self.running), 2),
            waiting_max=max(self.waiting) if self.waiting else None,
        )

    async def _server_loop(self) -> None:
        timeouts = Timeouts(total=max(self.interval * 8, 2.0))
        async with OpenAIClient(self.base_url, timeouts=timeouts) as client:
            while self._probe_server:
                await self._sample_server(client)
                await asyncio.sleep(self.interval)

    async def _rss_loop(self, pgid: int) -> None:
        while True:
            await self._sample_rss(pgid)
            await asyncio.sleep(self.interval)

    async def _sample_rss(self, pgid: int) -> None:
        rss = await asyncio.to_thread(group_rss_bytes, pgid)
        if rss is not None:
            self.rss_peak_mb = max(self.rss_peak_mb or 0.0, round(rss / _MB, 1))

    async def _sample_server(self, client: OpenAIClient) -> None:
        before = self.flight.n if self.flight is not None else 0
        running = await self._read_running(client)
        if running is not None and self.flight is not None:
            self.beside.append((time.monotonic(), running, max(before, self.flight.n)))

    async def _read_running(self, client: OpenAIClient) -> int | None:
        try:
            if self.source in (None, *(g[0] for g in GAUGES)):
                page = await client.get_text("/metrics")
                found = read_gauges(page) if page is not None else None
                if found is not None:
                    self.source, running, waiting = found
                    self.running.append(running)
                    if waiting is not None:
                        self.waiting.append(waiting)
                    return running
            if self.source in (None, SLOTS):
                busy = read_slots(await client.get_json("/slots"))
                if busy is not None:
                    self.source = SLOTS
                    self.running.append(busy)
                    return busy
        except EngineError:
            return None  # a missed sample (a dropped connection): the next one may land
        if self.source is None:
            self._probe_server = False  # the server reports neither: the client's view it is
        return None

    async def capacity(self, hung_up: int, deadline_s: float) -> CapacityCheck | None:
        """After a step with ``hung_up`` client aborts, its requests all ended: wait (up to
        ``deadline_s``) until the server runs none, then read the samples. None when the
        server states no running count."""
        ended = time.monotonic()
        drained_s = None
        while self.source is not None and self._probe_server:
            latest = self.beside[-1] if self.beside else None
            if latest is not None and latest[0] > ended and latest[1] == 0:
                drained_s = round(max(latest[0] - ended, 0.0), 3)
                break
            if time.monotonic() - ended > deadline_s:
                break
            await asyncio.sleep(self.interval)
        if self.source is None or not self.beside:
            return None
        return CapacityCheck(
            source=self.source, hung_up=hung_up, samples=len(self.beside),
            excess_s=round(_longest_excess(self.beside, self.interval), 3),
            excess_max=max(max(r - c, 0) for _, r, c in self.beside),
            drained_s=drained_s, deadline_s=round(deadline_s, 3),
        )
