"""Shrinking a case while its failure persists: fewer requests, shorter ones, simpler timing,
fewer parameters.

Every candidate is replayed ``tries`` times and judged by the run's judge; it is kept when
the failure comes back at least at the acceptable rate (half the rate the whole wave showed,
at least once). The requests are reduced by delta debugging (Zeller's ddmin over the
requests other than the failing one, which every candidate keeps); the rest are one pass
each, request by request, from the last sent. A reducer from PyPI (picire, Shrink Ray) would
have to be driven through an interestingness command per candidate; the candidates here
are replays in one event loop against one server, so the loop is written out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from batchprobe.repro.case import ReproCase, ReproRequest
from batchprobe.results.items import SamplingParams

# A recall prompt's closing lines (the question, or the key to complete) stay whole, as does
# a haystack of fewer filler lines than this.
_ENDING_LINES = 4
_FEWEST_FILLER = 4

Trial = Callable[[list[ReproRequest]], Awaitable[int]]
"""Replays a candidate ``tries`` times; how many times the failure came back."""


@dataclass
class Step:
    """One kept reduction, for the report's shrink history."""

    what: str
    requests: int
    failed: int
    tries: int


@dataclass
class Shrinker:
    case: ReproCase
    trial: Trial
    tries: int
    needed: int
    deadline: float
    progress: Callable[[str], None]
    history: list[Step] = field(default_factory=list)
    candidates: int = 0

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline

    async def fails(self, requests: list[ReproRequest], what: str) -> bool:
        """Whether ``requests`` still show the failure at the acceptable rate."""
        if self.out_of_time():
            return False
        self.candidates += 1
        failed = await self.trial(requests)
        kept = failed >= self.needed
        self.progress(f"candidate {self.candidates}: {what}: {len(requests)} request(s), "
                      f"failed {failed}/{self.tries}" + (" (kept)" if kept else ""))
        if kept:
            self.history.append(Step(what, len(requests), failed, self.tries))
        return kept


def _target(case: ReproCase, requests: Sequence[ReproRequest]) -> list[ReproRequest]:
    return [r for r in requests if r.session == case.kept.session]


def _chunks(items: list[ReproRequest], n: int) -> list[list[ReproRequest]]:
    size = math.ceil(len(items) / n)
    return [items[i:i + size] for i in range(0, len(items), size)]


def _ordered(case: ReproCase, requests: list[ReproRequest]) -> list[ReproRequest]:
    """In the order they were sent (offsets), as the case lists them."""
    order = {(r.session, r.copy_index): i for i, r in enumerate(case.requests)}
    return sorted(requests, key=lambda r: order.get((r.session, r.copy_index), 0))


async def drop_requests(s: Shrinker, requests: list[ReproRequest]) -> list[ReproRequest]:
    """ddmin over every request but the failing one's (its first send and any re-send)."""
    keep = _target(s.case, requests)
    rest = [r for r in requests if r not in keep]
    if await s.fails(_ordered(s.case, keep), "the failing request alone"):
        return keep
    n = 2
    while len(rest) >= 2 and not s.out_of_time():
        chunks = _chunks(rest, n)
        reduced = False
        for i, chunk in enumerate(chunks):
            if len(chunks) > 1 and await s.fails(_ordered(s.case, keep + chunk),
                                                 f"drop all but part {i + 1}/{len(chunks)}"):
                rest, n, reduced = chunk, 2, True
                break
        if not reduced:
            for i in range(len(chunks)):
                others = [r for j, c in enumerate(chunks) if j != i for r in c]
                if await s.fails(_ordered(s.case, keep + others),
                                 f"drop part {i + 1}/{len(chunks)}"):
                    rest, n, reduced = others, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(rest):
                break
            n = min(len(rest), 2 * n)
    return _ordered(s.case, keep + rest)


def _with(requests: list[ReproRequest], index: int, request: ReproRequest) -> list[ReproRequest]:
    return [request if i == index else r for i, r in enumerate(requests)]


async def _each(s: Shrinker, requests: list[ReproRequest], what: str,
                change: Callable[[ReproRequest], ReproRequest | None]) -> list[ReproRequest]:
    """Try ``change`` on each request in turn, the last sent first; keep what still fails."""
    for index in reversed(range(len(requests))):
        changed = change(requests[index])
        if changed is None or changed == requests[index]:
            continue
        candidate = _with(requests, index, changed)
        if await s.fails(candidate, f"{what} of session {changed.session}"):
            requests = candidate
    return requests


def _edited(r: ReproRequest, **update: object) -> ReproRequest:
    """``r`` with its item (and a later turn's plan) changed alike."""
    planned = r.planned.model_copy(update=update) if r.planned is not None else None
    return r.model_copy(update={"item": r.item.model_copy(update=update), "planned": planned})


def _shorter(r: ReproRequest) -> ReproRequest | None:
    """Half its max_tokens, never under what its own answer needs (a needle's code, a few
    numbers of a count)."""
    floor = 16 if r.item.workload == "recall" else 8
    if r.item.max_tokens <= floor:
        return None
    return _edited(r, max_tokens=max(floor, r.item.max_tokens // 2))


def _trimmer(case: ReproCase) -> Callable[[ReproRequest], ReproRequest | None]:
    """Half a haystack's filler lines gone: its first line (the run and session), every
    line holding a planted needle, and its closing question kept. A conversation turn's
    prompt, which holds the turns before it, is left whole."""
    codes = list(case.planted.codes.values())

    def trimmed(r: ReproRequest) -> ReproRequest | None:
        if r.item.workload != "recall" or r.item.turn is not None:
            return None
        lines = r.item.prompt.split("\n")
        kept = {0, *range(len(lines) - _ENDING_LINES, len(lines))}
        kept |= {i for i, line in enumerate(lines) if any(c in line for c in codes)}
        filler = [i for i in range(len(lines)) if i not in kept]
        if len(filler) < _FEWEST_FILLER:
            return None
        dropped = set(filler[1::2])
        prompt = "\n".join(line for i, line in enumerate(lines) if i not in dropped)
        return _edited(r, prompt=prompt)

    return trimmed


def _plain(r: ReproRequest) -> ReproRequest | None:
    """Greedy with no other parameter (a failing row keeps its own: they may be the bug)."""
    if r.item.params == SamplingParams():
        return None
    return _edited(r, params=SamplingParams())


async def shrink(s: Shrinker) -> list[ReproRequest]:
    """The smallest case that still fails: requests dropped, then shortened (prompts, then
    max_tokens, again while either gets shorter), then sent all at once (no offsets, phases
    or join triggers), then stripped of
    parameters (the failing request keeps its own)."""
    requests = await drop_requests(s, list(s.case.requests))
    trimmed = _trimmer(s.case)
    while True:
        shorter = await _each(s, requests, "half its haystack", trimmed)
        shorter = await _each(s, shorter, "half the max_tokens", _shorter)
        if shorter == requests:
            break
        requests = shorter
    at_once = [r.model_copy(update={"offset_s": 0.0, "phase": 0, "after": None, "delay_s": 0.0})
               for r in requests]
    if at_once != requests and await s.fails(at_once, "all sent at once"):
        requests = at_once
    kept = s.case.kept.session
    return await _each(s, requests, "no sampling parameters",
                       lambda r: None if r.session == kept else _plain(r))
