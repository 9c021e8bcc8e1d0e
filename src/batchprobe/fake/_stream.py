"""Writing one SSE reply on the token schedule, with the stream-level fault modes."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

from batchprobe.fake._answer import Answer
from batchprobe.fake._clock import TokenClock
from batchprobe.fake._encode import MALFORMED, Encoder
from batchprobe.fake._progress import Progress

StreamFault = Literal[
    "malformed_sse", "truncated_stream", "buffered", "huge_event", "drop_deltas", "cut_stream"
]
_STREAM_FAULTS: dict[str, StreamFault] = {
    "malformed_sse": "malformed_sse",
    "truncated_stream": "truncated_stream",
    "drop_deltas": "drop_deltas",
    "cut_stream": "cut_stream",
    "buffered": "buffered",
    "huge_event": "huge_event",
}
# The one event the huge_event fault sends mid-stream: a single 50 MB data line.
HUGE_EVENT_BYTES = 50 * 1000 * 1000
_HUGE_WRITE = 1 << 20


def huge_text_event(size: int = HUGE_EVENT_BYTES) -> tuple[bytes, ...]:
    """One valid completion event of about ``size`` bytes, in write-sized parts."""
    head = b'data: {"choices":[{"index":0,"text":"'
    tail = b'","logprobs":null,"finish_reason":null}]}\n\n'
    body = size - len(head) - len(tail)
    block = b"x" * _HUGE_WRITE
    parts = [block] * (body // _HUGE_WRITE) + [b"x" * (body % _HUGE_WRITE)]
    return (head, *parts, tail)

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def stream_fault(fault: str) -> StreamFault | None:
    """The stream-level fault named ``fault``, or None for any other mode."""
    return _STREAM_FAULTS.get(fault)


@dataclass(frozen=True)
class StreamPlan:
    answer: Answer
    clock: TokenClock
    encoder: Encoder
    tail: Callable[[Answer], tuple[bytes, ...]]
    """Sent after the last token of the answer as it ended: the usage chunk when asked
    for, then ``[DONE]``."""
    progress: Progress
    fault: StreamFault | None = None
    close_after: bool = False
    """Close the connection once the reply is written (``close_after_stream``)."""
    tokens_per_delta: int = 1
    """Tokens whose text one delta carries (the first token alone); ``drop_deltas`` sends
    only the last token's of each (at least every other token dropped)."""


async def write_stream(
    request: web.Request, plan: StreamPlan, headers: dict[str, str]
) -> web.StreamResponse:
    """Stream ``plan`` as SSE; a client that hangs up just ends the reply."""
    response = web.StreamResponse(headers={**_SSE_HEADERS, **headers})
    try:
        await response.prepare(request)
        if await _emit(response, plan):
            corked = plan.close_after and _cork(request.transport)
            await response.write_eof()
            if plan.close_after and request.transport is not None:
                _close_unannounced(request.transport, corked)
        elif request.transport is not None:
            # truncated_stream: drop the connection mid-reply, no terminating chunk.
            request.transport.close()
    except ConnectionError:
        # The client went away (or stopped reading a runaway reply): nobody to tell.
        plan.progress.gone()
    return response


def _cork(transport: asyncio.BaseTransport | None) -> bool:
    """Hold the reply's last bytes back (TCP_CORK, Linux) so that the FIN leaves with them."""
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None or not hasattr(socket, "TCP_CORK"):
        return False
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    return True


def _close_unannounced(transport: asyncio.BaseTransport, corked: bool) -> None:
    """Close as llama-server does after a stream: at once, with no header to say so, and
    without reading the next request (left unread, it makes the close a reset).

    llama-server's FIN follows its last bytes at once. Here the corked last bytes and the FIN
    leave together, so no client reads the reply's end before the close: one that could would
    race it, its next request and the FIN crossing now and then on a loaded machine.
    """
    if isinstance(transport, asyncio.ReadTransport):
        transport.pause_reading()
    if corked and isinstance(transport, asyncio.WriteTransport) and transport.can_write_eof():
        transport.write_eof()  # shutdown(SHUT_WR): the FIN, which flushes the corked bytes
    asyncio.get_running_loop().call_soon(transport.close)


async def _emit(response: web.StreamResponse, plan: StreamPlan) -> bool:
    """Write every chunk when it is due; False when the stream was cut short on purpose."""
    loop = asyncio.get_running_loop()
    answer, clock, fault, progress = plan.answer, plan.clock, plan.fault, plan.progress
    count = len(answer.texts)
    malformed_at = count // 2 if fault == "malformed_sse" else -1
    huge_at = count // 2 if fault == "huge_event" else -1
    cut_after = max(1, count // 2) if fault == "truncated_stream" else -1
    # cut_stream: vllm-mlx 0.3-0.4's absolute timeout ends a live stream cleanly half-way,
    # with no finish_reason and no [DONE].
    cut_at = max(1, count // 2) if fault == "cut_stream" else -1
    # drop_deltas: vllm-mlx's --stream-interval N sends only every Nth token's text.
    dropping = fault == "drop_deltas"
    interval = max(2, plan.tokens_per_delta) if dropping else plan.tokens_per_delta
    sent = 0  # the first token no delta has carried yet
    # Chunks due at the same moment go out in one write: with zero latency a whole stream
    # is one syscall, so the fake server stays far cheaper than the client it measures.
    pending: list[bytes] = [] if count else [plan.encoder.empty_chunk(answer.finish_reason)]
    index = 0
    while index < len(answer.texts):
        if index:
            clock.advance()
        if progress.wedged:
            await response.write(b"".join(pending))
            await asyncio.Event().wait()  # abort_wedge: no token comes any more
        delay = clock.due() - loop.time()
        if delay > 0:
            if pending and fault != "buffered":
                await response.write(b"".join(pending))
                pending.clear()
            await asyncio.sleep(delay)
        answer = progress.revise(answer, index)
        if index >= len(answer.texts):
            # The early trigger ended the reply here, after a chunk that did not say so.
            if progress.cut:
                progress.finish()
                await response.write(b"".join(pending))
                return False
            if sent < index and not dropping:
                # The coalesced tokens not yet sent end the reply, with its finish_reason.
                pending.append(plan.encoder.tokens_chunk(answer, sent, index))
            else:
                pending.append(plan.encoder.empty_chunk(answer.finish_reason))
            break
        if index == malformed_at:
            pending.append(MALFORMED)
        if index == huge_at:
            await response.write(b"".join(pending))
            pending.clear()
            for part in huge_text_event():
                await response.write(part)  # drains: a client that stops reading stops it
        if index % interval == 0 or index + 1 in (len(answer.texts), cut_after, cut_at):
            # A delta ends here: the tokens since the last one (dropping: this one's only).
            pending.append(plan.encoder.tokens_chunk(answer, index if dropping else sent, index + 1))
            sent = index + 1
        progress.token()
        if index == 0 and fault != "buffered":
            # The first token leaves alone, and other streams due now send theirs before
            # this one's burst: with zero ITL, TTFT stays what was injected.
            await response.write(b"".join(pending))
            pending.clear()
            await asyncio.sleep(0)
        if index + 1 == cut_after:
            progress.finish()
            await response.write(b"".join(pending))
            return False
        if index + 1 == cut_at and cut_at < len(answer.texts):
            progress.finish()
            await response.write(b"".join(pending))
            return True  # a clean end of the body: no tail, so no usage and no [DONE]
        index += 1
    pending.extend(plan.tail(answer))
    # Before the last write, not after: a client that sends its next request on reading
    # [DONE] must not find this one still counted in flight.
    progress.finish()
    await response.write(b"".join(pending))
    return True
