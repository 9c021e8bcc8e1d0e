"""gather_all: every result in order, or the first failure with the others cancelled."""

from __future__ import annotations

import asyncio

import pytest

from batchprobe._aio import gather_all, run


def test_results_come_in_order() -> None:
    async def value(v: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return v

    assert run(gather_all(value(1, 0.02), value(2, 0.0), value(3, 0.01))) == [1, 2, 3]


def test_a_failure_cancels_the_others_before_it_is_raised() -> None:
    cancelled: list[str] = []

    async def waits_for_ever(name: str) -> None:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run(gather_all(waits_for_ever("a"), fails(), waits_for_ever("b")))
    assert sorted(cancelled) == ["a", "b"]
