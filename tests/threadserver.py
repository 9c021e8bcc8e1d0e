"""A throwaway aiohttp server in a thread, for probes that run their own event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aioserver import Handler, serve


@contextmanager
def serve_in_thread(handler: Handler) -> Iterator[str]:
    """``handler`` answering every path on a free 127.0.0.1 port; yields the base URL."""
    loop = asyncio.new_event_loop()
    ready: list[str] = []
    started, stop = threading.Event(), asyncio.Event()

    async def main() -> None:
        async with serve(handler) as url:
            ready.append(url)
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError("the test server did not start")
    try:
        yield ready[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
