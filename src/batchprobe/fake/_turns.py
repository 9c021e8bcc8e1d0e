"""What the conversation bug modes remember: the prompts answered, as a prefix cache holds them.

``stale_turn``: a prompt answered before (a re-send) that a longer answered prompt extends
(its conversation grew since) is answered as if it were that longest prompt, from the later
turn's cache. ``conversation_leak``: a prompt that extends an answered one (a later turn whose
earlier turn is cached) is answered with the code that another conversation's prompt (one that
is neither a prefix nor an extension of it) holds for the key this turn asks for.
"""

from __future__ import annotations

from collections import deque

from batchprobe.workload.needle import asked_code, asked_key, planted_code

# Prompts remembered at most, most recent last; the oldest are forgotten.
MEMORY = 512


class TurnMemory:
    def __init__(self) -> None:
        self._prompts: deque[str] = deque(maxlen=MEMORY)

    def remember(self, prompt: str) -> None:
        if prompt in self._prompts:
            self._prompts.remove(prompt)
        self._prompts.append(prompt)

    def grown(self, prompt: str) -> str | None:
        """The longest answered prompt that extends ``prompt``, if ``prompt`` was answered."""
        if prompt not in self._prompts:
            return None
        longer = [p for p in self._prompts if len(p) > len(prompt) and p.startswith(prompt)]
        return max(longer, key=len, default=None)

    def leaked_code(self, prompt: str) -> str | None:
        """Another conversation's code for the key ``prompt`` asks, if ``prompt`` continues
        an answered prompt; the most recently answered conversation's first."""
        if not any(len(p) < len(prompt) and prompt.startswith(p) for p in self._prompts):
            return None
        key, own = asked_key(prompt), asked_code(prompt)
        if key is None:
            return None
        for other in reversed(self._prompts):
            if other.startswith(prompt) or prompt.startswith(other):
                continue
            code = planted_code(other, key)
            if code is not None and code != own:
                return code
        return None
