"""A raw-socket HTTP/1.1 server for client tests that need TCP-level control (who closes a
connection, when, and whether after reading the request), which aiohttp's own server cannot
give. Every connection is scripted; the server counts connections and the requests it read."""

from __future__ import annotations

import json
import select
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

# What the server does with each request on a connection, in order:
#   "answer": answer it and keep the connection open;
#   "answer_close": answer it, then close at once (a clean FIN; llama-server does this
#     after a stream);
#   "announce_close": answer it with "Connection: close", then close;
#   "close_unread": answer it, wait for the next request to arrive and close with it unread
#     (the kernel resets the connection: that request provably never reached the server);
#   "drop": read it fully, then close without a byte of reply.
Act = Literal["answer", "answer_close", "announce_close", "close_unread", "drop"]

_EVENT = {"choices": [{"index": 0, "text": "ok", "finish_reason": "stop"}]}
REPLY_BODY = b"data: " + json.dumps(_EVENT).encode() + b"\n\ndata: [DONE]\n\n"
_REPLY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    + f"Content-Length: {len(REPLY_BODY)}\r\n\r\n".encode()
    + REPLY_BODY
)
_ANNOUNCED = _REPLY.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)


@dataclass
class RawServer:
    url: str
    scripts: list[list[Act]]
    """One script per accepted connection, in order; the last one repeats."""
    requests_read: int = 0
    connections: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)


def read_request(conn: socket.socket) -> tuple[str, bytes] | None:
    """Read one whole request (headers and Content-Length body): its path and body; None on
    EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return lines[0].split(b" ")[1].decode(), body


def _serve_connection(server: RawServer, conn: socket.socket, script: list[Act]) -> None:
    with conn:
        for act in [*script, *["answer"] * 1000]:  # script done: answer and keep it open
            if read_request(conn) is None:
                return
            with server._lock:
                server.requests_read += 1
            if act == "drop":
                return
            conn.sendall(_ANNOUNCED if act == "announce_close" else _REPLY)
            if act in ("answer_close", "announce_close"):
                return
            if act == "close_unread":
                select.select([conn], [], [], 5.0)
                return


@contextmanager
def accepting(on_accept: Callable[[socket.socket], None], backlog: int = 16) -> Iterator[str]:
    """A loopback listener, its URL yielded: each accepted connection is handed to
    ``on_accept`` in the accepting thread, in order (long work goes to a thread of its own)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    stop = threading.Event()

    def accept_loop() -> None:
        while not stop.is_set():
            ready, _, _ = select.select([listener], [], [], 0.05)
            if ready:
                on_accept(listener.accept()[0])

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        listener.close()


@contextmanager
def raw_server(scripts: list[list[Act]]) -> Iterator[RawServer]:
    server = RawServer("", scripts)

    def accept(conn: socket.socket) -> None:
        script = scripts[min(server.connections, len(scripts) - 1)]
        server.connections += 1
        threading.Thread(
            target=_serve_connection, args=(server, conn, script), daemon=True
        ).start()

    with accepting(accept) as server.url:
        yield server
