"""Running the fake server: blocking (``serve``) or on its own loop in a thread (tests)."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from types import TracebackType

from aiohttp import web
from typing_extensions import Self

from batchprobe._aio import new_event_loop
from batchprobe.errors import ConfigError
from batchprobe.fake._app import build_app
from batchprobe.fake._config import FakeServerConfig
from batchprobe.fake._state import STATE_KEY, StopReason

# Stopping (and exit_after's simulated crash) must not wait for hanging or streaming
# handlers: give them this long, then cut their connections.
_SHUTDOWN_TIMEOUT_S = 0.25
_START_TIMEOUT_S = 30.0
# Benchmarks open hundreds of connections at once; the default 128 would drop SYNs and
# add a 1 s retransmit to some TTFTs.
_BACKLOG = 4096

OnListening = Callable[[str], None]


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still pending (hanging handlers) and wait for it, then close.

    Closing with tasks pending would leave their coroutines to the garbage collector, which
    throws GeneratorExit into them at some random later point.
    """
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def format_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def _run_app(
    app: web.Application, host: str, port: int, on_listening: OnListening | None
) -> StopReason:
    """Listen until the app's stop event is set; return why it stopped."""
    state = app[STATE_KEY]
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, host, port, backlog=_BACKLOG).start()
        except OSError as exc:
            raise ConfigError("port", f"cannot listen on {host}:{port}: {exc}") from exc
        if on_listening is not None:
            on_listening(format_url(host, runner.addresses[0][1]))
        await state.stop_event.wait()
    finally:
        await runner.cleanup()
    return state.stop_reason or "requested"


def serve(
    config: FakeServerConfig,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    on_listening: OnListening | None = None,
) -> StopReason:
    """Serve until SIGINT/SIGTERM ("requested") or the exit_after fault ("exit_after").

    ``on_listening`` gets the base URL once the socket is bound (the real port when 0).
    """
    app = build_app(config)
    state = app[STATE_KEY]
    loop = new_event_loop()
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, state.request_stop, "requested")
        return loop.run_until_complete(_run_app(app, host, port, on_listening))
    finally:
        _close_loop(loop)


class FakeServerThread:
    """The fake server on its own event loop in a daemon thread; a context manager.

    ``base_url`` is valid inside the ``with`` block. A server stopped by ``exit_after``
    has already closed its listener and connections; leaving the block is then a no-op.
    """

    def __init__(self, config: FakeServerConfig, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config = config
        self.host = host
        self._port = port
        self._app = build_app(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._url: str | None = None
        self._error: ConfigError | None = None

    @property
    def base_url(self) -> str:
        if self._url is None:
            raise RuntimeError("the fake server is not running; use it as a context manager")
        return self._url

    @property
    def stop_reason(self) -> StopReason | None:
        """None while serving; "exit_after" once that fault stopped it."""
        return self._app[STATE_KEY].stop_reason

    @property
    def requests(self) -> dict[str, int]:
        """Generation requests received so far, by path (``completions``, ``chat``)."""
        return dict(self._app[STATE_KEY].requests)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="batchprobe-fake", daemon=True)
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT_S):
            raise RuntimeError("the fake server thread did not start")
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if thread.is_alive():
            state = self._app[STATE_KEY]
            try:
                loop.call_soon_threadsafe(state.request_stop, "requested")
            except RuntimeError:
                pass  # the loop closed between the check and the call: already stopping
        thread.join()

    def _on_listening(self, url: str) -> None:
        self._url = url
        self._ready.set()

    def _main(self) -> None:
        loop = self._loop = new_event_loop()
        try:
            loop.run_until_complete(_run_app(self._app, self.host, self._port, self._on_listening))
        except ConfigError as exc:
            self._error = exc
        finally:
            self._ready.set()
            _close_loop(loop)
