"""The event-loop helpers: uvloop when installed (less CPU per token for the client and the
fake server), asyncio's default loop otherwise; and a gather that cancels on failure."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new uvloop loop when uvloop is importable, else asyncio's default loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - exercised only without uvloop
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on a loop from :func:`new_event_loop`.

    On Python 3.11+ this is ``asyncio.Runner``, so Ctrl-C cancels the main task and its
    ``finally`` blocks run, exactly as under ``asyncio.run``.
    """
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            return runner.run(coro)
    loop = new_event_loop()  # pragma: no cover - Python 3.10 only
    try:  # pragma: no cover
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:  # pragma: no cover
        asyncio.set_event_loop(None)
        loop.close()


async def gather_all(*aws: Awaitable[T]) -> list[T]:
    """Every result in order, like ``asyncio.gather``; but on the first failure the others are
    cancelled (and awaited) before it is raised, so nothing is left waiting on a dead server."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
