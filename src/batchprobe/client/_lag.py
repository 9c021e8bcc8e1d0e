"""How far behind a client process's event loop runs: its own timings' error bar.

Every ``interval_s`` a timer makes a probe callback ready and stamps the moment; the probe
records, when it runs, how late it ran (wall) and how much of that wait the loop spent busy
with other work (this thread's CPU time). A token read by that loop waits about as long before
it is timestamped, so TTFT and ITL carry that lag.

The busy part is the client's own queueing: it grows with the streams one loop carries and
more client processes remove it. The wall part adds waits for a CPU that other processes held
(a loaded machine); it is reported beside it, and only the busy part decides whether the
client's timings can be taken as the server's (``Thresholds.client_lag_ms``, 2 ms).
"""

from __future__ import annotations

import asyncio
from array import array
from time import perf_counter, thread_time
from typing import Literal

from pydantic import BaseModel, ConfigDict

LAG_INTERVAL_S = 0.005
"""Sampled this often (about 1% of a core, the wake-ups included: it shows as CPU per token only
at a few streams), so a window of two seconds has 400 samples and its p99
is not one burst (a wave's first sends, its last records)."""

Role = Literal["client", "parent", "worker"]


class LoopLag(BaseModel):
    """One client process's loop lag over a window (an arm, or a sweep step)."""

    model_config = ConfigDict(extra="forbid")

    role: Role = "client"
    """client: the one process that sends and times; worker: one of several that do; parent:
    theirs, which only schedules (its lag delays a join, never a token's timestamp)."""
    samples: int
    busy_p99_ms: float
    """p99 of the loop's own work done before a ready callback ran."""
    wall_p99_ms: float
    """p99 of how late a ready callback ran, waits for the CPU included."""
    wall_max_ms: float


def _p99(values: array[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3 if ordered else 0.0


def worst(lags: list[LoopLag]) -> LoopLag | None:
    """The laggiest window of the processes that timestamp tokens (it bounds their timings)."""
    timing = [lag for lag in lags if lag.role != "parent"]
    return max(timing, key=lambda lag: lag.busy_p99_ms, default=None)


class LagMeter:
    """Samples the running loop's lag until :meth:`stop`; :meth:`take` ends a window."""

    def __init__(self, interval_s: float = LAG_INTERVAL_S) -> None:
        self._interval = interval_s
        self._wall: array[float] = array("d")
        self._busy: array[float] = array("d")
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_later(self._interval, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        if self._loop is None:
            return
        self._loop.call_soon(self._probe, perf_counter(), thread_time())
        self._handle = self._loop.call_later(self._interval, self._tick)

    def _probe(self, wall0: float, cpu0: float) -> None:
        self._wall.append(perf_counter() - wall0)
        self._busy.append(thread_time() - cpu0)

    def take(self, role: Role = "client") -> LoopLag:
        """The window since the last take (or the start), and a fresh one begun."""
        lag = LoopLag(
            role=role,
            samples=len(self._wall),
            busy_p99_ms=round(_p99(self._busy), 3),
            wall_p99_ms=round(_p99(self._wall), 3),
            wall_max_ms=round(max(self._wall, default=0.0) * 1e3, 3),
        )
        self._wall, self._busy = array("d"), array("d")
        return lag
