"""The latency model: when each token of one request is due, on an absolute schedule.

Due times are computed from the request's start, never from "now + delay", so sleep
overshoot does not accumulate: measured TTFT and ITL medians match the configured ones.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable


class TokenClock:
    """Token ``i`` is due at ``start + ttft + sum(steps before i) + jitter_i``.

    ``step`` is asked once per emitted token, so a continuous-batching slowdown follows the
    number of requests generating at that moment. Jitter offsets do not accumulate.
    """

    def __init__(
        self,
        *,
        start: float,
        ttft_s: float,
        jitter_s: float,
        rng: random.Random | None,
        step: Callable[[], float],
    ) -> None:
        self._start = start
        self._base = start + ttft_s
        self._jitter_s = jitter_s
        self._rng = rng if jitter_s > 0 else None
        self._step = step
        self._due = self._jittered(self._base)

    def _jittered(self, base: float) -> float:
        if self._rng is None:
            return base
        return max(self._start, base + self._rng.uniform(-self._jitter_s, self._jitter_s))

    def due(self) -> float:
        """When the current token is due (loop time, seconds)."""
        return self._due

    def advance(self) -> None:
        """Move on to the next token."""
        self._base += self._step()
        self._due = self._jittered(self._base)


async def sleep_until(due: float) -> None:
    """Sleep until loop time ``due``; return at once when it is already past."""
    delay = due - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)
