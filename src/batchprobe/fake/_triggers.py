"""The shape triggers' situations: pure predicates over the requests sharing the server.

Each names one traffic shape's situation and nothing wider, so a fault it gates is caught
by that shape's wave and by no other (the probe's waves, one at a time, are built so; see
the README's fake-server section).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from batchprobe.fake._requests import GenRequest

# Prompts in flight differing by more than this factor in length are ragged.
RAGGED_SPAN = 2.0
# A prompt sharing at least this fraction of its characters as a prefix is a repeat.
SHARED_PREFIX = 0.8


def ragged(lengths: Collection[int]) -> bool:
    """The prompt lengths in flight span more than ``RAGGED_SPAN`` x."""
    return bool(lengths) and max(lengths) > RAGGED_SPAN * max(1, min(lengths))


# Prompts are filed under their first HEAD characters: a prompt whose shared prefix must be
# at least HEAD long can only repeat a prompt filed under its own head.
HEAD = 32


def prefix_needed(prompt: str) -> int:
    """How many leading characters another prompt must share with ``prompt``."""
    return math.ceil(len(prompt) * SHARED_PREFIX)


def repeated(gen: GenRequest, peers: Sequence[GenRequest]) -> bool:
    """``gen``'s prompt equals, or shares ``SHARED_PREFIX`` of itself as a prefix with,
    the prompt of one of ``peers``.

    One ``startswith`` per peer: a C comparison that stops at the first differing
    character, so unrelated prompts cost next to nothing however long they are.
    """
    prompt = gen.prompt
    if not prompt:
        return any(not peer.prompt for peer in peers)
    need = prefix_needed(prompt)
    head = prompt[:need]
    return any(len(peer.prompt) >= need and peer.prompt.startswith(head) for peer in peers)


def left_early(
    *,
    generated: int,
    first_tick: int | None,
    survivor_planned: int,
    survivor_generated: int,
    survivor_arrival_tick: int,
) -> bool:
    """Whether a request that left having ``generated`` tokens strands a survivor.

    It must have left first with fewer tokens than the survivor was to generate, while the
    survivor still had tokens left, and must not have been decoding yet when the survivor
    arrived: it came at the same time or later. A join wave's joiners outlive the requests
    that were running when they joined; that is a join, not an early finish.
    """
    if survivor_generated >= survivor_planned or generated >= survivor_planned:
        return False
    return first_tick is None or first_tick > survivor_arrival_tick
