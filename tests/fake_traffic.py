"""Raw-aiohttp traffic reproducing each wave shape of the shapes contract, for fake-server tests.

Each wave builds its own items (own sessions, own prompts) and returns one ``Reply`` per
request, keyed by a name; the serial arm sends a wave's bodies one at a time. The waves are
the wire shapes the probe's shapes send (see the README's fake-server section), so the
trigger tests show each trigger firing in its own wave and in no other.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from batchprobe.workload.haystack import filler_lines
from batchprobe.workload.needle import needle_line

Body = dict[str, Any]
RUN = "t"


@dataclass
class Reply:
    """One streamed reply: HTTP status, the token pieces, the finish reason."""

    status: int
    pieces: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    done: bool = False
    cut: bool = False

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def same_as(self, other: Reply) -> bool:
        mine = (self.status, self.text, self.finish_reason, self.cut)
        return mine == (other.status, other.text, other.finish_reason, other.cut)


def counting(session: int, start: int, max_tokens: int, **extra: Any) -> Body:
    """The decode workload's completion-style counting prompt."""
    numbers = ", ".join(str(n) for n in range(start, start + 4))
    prompt = f"[run {RUN} session {session}] Counting from {start}: {numbers},"
    return {"prompt": prompt, "max_tokens": max_tokens, "stream": True, **extra}


def expected_count(body: Body) -> str:
    """What a sane greedy model continues a ``counting`` body with."""
    last = int(body["prompt"].rstrip(",").split(", ")[-1])
    return "".join(f" {n}," for n in range(last + 1, last + 1 + body["max_tokens"]))


def recall(session: int, code: str, chars: int = 2000, *, seed: int = 0, head: str = "") -> Body:
    """A recall prompt of about ``chars`` characters, its needle at a seeded depth."""
    rng = random.Random(f"{seed}:{session}")
    lines = filler_lines(rng, chars)
    lines.insert(len(lines) // 2, needle_line(code))
    header = head or f"[run {RUN} session {session}] Server log excerpt:\n"
    prompt = header + "\n".join(lines) + "\n\nThe ACCESS_CODE line again:\nACCESS_CODE="
    return {"prompt": prompt, "max_tokens": 8, "stream": True}


async def send(
    session: aiohttp.ClientSession,
    url: str,
    body: Body,
    on_piece: Callable[[int], None] | None = None,
) -> Reply:
    """POST one streaming completion; ``on_piece`` hears the count of pieces so far."""
    async with session.post(url + "/v1/completions", json=body) as response:
        reply = Reply(response.status)
        if response.status != 200:
            return reply
        try:
            async for raw in response.content:
                _read_line(reply, raw.decode().strip(), on_piece)
        except aiohttp.ClientPayloadError:
            reply.cut = True  # the server dropped the connection mid-reply
        return reply


def _read_line(reply: Reply, line: str, on_piece: Callable[[int], None] | None) -> None:
    if not line.startswith("data: "):
        return
    payload = line[len("data: ") :]
    if payload == "[DONE]":
        reply.done = True
        return
    choice = json.loads(payload)["choices"][0]
    if choice["text"]:
        reply.pieces.append(choice["text"])
        if on_piece is not None:
            on_piece(len(reply.pieces))
    reply.finish_reason = choice["finish_reason"] or reply.finish_reason


Wave = Callable[[aiohttp.ClientSession, str], Awaitable[dict[str, Reply]]]


async def together(
    session: aiohttp.ClientSession, url: str, bodies: dict[str, Body]
) -> dict[str, Reply]:
    replies = await asyncio.gather(*(send(session, url, body) for body in bodies.values()))
    return dict(zip(bodies, replies))


def burst_bodies() -> tuple[dict[str, Body], dict[str, Body]]:
    recalls = {f"burst-r{i}": recall(100 + i, f"{i + 1}00000{i}") for i in range(4)}
    decodes = {f"burst-d{i}": counting(110 + i, 1000 + 100 * i, 12) for i in range(4)}
    return recalls, decodes


async def burst_wave(session: aiohttp.ClientSession, url: str) -> dict[str, Reply]:
    recalls, decodes = burst_bodies()
    return {**await together(session, url, recalls), **await together(session, url, decodes)}


def join_bodies() -> tuple[dict[str, Body], dict[str, Body]]:
    # Long enough that the running ones are still decoding well after their k-th token:
    # the joiners' new connections take a while on a loaded machine.
    running = {f"join-run{i}": counting(200 + i, 2000 + 100 * i, 48) for i in range(3)}
    joiners = {f"join-new{i}": counting(210 + i, 2500 + 100 * i, 48) for i in range(3)}
    return running, joiners


async def join_wave(
    session: aiohttp.ClientSession, url: str, *, k: int = 4, joiners: dict[str, Body] | None = None
) -> dict[str, Reply]:
    """Some start; the rest are sent once each running one has streamed ``k`` pieces."""
    running, new = join_bodies()
    new = joiners if joiners is not None else new
    progressed = {name: asyncio.Event() for name in running}

    def watcher(name: str) -> Callable[[int], None]:
        def on_piece(count: int) -> None:
            if count >= k:
                progressed[name].set()

        return on_piece

    first = {
        name: asyncio.ensure_future(send(session, url, body, watcher(name)))
        for name, body in running.items()
    }
    await asyncio.gather(*(event.wait() for event in progressed.values()))
    later = await together(session, url, new)
    return {**{name: await task for name, task in first.items()}, **later}


def ragged_bodies() -> dict[str, Body]:
    sizes = [300, 1200, 2400, 4800]  # 16x from the shortest to the longest
    return {f"ragged{i}": recall(300 + i, f"{i + 1}30000{i}", size) for i, size in enumerate(sizes)}


async def ragged_wave(session: aiohttp.ClientSession, url: str) -> dict[str, Reply]:
    return await together(session, url, ragged_bodies())


def early_bodies() -> dict[str, Body]:
    lengths = [2, 16, 24, 32]  # 16x from the shortest to the longest
    return {f"early{i}": counting(400 + i, 4000 + 100 * i, n) for i, n in enumerate(lengths)}


async def early_wave(session: aiohttp.ClientSession, url: str) -> dict[str, Reply]:
    return await together(session, url, early_bodies())


def repeat_bodies() -> dict[str, Body]:
    filler = "\n".join(filler_lines(random.Random("shared"), 3000))
    shared = f"[run {RUN} shared] Server log excerpt:\n{filler}\n"
    tail = "\n\nThe ACCESS_CODE line again:\nACCESS_CODE="
    twin_a = shared + needle_line("5000002") + tail  # the needle in the short suffix
    twin_b = shared + needle_line("5000003") + tail
    return {
        "repeat-twice": recall(501, "5000004"),
        "repeat-prefix-a": {"prompt": twin_a, "max_tokens": 8, "stream": True},
        "repeat-prefix-b": {"prompt": twin_b, "max_tokens": 8, "stream": True},
        "repeat-again": recall(502, "5000005"),
        "repeat-other": recall(503, "5000006"),
    }


async def repeat_wave(
    session: aiohttp.ClientSession, url: str, *, stagger_s: float = 0.03
) -> dict[str, Reply]:
    """One item twice at once, a shared-prefix pair, and one re-sent after it finished
    while the rest (sent ``stagger_s`` after it, so they finish later) are in flight."""
    bodies = repeat_bodies()
    first = asyncio.ensure_future(send(session, url, bodies["repeat-again"]))
    await asyncio.sleep(stagger_s)
    rest = {name: body for name, body in bodies.items() if name != "repeat-again"}
    rest_task = asyncio.ensure_future(
        asyncio.gather(
            together(session, url, rest),
            send(session, url, bodies["repeat-twice"]),
        )
    )
    again = await first
    resent = await send(session, url, bodies["repeat-again"])
    replies, twice = await rest_task
    return {**replies, "repeat-twice-2": twice, "repeat-again": again, "repeat-again-2": resent}


def params_bodies(forced_id: int) -> dict[str, Body]:
    never = "\n\n"  # a stop string the count never contains: same length as the others
    return {
        "params-greedy": counting(600, 6000, 12, temperature=0.0),
        "params-sampled": counting(601, 6100, 12, temperature=0.8, seed=7),
        "params-biased": counting(602, 6200, 12, temperature=0.0, logit_bias={forced_id: 100}),
        "params-penalty": counting(603, 6300, 12, temperature=0.0, presence_penalty=1.0),
        "params-stop": counting(604, 6400, 12, temperature=0.0, stop=[never, "\n"]),
    }


async def params_wave(session: aiohttp.ClientSession, url: str) -> dict[str, Reply]:
    return await together(session, url, params_bodies(FORCED_ID))


# A vocabulary word's id (the fake's VOCAB ids are fixed); the params test checks it.
FORCED_ID = 7

WAVES: dict[str, Wave] = {
    "burst": burst_wave,
    "join": join_wave,
    "ragged": ragged_wave,
    "early": early_wave,
    "repeat": repeat_wave,
    "params": params_wave,
}


def all_bodies() -> dict[str, Body]:
    """Every wave's bodies by name (the repeat wave's re-sends share their body's name)."""
    recalls, decodes = burst_bodies()
    running, joiners = join_bodies()
    return {
        **recalls,
        **decodes,
        **running,
        **joiners,
        **ragged_bodies(),
        **early_bodies(),
        **repeat_bodies(),
        **params_bodies(FORCED_ID),
    }


async def serial(
    session: aiohttp.ClientSession, url: str, bodies: dict[str, Body]
) -> dict[str, Reply]:
    """The serial arm: one request at a time, nothing else in flight."""
    return {name: await send(session, url, body) for name, body in bodies.items()}


def reference_name(name: str) -> str:
    """The body a reply's serial reference was sent with (``x-2`` re-sends ``x``)."""
    return name.removesuffix("-2")
