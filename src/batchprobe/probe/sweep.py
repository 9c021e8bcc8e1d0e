"""The sweep's plan: its depths, and how long its next step will take (each step's record,
its correctness and the envelope are the judge's: ``judge.steps``)."""

from __future__ import annotations

from collections.abc import Sequence

from batchprobe.errors import ConfigError
from batchprobe.results.models import MAX_DEPTH
from batchprobe.results.sweep import SweepStep


def doubling(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit`` (and ``limit`` itself)."""
    depths, n = [], 1
    while n < limit:
        depths.append(n)
        n *= 2
    return [*depths, limit]


def parse_sweep(text: str | Sequence[int], sessions: int, max_sessions: int | None) -> tuple[list[int], bool]:
    """``--sweep``: a list of increasing depths, or ``auto`` (doubling to --max-sessions)."""
    if isinstance(text, str) and text.strip().lower() == "auto":
        limit = max_sessions if max_sessions is not None else min(4 * sessions, MAX_DEPTH)
        return doubling(limit), True
    if not isinstance(text, str):
        return list(text), False
    depths = []
    for part in (p.strip() for p in text.split(",")):
        if not part.isdigit():
            raise ConfigError(
                "sweep", f"{part!r} is not a depth: give increasing integers like 1,2,4,8 or auto"
            )
        depths.append(int(part))
    return depths, False


def predicted_s(last: SweepStep, sends: int) -> float:
    """The next step's duration from the last one's pace: its wall, scaled up (never down)
    by how many more requests the next one sends."""
    return last.wall_s * max(1.0, sends / max(last.requests, 1))


