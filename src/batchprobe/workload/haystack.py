"""Filler text: plausible server-log lines whose numbers can never look like a needle code."""

from __future__ import annotations

import random

_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN")
_PATHS = ("/api/items", "/api/users", "/api/orders", "/healthz", "/api/search", "/static/app.js")
_VERBS = ("served", "cached", "proxied", "validated", "queued")

DEFAULT_CHARS_PER_TOKEN = 3.2


def filler_line(rng: random.Random) -> str:
    # Every number here has fewer digits than a code, so scoring never mistakes filler for a needle.
    minute, second = rng.randrange(60), rng.randrange(60)
    worker, item, millis = rng.randrange(16), rng.randrange(10_000), rng.randrange(1_000)
    return (
        f"10:{minute:02d}:{second:02d} {rng.choice(_LEVELS)} worker-{worker} "
        f"{rng.choice(_VERBS)} {rng.choice(_PATHS)}/{item} in {millis}ms"
    )


def filler_lines(rng: random.Random, target_chars: int) -> list[str]:
    lines: list[str] = []
    total = 0
    while total < target_chars:
        line = filler_line(rng)
        lines.append(line)
        total += len(line) + 1
    return lines

