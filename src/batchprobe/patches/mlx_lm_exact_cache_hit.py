"""Runtime patch: mlx-lm's prompt cache, made safe for a prompt it holds whole.

mlx-lm's server stores each finished request's KV under its prompt plus its generated tokens.
A later prompt that is exactly such a key (a completions client continuing a text with its
whole completion, or a chat client re-sending a finished turn) is an exact hit:
``LRUPromptCache.fetch_nearest_cache`` returns the cache and no tokens left to process. The
server then hands the batch generator an empty prompt, and its generation thread dies:
``IndexError`` in ``insert_segments`` on 0.31.x (every later request hangs), ``ValueError:
Sequence N has an empty prompt`` on 0.32.x (every later request fails).

``apply`` wraps ``fetch_nearest_cache`` so an exact hit leaves the prompt's last token to
process, as the method's own "longer" branch already does: the copy it returns is trimmed by
one token, or, where the cache cannot be trimmed (a sliding window that wrapped), the prompt
is processed from scratch.

Loaded by file path inside the engine process (see ``_sitedir``): standard library only at
module level, mlx-lm only inside the functions.
"""

from __future__ import annotations

import functools
import importlib
import logging
from typing import Any

__all__ = ["COMPETING_PATCHES", "MARKER", "TARGET_MODULE", "apply"]

logger = logging.getLogger("batchprobe.patches.mlx_lm_exact_cache_hit")

TARGET_MODULE = "mlx_lm.models.cache"
MARKER = "_batchprobe_exact_hit"
COMPETING_PATCHES: tuple[tuple[str, str], ...] = ()


def apply() -> bool:
    """Wrap ``LRUPromptCache.fetch_nearest_cache``; True when the wrapper is in place."""
    try:
        cache_module = importlib.import_module(TARGET_MODULE)
    except ImportError:
        return False
    cls = getattr(cache_module, "LRUPromptCache", None)
    original = getattr(cls, "fetch_nearest_cache", None)
    can_trim = getattr(cache_module, "can_trim_prompt_cache", None)
    trim = getattr(cache_module, "trim_prompt_cache", None)
    if cls is None or original is None or can_trim is None or trim is None:
        logger.warning("mlx-lm has no LRUPromptCache.fetch_nearest_cache to patch")
        return False
    if getattr(original, MARKER, False):
        return True

    @functools.wraps(original)
    def fetch_nearest_cache(self: Any, model: Any, tokens: list[int]) -> tuple[Any, list[int]]:
        cache, rest = original(self, model, tokens)
        if cache is None or len(rest) > 0 or len(tokens) == 0:
            return cache, rest
        if can_trim(cache):
            trim(cache, 1)  # the original returned a copy: trimming it touches no stored entry
            return cache, tokens[-1:]
        return None, tokens

    setattr(fetch_nearest_cache, MARKER, True)
    cls.fetch_nearest_cache = fetch_nearest_cache
    logger.info("batchprobe patch mlx-lm-exact-cache-hit applied")
    return True
