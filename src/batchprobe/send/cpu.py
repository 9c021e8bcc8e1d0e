"""Where the machine's cores go while throughput is sampled: ``/proc/stat`` for the whole
machine (busy and steal), this process's own CPU time, and the managed engine's group's."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from batchprobe.processes import group_cpu_s
from batchprobe.results.throughput import CpuLoad

_PROC = Path("/proc")


@dataclass(frozen=True)
class _Reading:
    at: float
    busy: float  # seconds of CPU time, every core
    steal: float
    total: float
    client: float
    engine: float | None


def _machine() -> tuple[float, float, float] | None:
    """(busy, steal, total) seconds of CPU since boot, every core; None without /proc."""
    try:
        line = (_PROC / "stat").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    fields = [int(x) for x in line.split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    values = (fields + [0] * 8)[:8]
    idle = values[3] + values[4]
    steal = values[7]
    total = sum(values)
    return (total - idle - steal) / ticks, steal / ticks, total / ticks


def _own_cpu() -> float:
    """This process's CPU time and its waited-for children's (the client workers')."""
    own = os.times()
    return own.user + own.system + own.children_user + own.children_system


def _read(pgid: int | None) -> _Reading | None:
    machine = _machine()
    if machine is None:
        return None
    busy, steal, total = machine
    return _Reading(time.monotonic(), busy, steal, total, _own_cpu(),
                    group_cpu_s(pgid) if pgid is not None else None)


class CpuMeter:
    """Accumulates the load of the intervals between ``start()`` and ``stop()`` calls."""

    def __init__(self, pgid: int | None) -> None:
        self.pgid = pgid
        self._begin: _Reading | None = None
        self._wall = self._busy = self._steal = self._total = self._client = 0.0
        self._engine: float | None = None

    def start(self) -> None:
        self._begin = _read(self.pgid)

    def stop(self) -> None:
        begin, end = self._begin, _read(self.pgid)
        self._begin = None
        if begin is None or end is None:
            return
        self._wall += end.at - begin.at
        self._busy += end.busy - begin.busy
        self._steal += end.steal - begin.steal
        self._total += end.total - begin.total
        self._client += end.client - begin.client
        if begin.engine is not None and end.engine is not None:
            self._engine = (self._engine or 0.0) + end.engine - begin.engine

    def load(self) -> CpuLoad | None:
        if self._wall <= 0 or self._total <= 0:
            return None
        wall = self._wall
        busy, client = self._busy / wall, self._client / wall
        engine = self._engine / wall if self._engine is not None else None
        return CpuLoad(
            cores=os.cpu_count() or 1,
            busy=round(busy, 3),
            client=round(client, 3),
            engine=None if engine is None else round(engine, 3),
            other=round(max(busy - client - (engine or 0.0), 0.0), 3),
            steal=round(self._steal / self._total, 4),
        )
