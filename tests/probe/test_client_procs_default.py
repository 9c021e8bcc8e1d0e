"""The default number of client processes: one for small runs, more for deep ones, never more
than the machine's cores."""

from __future__ import annotations

import pytest

from batchprobe.send.clients import STREAMS_PER_PROC, auto_procs


@pytest.mark.parametrize(
    ("concurrency", "cpus", "procs"),
    [
        (1, 2, 1),
        (16, 2, 1),
        (STREAMS_PER_PROC, 2, 1),
        (STREAMS_PER_PROC + 1, 2, 2),
        (1024, 2, 2),
        (1024, 16, 4),
        (1024, 1, 1),
    ],
)
def test_auto_procs(concurrency: int, cpus: int, procs: int) -> None:
    assert auto_procs(concurrency, cpus) == procs
