"""Signals that end a run: SIGINT, SIGTERM, SIGHUP (a closed terminal) and SIGQUIT.

The first one interrupts the run once: outside the event loop it raises
KeyboardInterrupt; inside it, it cancels the loop's tasks (raising from a signal handler
in the middle of an aiohttp or uvloop callback is swallowed there as a "fatal transport
error"), and :meth:`Interrupts.run` turns the cancellation into KeyboardInterrupt.
Later signals (a burst of Ctrl-C, a hang-up on top of a Ctrl-C) are swallowed, so they
cannot cut short the engine's teardown or the final verdict write, which are bounded.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

from batchprobe.client import run as run_async

T = TypeVar("T")

INTERRUPT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
    if hasattr(signal, name)
)  # fmt: skip


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


class Interrupts:
    """Whether the run was interrupted, and the signal handler that records it."""

    def __init__(self) -> None:
        self.fired = False

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:
            return
        self.fired = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise KeyboardInterrupt from None
        loop.call_soon_threadsafe(_cancel_all, loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on a fresh event loop; an interrupt during it is KeyboardInterrupt."""
        try:
            result = run_async(coro)
        except asyncio.CancelledError:
            if self.fired:
                raise KeyboardInterrupt from None
            raise
        if self.fired:  # the signal came after the coroutine's last await
            raise KeyboardInterrupt
        return result


@contextmanager
def signals_as_interrupt() -> Iterator[Interrupts]:
    """Route :data:`INTERRUPT_SIGNALS` to one :class:`Interrupts` while the block runs.

    Off the main thread signals cannot be caught: the block runs with Python's defaults.
    """
    interrupts = Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return
    previous = {sig: signal.signal(sig, interrupts.handle) for sig in INTERRUPT_SIGNALS}
    try:
        yield interrupts
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
