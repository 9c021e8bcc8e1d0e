"""The fake server's KV pool (``kv_tokens``): what the requests in flight hold, in tokens.

A request holds its prompt's tokens and one more per token it generates, from when it is
admitted until its reply ends. Healthy, a request is admitted only once its whole need
(prompt and answer) fits beside what the others reserved, so a full pool queues and never
fails a request it took; one that could never fit is refused up front (HTTP 400).

The pool faults admit a request once its prompt fits (as an optimistic scheduler does) and
misbehave when a token finds the pool full:

- ``pool_error``: every running request ends with an error (what llama.cpp's unified pool
  does, #23652);
- ``preempt_repeat``: the youngest running request is preempted and, resumed, repeats its
  last tokens (vLLM #28787);
- ``oversize_hang``: a request larger than the pool waits for ever instead of a refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Literal

PoolCut = Literal["error", "repeat"]
# The tokens a preempted request repeats once it resumes (preempt_repeat).
REPEATED = 2


class KvPool:
    def __init__(self, size: int, fault: str) -> None:
        self.size = size
        self.fault = fault
        self.reserved = 0  # healthy: the whole needs of the admitted requests
        self.held: dict[int, int] = {}  # optimistic: tokens each admitted request holds
        self.preemptions = 0
        self.failures = 0  # requests ended by a full pool (pool_error)
        self._changed = asyncio.Condition()

    @property
    def optimistic(self) -> bool:
        return self.fault in ("pool_error", "preempt_repeat")

    @property
    def used(self) -> int:
        return sum(self.held.values()) if self.optimistic else self.reserved

    def refuses(self, need: int) -> bool:
        """Whether a request needing ``need`` tokens is refused up front (never fits)."""
        return need > self.size and self.fault != "oversize_hang"

    @contextlib.asynccontextmanager
    async def admit(self, seq: int, prompt: int, need: int) -> AsyncIterator[None]:
        """Hold the request's tokens while it runs: healthy, its whole ``need``; optimistic,
        its ``prompt`` and then each token ``grow`` adds."""
        first = prompt if self.optimistic else need
        async with self._changed:
            await self._changed.wait_for(lambda: self.used + first <= self.size)
            if self.optimistic:
                self.held[seq] = prompt
            else:
                self.reserved += need
        try:
            yield
        finally:
            async with self._changed:
                if self.optimistic:
                    self.held.pop(seq, None)
                else:
                    self.reserved -= need
                self._changed.notify_all()

    def grow(self, seq: int, running: Iterable[int]) -> dict[int, PoolCut]:
        """Request ``seq`` generated a token: the requests (among ``running``, by seq) the
        pool faults cut there, and how."""
        if not self.optimistic or seq not in self.held:
            return {}
        self.held[seq] += 1
        if sum(self.held.values()) <= self.size:
            return {}
        admitted = [s for s in running if s in self.held]
        if self.fault == "pool_error":
            self.failures += len(admitted)
            for s in admitted:
                self.held[s] = 0
            return dict.fromkeys(admitted, "error")
        youngest = max(admitted)
        self.preemptions += 1
        self.held[youngest] = 0  # its KV dropped; recomputed as it resumes
        return {youngest: "repeat"}
