"""The mlx-lm exact-hit patch on a stand-in of ``mlx_lm.models.cache`` (the real engine runs
it in tests/e2e/test_corpus_cases.py: the patched version is clean, the broken one dies)."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import pytest

from batchprobe.engines import get_engine
from batchprobe.patches import get_patch
from batchprobe.patches import mlx_lm_exact_cache_hit as patch


class _Cache:
    def __init__(self, tokens: int, trimmable: bool = True) -> None:
        self.tokens, self.trimmable = tokens, trimmable


def _stand_in(stored: dict[tuple[int, ...], _Cache]) -> ModuleType:
    """LRUPromptCache as mlx-lm 0.31.2/0.32.2 have it: an exact hit leaves no token."""
    module = ModuleType(patch.TARGET_MODULE)

    class LRUPromptCache:
        def fetch_nearest_cache(self, model: Any, tokens: list[int]) -> tuple[Any, list[int]]:
            hit = stored.get(tuple(tokens))
            if hit is not None:
                return _Cache(hit.tokens, hit.trimmable), []  # a copy, as mlx-lm deep-copies
            return None, tokens

    def trim(cache: list[Any] | _Cache, n: int) -> None:
        assert isinstance(cache, _Cache)
        cache.tokens -= n

    module.LRUPromptCache = LRUPromptCache  # type: ignore[attr-defined]
    module.can_trim_prompt_cache = lambda cache: cache.trimmable  # type: ignore[attr-defined]
    module.trim_prompt_cache = trim  # type: ignore[attr-defined]
    return module


def test_an_exact_hit_leaves_its_last_token_to_process(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = {(1, 2, 3): _Cache(3), (7, 8): _Cache(2, trimmable=False)}
    module = _stand_in(stored)
    monkeypatch.setitem(sys.modules, patch.TARGET_MODULE, module)
    assert patch.apply() is True and patch.apply() is True  # a second call changes nothing
    cache = module.LRUPromptCache()  # type: ignore[attr-defined]
    hit, rest = cache.fetch_nearest_cache("m", [1, 2, 3])
    assert (hit.tokens, rest) == (2, [3])
    assert stored[(1, 2, 3)].tokens == 3  # the stored entry is untouched
    # A cache that cannot be trimmed (a wrapped sliding window): the prompt from scratch.
    assert cache.fetch_nearest_cache("m", [7, 8]) == (None, [7, 8])
    assert cache.fetch_nearest_cache("m", [5]) == (None, [5])  # a miss is left alone


def test_without_the_prompt_cache_class_the_patch_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, patch.TARGET_MODULE, ModuleType(patch.TARGET_MODULE))
    assert patch.apply() is False
    monkeypatch.setitem(sys.modules, patch.TARGET_MODULE, None)  # mlx-lm not importable
    assert patch.apply() is False


def test_the_patch_answers_the_known_issue() -> None:
    info = get_patch("mlx-lm-exact-cache-hit")
    issue = next(
        i for i in get_engine("mlx-lm").known_issues if i.issue_id == info.answers_issue_id
    )
    assert issue.patch == info.name and info.engine == "mlx-lm"
