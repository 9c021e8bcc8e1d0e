"""A raw-socket OpenAI-like server whose every string is hostile, for the probe's edge tests.

It speaks just enough HTTP/1.1 (one request per connection, ``Connection: close``, a body
delimited by the close) to send bytes aiohttp's own server never would: lone surrogates as
the JSON escape ``\\ud800`` and as the raw bytes ED A0 80, invalid UTF-8, control characters
(ESC c, NUL, C1), HTML and markdown, in the model id, ``/props``, error bodies, header values
and the answer text; and replies that cost: 1 MB events, a flood far past the client's reply
byte cap, a drip of a few bytes at a time.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from rawhttp import accepting, read_request

Mode = Literal["text", "surrogate", "surrogate_model", "big", "flood", "drip"]

# What a hostile server says, as JSON string literals (escapes kept as sent).
MARKUP = (
    '<img src=x onerror=alert(1)></details><script>alert(2)</script>'
    "[x](javascript:alert(1)) ``` `code` | a | b |"
)
CONTROLS = "\\u001bc\\u0000\\u001b[31m\\u009b2J\\u0007\\r"
HOSTILE = MARKUP + CONTROLS
# Raw bytes for the places that are not JSON (error bodies, header values, reason phrase).
RAW_HOSTILE = MARKUP.encode() + b"\x1bc\x00\xc2\x9b2J\x07"
SURROGATE_ESCAPE = "\\ud800"
SURROGATE_RAW = b"\xed\xa0\x80"
INVALID_UTF8 = b"\xff\xfe\xc3"


@dataclass
class HostileServer:
    url: str
    mode: Mode
    completions: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self._lock:
            self.completions += 1
            return self.completions


def _head(status: bytes, content_type: bytes, extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type
            + b"\r\nConnection: close\r\nX-Hostile: " + RAW_HOSTILE.replace(b"\x00", b"")
            + b"\r\n" + extra + b"\r\n")


def _json_reply(body: bytes) -> bytes:
    return _head(b"200 OK", b"application/json", b"Content-Length: %d\r\n" % len(body)) + body


def _model_id(mode: Mode) -> str:
    """The model id as a JSON string literal."""
    if mode == "surrogate_model":
        return f'"model{SURROGATE_ESCAPE}"'
    return f'"model {HOSTILE}"'


def _event(text_literal: str, chat: bool, finish: str | None = None) -> bytes:
    fin = "null" if finish is None else f'"{finish}"'
    if chat:
        choice = f'{{"index":0,"delta":{{"content":{text_literal}}},"finish_reason":{fin}}}'
    else:
        choice = f'{{"index":0,"text":{text_literal},"finish_reason":{fin}}}'
    return f'data: {{"choices":[{choice}]}}\n\n'.encode()


def _answer_events(server: HostileServer, n: int, max_tokens: int, chat: bool) -> list[bytes]:
    """The answer's SSE events for the ``n``-th completion request."""
    mode = server.mode
    if mode == "big":
        # One 1 MB event (below the 1 MiB line cap), then a normal end.
        return [_event('"' + "A" * 1_000_000 + '"', chat), _event('""', chat, "length"),
                b"data: [DONE]\n\n"]
    if mode == "flood":
        piece = _event('"' + "B" * 60_000 + '"', chat)
        # 1100 x 60 kB: far past any reply cap, and past max_tokens' events too; the content
        # events alone are not what stops a bounded client first.
        return [piece] * 1100
    if mode == "surrogate":
        kind = n % 3
        if kind == 0:
            bad = f'"lone {SURROGATE_ESCAPE} surrogate"'.encode()
        elif kind == 1:
            bad = b'"raw ' + SURROGATE_RAW + b' surrogate"'
        else:
            bad = b'"invalid ' + INVALID_UTF8 + b' utf-8"'
        key = b'"delta":{"content":' if chat else b'"text":'
        event = b'data: {"choices":[{"index":0,' + key + bad + (b"}" if chat else b"")
        event += b',"finish_reason":null}]}\n\n'
        return [_event('" 1"', chat), event, _event('" 2"', chat, "length"), b"data: [DONE]\n\n"]
    events = [_event(f'" {HOSTILE}"', chat)]
    events += [_event(f'" {i}"', chat) for i in range(max(0, max_tokens - 2))]
    events += [_event('""', chat, "length"), b"data: [DONE]\n\n"]
    return events


def _completion(server: HostileServer, conn: socket.socket, body: bytes, chat: bool) -> None:
    n = server.count()
    try:
        request = json.loads(body)
    except ValueError:
        request = {}
    max_tokens = int(request.get("max_tokens") or 16)
    if server.mode in ("text", "surrogate") and n % 5 == 4:
        # An error reply: a hostile reason phrase, header and body.
        error_body = b'{"error":{"message":"' + RAW_HOSTILE.replace(b'"', b"'")
        error_body += (SURROGATE_RAW + INVALID_UTF8 if server.mode == "surrogate" else b"")
        error_body += b'"}}'
        conn.sendall(_head(b"500 " + RAW_HOSTILE.replace(b"\x00", b"")[:40] + SURROGATE_RAW,
                           b"application/json", b"Content-Length: %d\r\n" % len(error_body))
                     + error_body)
        return
    if server.mode in ("text", "surrogate") and n % 5 == 2:
        # An error object inside a 200 stream.
        message = f'"{HOSTILE}{SURROGATE_ESCAPE if server.mode == "surrogate" else ""}"'
        conn.sendall(_head(b"200 OK", b"text/event-stream")
                     + f'data: {{"error":{{"message":{message}}}}}\n\n'.encode())
        return
    if server.mode == "surrogate" and n % 7 == 6:
        # A content type the client cannot take, with a surrogate in it.
        conn.sendall(_head(b"200 OK", b"text/x-" + SURROGATE_RAW) + RAW_HOSTILE)
        return
    conn.sendall(_head(b"200 OK", b"text/event-stream"))
    payload = b"".join(_answer_events(server, n, max_tokens, chat))
    if server.mode == "drip":
        for start in range(0, len(payload), 8):
            conn.sendall(payload[start:start + 8])
            time.sleep(0.002)
        return
    conn.sendall(payload)


def _serve(server: HostileServer, conn: socket.socket) -> None:
    with conn:
        try:
            got = read_request(conn)
            if got is None:
                return
            path, body = got
            if path == "/v1/models":
                ids = f'{{"object":"list","data":[{{"id":{_model_id(server.mode)}}}]}}'
                conn.sendall(_json_reply(ids.encode()))
            elif path == "/props":
                props = (f'{{"default_generation_settings":{{"n_ctx":8192}},'
                         f'"model_path":"{HOSTILE}{SURROGATE_ESCAPE}","build_info":"{HOSTILE}"}}')
                conn.sendall(_json_reply(props.encode()))
            elif path in ("/v1/completions", "/v1/chat/completions"):
                _completion(server, conn, body, path.endswith("chat/completions"))
            else:
                conn.sendall(_head(b"404 " + RAW_HOSTILE.replace(b"\x00", b"")[:30],
                                   b"text/html", b"Content-Length: %d\r\n" % len(RAW_HOSTILE))
                             + RAW_HOSTILE)
        except OSError:
            return


@contextmanager
def hostile_server(mode: Mode) -> Iterator[HostileServer]:
    server = HostileServer("", mode)

    def accept(conn: socket.socket) -> None:
        threading.Thread(target=_serve, args=(server, conn), daemon=True).start()

    with accepting(accept, backlog=256) as server.url:
        yield server
