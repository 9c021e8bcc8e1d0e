"""Client worker processes: an arm's requests sharded over K processes, each with its own
event loop and connection pool, so one loop's speed never caps what a server is measured at.

The parent keeps every scheduling rule (phases, joins triggered by another request's
progress, the concurrency limit): it hands each request to the least busy worker and awaits
its record. A worker streams back, per request, its progress (the chunks streamed so far, at
most every :data:`PROGRESS_S`, so a join one process triggers in another still fires) and
then the whole record. Timestamps need no translation: ``time.perf_counter`` reads
CLOCK_MONOTONIC, one clock for every process of the machine.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from typing_extensions import Self

from batchprobe._aio import run
from batchprobe.client._client import OpenAIClient
from batchprobe.client._connection import ConnectionPolicy
from batchprobe.client._lag import LoopLag
from batchprobe.client.types import CompletionRequest, RequestRecord

PROGRESS_S = 0.002
"""How often a worker sends the progress of its streams (a join's trigger is this late)."""
_STOP_S = 5.0


class Completer(Protocol):
    """What shaped traffic sends through: an :class:`OpenAIClient` or a :class:`ClientPool`."""

    connection_policy: ConnectionPolicy

    async def complete(
        self, req: CompletionRequest, on_progress: Callable[[int], None] | None = None
    ) -> RequestRecord: ...

    def request_body(self, req: CompletionRequest) -> dict[str, Any]: ...

    async def loop_lag(self) -> list[LoopLag]: ...


class _Worker:
    """The worker's side: runs requests on its own client, reports back over ``conn``."""

    def __init__(self, conn: Connection, client: OpenAIClient) -> None:
        self.conn = conn
        self.client = client
        self.loop = asyncio.get_running_loop()
        self.done = self.loop.create_future()
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.dirty: dict[int, int] = {}
        self.flush: asyncio.TimerHandle | None = None

    def readable(self) -> None:
        try:
            while self.conn.poll():
                self._command(self.conn.recv())
        except (EOFError, OSError):
            self._stop()

    def _command(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "req":
            idx, req = msg[1], msg[2]
            self.tasks[idx] = self.loop.create_task(self._one(idx, req))
        elif msg[0] == "cancel" and msg[1] in self.tasks:
            self.tasks[msg[1]].cancel()
        elif msg[0] == "lag":
            policy = self.client.connection_policy
            self.conn.send(("lag", self.client.lag.take("worker"), policy.mode, policy.reason))
        elif msg[0] == "stop":
            self._stop()

    def _stop(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    async def _one(self, idx: int, req: CompletionRequest) -> None:
        try:
            record = await self.client.complete(req, lambda n: self._progress(idx, n))
        finally:
            self.tasks.pop(idx, None)
            self.dirty.pop(idx, None)
        self.conn.send(("done", idx, record))

    def _progress(self, idx: int, chunks: int) -> None:
        self.dirty[idx] = chunks
        if self.flush is None:
            self.flush = self.loop.call_later(PROGRESS_S, self._flush)

    def _flush(self) -> None:
        self.flush = None
        if self.dirty:
            self.conn.send(("prog", self.dirty))
            self.dirty = {}


async def _serve(conn: Connection) -> None:
    settings: dict[str, Any] = conn.recv()
    async with OpenAIClient(**settings) as client:
        worker = _Worker(conn, client)
        worker.loop.add_reader(conn.fileno(), worker.readable)
        conn.send(("ready",))
        try:
            await worker.done
        finally:
            worker.loop.remove_reader(conn.fileno())
            for task in list(worker.tasks.values()):
                task.cancel()


def worker_main(fd: int) -> None:
    """A worker: ``python -m batchprobe.client._worker FD``, FD its end of a socket pair. It
    exits when told to, or when the parent's end closes (the parent died)."""
    run(_serve(Connection(fd)))


class _Handle:
    """The parent's side of one worker."""

    def __init__(self, process: subprocess.Popen[bytes], conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.pending: dict[int, tuple[asyncio.Future[RequestRecord], Callable[[int], None] | None]] = {}
        self.replies: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()


def _spawn(settings: dict[str, Any]) -> _Handle:
    """Start one worker on its end of a socket pair and send it the client's settings."""
    ours, theirs = socket.socketpair()
    with theirs:
        argv = [sys.executable, "-m", "batchprobe.client._worker", str(theirs.fileno())]
        process = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
    handle = _Handle(process, Connection(ours.detach()))
    handle.conn.send(settings)
    return handle


class ClientPool:
    """``complete`` and ``request_body`` of an :class:`OpenAIClient`, over ``procs`` worker
    processes. Use as ``async with ClientPool(client, procs) as pool`` inside the client's
    own ``async with``; the client itself stays the parent's (discovery, side requests)."""

    def __init__(self, client: OpenAIClient, procs: int) -> None:
        self.client = client
        self.procs = procs
        self._workers: list[_Handle] = []
        self._ids = itertools.count()
        self.connection_policy = ConnectionPolicy()

    async def __aenter__(self) -> Self:
        loop = asyncio.get_running_loop()
        for _ in range(self.procs):
            handle = _spawn(self.client.settings())
            self._workers.append(handle)
            loop.add_reader(handle.conn.fileno(), self._readable, handle)
        for handle in self._workers:
            await self._reply(handle, "ready")
        return self

    async def __aexit__(self, *exc: object) -> None:
        loop = asyncio.get_running_loop()
        for handle in self._workers:
            loop.remove_reader(handle.conn.fileno())
            try:
                handle.conn.send(("stop",))
            except OSError:
                pass  # already gone
        for handle in self._workers:
            try:
                await asyncio.to_thread(handle.process.wait, _STOP_S)
            except subprocess.TimeoutExpired:
                handle.process.kill()
                await asyncio.to_thread(handle.process.wait)
            handle.conn.close()
        self._workers = []

    def _readable(self, handle: _Handle) -> None:
        try:
            while handle.conn.poll():
                self._message(handle, handle.conn.recv())
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(handle.conn.fileno())
            for future, _ in handle.pending.values():
                if not future.done():
                    future.set_exception(RuntimeError("a client worker process exited"))
            handle.pending.clear()

    def _message(self, handle: _Handle, msg: tuple[Any, ...]) -> None:
        if msg[0] == "prog":
            for idx, chunks in msg[1].items():
                entry = handle.pending.get(idx)
                if entry is not None and entry[1] is not None:
                    entry[1](chunks)
        elif msg[0] == "done":
            entry = handle.pending.pop(msg[1], None)
            if entry is not None and not entry[0].done():
                entry[0].set_result(msg[2])
        else:
            handle.replies.put_nowait(msg)

    async def _reply(self, handle: _Handle, kind: str) -> tuple[Any, ...]:
        msg = await handle.replies.get()
        if msg[0] != kind:
            raise RuntimeError(f"a client worker answered {msg[0]!r} where {kind!r} was due")
        return msg

    def request_body(self, req: CompletionRequest) -> dict[str, Any]:
        return self.client.request_body(req)

    async def complete(
        self, req: CompletionRequest, on_progress: Callable[[int], None] | None = None
    ) -> RequestRecord:
        """As :meth:`OpenAIClient.complete`, on the worker with the fewest requests in flight."""
        handle = min(self._workers, key=lambda w: len(w.pending))
        idx = next(self._ids)
        future: asyncio.Future[RequestRecord] = asyncio.get_running_loop().create_future()
        handle.pending[idx] = (future, on_progress)
        handle.conn.send(("req", idx, req))
        try:
            return await future
        except asyncio.CancelledError:
            handle.pending.pop(idx, None)
            handle.conn.send(("cancel", idx))
            raise

    async def loop_lag(self) -> list[LoopLag]:
        """Each process's loop lag since the last call (the parent's first), and the workers'
        connection policy learnt into :attr:`connection_policy`."""
        lags = [self.client.lag.take("parent")]
        for handle in self._workers:
            handle.conn.send(("lag",))
        for handle in self._workers:
            _, lag, mode, reason = await self._reply(handle, "lag")
            lags.append(lag)
            if mode == "fresh":
                self.connection_policy.go_fresh(reason)
        return lags
