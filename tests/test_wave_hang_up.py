"""When a dropped stream's client hangs up beside a long prompt: once that prompt is on the
wire, however late a client worker process says so; at ``latest`` chunks only while the long
prompt holds no slot (the wave has every slot)."""

from __future__ import annotations

import asyncio

from batchprobe.send.waves import _Live, _Wave
from batchprobe.workload.shapes import HangUp

DROPPED, LONG = 0, 1
WHEN = HangUp(tokens=1, beside=LONG, latest=4)


async def _stream(wave: _Wave, dropped: _Live, chunks: int) -> None:
    for n in range(1, chunks + 1):
        wave.progress(dropped, n)
        await asyncio.sleep(0)


def test_a_long_prompt_holding_a_slot_is_waited_for_past_latest() -> None:
    async def go() -> tuple[bool, bool, list[int] | None]:
        wave = _Wave()
        dropped, _, _ = wave.arrive(DROPPED, 0)
        event = asyncio.Event()
        watch = asyncio.ensure_future(wave.hang_up(dropped, WHEN, event))
        wave.progress(dropped, 0)
        long, _, _ = wave.arrive(LONG, 0)  # its send began: a slot, not yet on the wire
        await _stream(wave, dropped, 3 * WHEN.latest)
        before = event.is_set()
        wave.progress(long, 0)  # on the wire, relayed late
        await asyncio.wait_for(watch, 1.0)
        return before, event.is_set(), dropped.waiting_at_hang_up

    before, after, waiting = asyncio.run(go())
    assert (before, after) == (False, True)
    assert waiting == [LONG]


def test_a_long_prompt_with_no_slot_lets_the_drop_go_at_latest() -> None:
    async def go() -> tuple[bool, list[int] | None]:
        wave = _Wave()
        dropped, _, _ = wave.arrive(DROPPED, 0)
        event = asyncio.Event()
        watch = asyncio.ensure_future(wave.hang_up(dropped, WHEN, event))
        wave.progress(dropped, 0)
        await _stream(wave, dropped, WHEN.latest)
        await asyncio.wait_for(watch, 1.0)
        return event.is_set(), dropped.waiting_at_hang_up

    assert asyncio.run(go()) == (True, [])
