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
import pickle
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
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
_REPLY_S = 120.0
"""A worker that has not started (or answered) within this long is taken as hung."""


class Completer(Protocol):
    """What shaped traffic sends through: an :class:`OpenAIClient` or a :class:`ClientPool`."""

    connection_policy: ConnectionPolicy

    async def complete(
        self,
        req: CompletionRequest,
        on_progress: Callable[[int], None] | None = None,
        hang_up: asyncio.Event | None = None,
    ) -> RequestRecord: ...

    def request_body(self, req: CompletionRequest) -> dict[str, Any]: ...

    async def loop_lag(self) -> list[LoopLag]: ...


_HEAD = struct.Struct("!I")


class _Channel:
    """Length-prefixed pickled messages over one end of a socket pair, on the running loop
    (writes are buffered, never blocking the loop)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, sock: socket.socket) -> _Channel:
        return cls(*await asyncio.open_connection(sock=sock))

    def send(self, msg: object) -> None:
        body = pickle.dumps(msg, pickle.HIGHEST_PROTOCOL)
        self.writer.write(_HEAD.pack(len(body)) + body)

    async def recv(self) -> Any:
        """The next message; ``EOFError`` when the other end closed."""
        try:
            (size,) = _HEAD.unpack(await self.reader.readexactly(_HEAD.size))
            return pickle.loads(await self.reader.readexactly(size))
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise EOFError from exc

    def close(self) -> None:
        self.writer.close()


class _Worker:
    """The worker's side: runs requests on its own client, reports back over ``conn``."""

    def __init__(self, conn: _Channel, client: OpenAIClient) -> None:
        self.conn = conn
        self.client = client
        self.loop = asyncio.get_running_loop()
        self.done = self.loop.create_future()
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.hang_ups: dict[int, asyncio.Event] = {}
        self.dirty: dict[int, int] = {}
        self.flush: asyncio.TimerHandle | None = None

    async def serve(self) -> None:
        """Commands until told to stop, or until the parent's end closes."""
        try:
            while not self.done.done():
                self._command(await self.conn.recv())
        except EOFError:
            self._stop()

    def _command(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "req":
            idx, req, hangs_up = msg[1], msg[2], msg[3]
            event = asyncio.Event() if hangs_up else None
            if event is not None:
                self.hang_ups[idx] = event
            self.tasks[idx] = self.loop.create_task(self._one(idx, req, event))
        elif msg[0] == "hangup" and msg[1] in self.hang_ups:
            self.hang_ups[msg[1]].set()
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

    async def _one(self, idx: int, req: CompletionRequest, hang_up: asyncio.Event | None) -> None:
        try:
            record = await self.client.complete(req, lambda n: self._progress(idx, n), hang_up)
        finally:
            self.tasks.pop(idx, None)
            self.dirty.pop(idx, None)
            self.hang_ups.pop(idx, None)
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


async def _serve(sock: socket.socket) -> None:
    conn = await _Channel.open(sock)
    settings: dict[str, Any] = await conn.recv()
    async with OpenAIClient(**settings) as client:
        worker = _Worker(conn, client)
        conn.send(("ready",))
        commands = asyncio.create_task(worker.serve())
        try:
            await worker.done
        finally:
            commands.cancel()
            for task in list(worker.tasks.values()):
                task.cancel()
            conn.close()


def worker_main(fd: int) -> None:
    """A worker: ``python -m batchprobe.client._worker FD``, FD its end of a socket pair. It
    exits when told to, or when the parent's end closes (the parent died). Ctrl-C is the
    parent's to handle: it stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run(_serve(socket.socket(fileno=fd)))


class _Handle:
    """The parent's side of one worker."""

    def __init__(self, process: subprocess.Popen[bytes], conn: _Channel) -> None:
        self.process = process
        self.conn = conn
        self.listener: asyncio.Task[None] | None = None
        self.pending: dict[int, tuple[asyncio.Future[RequestRecord], Callable[[int], None] | None]] = {}
        self.replies: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()


def _spawn() -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start one worker on its end of a socket pair; ours is returned."""
    ours, theirs = socket.socketpair()
    with theirs:
        argv = [sys.executable, "-m", "batchprobe.client._worker", str(theirs.fileno())]
        process = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
    return process, ours


async def _relay_hang_up(hang_up: asyncio.Event, conn: _Channel, idx: int) -> None:
    await hang_up.wait()
    conn.send(("hangup", idx))


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
        for _ in range(self.procs):
            process, sock = _spawn()
            handle = _Handle(process, await _Channel.open(sock))
            self._workers.append(handle)
            handle.conn.send(self.client.settings())
            handle.listener = asyncio.create_task(self._listen(handle))
        for handle in self._workers:
            await self._reply(handle, "ready")
        return self

    async def __aexit__(self, *exc: object) -> None:
        for handle in self._workers:
            handle.conn.send(("stop",))
        deadline = time.monotonic() + _STOP_S
        for handle in self._workers:
            while handle.process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if handle.process.poll() is None:
                handle.process.kill()
                handle.process.wait()
            if handle.listener is not None:
                handle.listener.cancel()
            handle.conn.close()
        self._workers = []

    async def _listen(self, handle: _Handle) -> None:
        try:
            while True:
                self._message(handle, await handle.conn.recv())
        except EOFError:
            gone = RuntimeError(f"a client worker process exited (status {handle.process.poll()})")
            for future, _ in handle.pending.values():
                if not future.done():
                    future.set_exception(gone)
            handle.pending.clear()
            handle.replies.put_nowait(("exited", gone))

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
        msg = await asyncio.wait_for(handle.replies.get(), _REPLY_S)
        if msg[0] == "exited":
            handle.replies.put_nowait(msg)  # every later wait fails the same way
            raise msg[1]
        if msg[0] != kind:
            raise RuntimeError(f"a client worker answered {msg[0]!r} where {kind!r} was due")
        return msg

    def request_body(self, req: CompletionRequest) -> dict[str, Any]:
        return self.client.request_body(req)

    async def complete(
        self,
        req: CompletionRequest,
        on_progress: Callable[[int], None] | None = None,
        hang_up: asyncio.Event | None = None,
    ) -> RequestRecord:
        """As :meth:`OpenAIClient.complete`, on the worker with the fewest requests in flight
        (a hang-up is passed on to that worker when ``hang_up`` is set)."""
        handle = min(self._workers, key=lambda w: len(w.pending))
        idx = next(self._ids)
        future: asyncio.Future[RequestRecord] = asyncio.get_running_loop().create_future()
        handle.pending[idx] = (future, on_progress)
        handle.conn.send(("req", idx, req, hang_up is not None))
        relay = None
        if hang_up is not None:
            relay = asyncio.ensure_future(_relay_hang_up(hang_up, handle.conn, idx))
        try:
            return await future
        except asyncio.CancelledError:
            handle.pending.pop(idx, None)
            handle.conn.send(("cancel", idx))
            raise
        finally:
            if relay is not None:
                relay.cancel()

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
