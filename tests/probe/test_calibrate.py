"""Haystack calibration trusts a server's token counts only when they are plausible."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from aioserver import Handler, serve
from batchprobe.client import OpenAIClient, run
from batchprobe.results.models import RunConfig
from batchprobe.send.calibrate import calibrate_chars_per_token
from batchprobe.send.items import build_plans
from batchprobe.workload.haystack import DEFAULT_CHARS_PER_TOKEN


def _usage_server(prompt_tokens: Any) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/tokenize":
            return web.Response(status=404)
        body = {
            "choices": [{"index": 0, "text": " x", "finish_reason": "length"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1},
        }
        return web.Response(text=json.dumps(body), content_type="application/json")

    return handler


def _calibrate(prompt_tokens: Any) -> tuple[float | None, str | None]:
    async def go() -> tuple[float | None, str | None]:
        async with serve(_usage_server(prompt_tokens)) as url, OpenAIClient(url) as client:
            return await calibrate_chars_per_token(client, "run1", "completion")

    return run(go())


@pytest.mark.parametrize("absurd", [-5, 1, 10**9])
def test_absurd_usage_falls_back_to_the_estimate_with_a_warning(absurd: int) -> None:
    cpt, warning = _calibrate(absurd)
    assert cpt is None
    assert warning is not None and f"counted {absurd} tokens" in warning
    assert "not trusted" in warning


def test_plausible_usage_is_used() -> None:
    cpt, warning = _calibrate(400)
    assert warning is None and cpt is not None and 2.0 < cpt < 5.0


def test_negative_usage_keeps_the_haystack() -> None:
    """A negative count used to remove the haystack (a 106-character recall prompt)."""

    async def go() -> tuple[list[Any], str | None]:
        cfg = RunConfig(base_url="http://x", workloads=["recall"], sessions=2, haystack_tokens=300,
                        shapes=["burst"])
        async with serve(_usage_server(-7)) as url, OpenAIClient(url) as client:
            plans = await build_plans(cfg, "run1", client, {})
        return plans.items, (plans.warnings or [None])[0]

    items, warning = run(go())
    assert warning is not None and "-7" in warning
    expected = 300 * DEFAULT_CHARS_PER_TOKEN
    assert all(0.8 * expected < len(item.prompt) < 1.5 * expected for item in items)


def test_a_character_tokenizer_with_a_bos_is_plausible() -> None:
    """One token a character, plus the BOS the server counts (the tiny task model): 1.0, not
    the fallback that would triple its haystacks."""
    cpt, _ = _calibrate(400)  # the sample's length, read back from a plausible count
    assert cpt is not None
    sample_chars = round(cpt * 400)
    cpt, warning = _calibrate(sample_chars + 1)
    assert warning is None and cpt is not None and 0.99 < cpt < 1.0
    cpt, warning = _calibrate(sample_chars + 40)  # more than any server adds: not trusted
    assert cpt is None and warning is not None and "not trusted" in warning
