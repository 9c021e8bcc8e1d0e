"""The fake server's client-hardening faults: drop after read, ignored max_tokens, one huge
event (the probe's side of them is in tests/integration/test_fake_hardening.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from batchprobe.cli.fake_server import fake_server
from batchprobe.fake import FAULT_MODES, FakeServerConfig, FakeServerThread

HOSTILE = ("drop_after_read", "ignore_max_tokens", "huge_event")


def _server(fault: str, **kw: Any) -> FakeServerThread:
    return FakeServerThread(FakeServerConfig(ttft_ms=20.0, itl_ms=0.0, fault=fault, **kw))


async def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes] | str:
    async with aiohttp.ClientSession() as session:
        try:
            async with session.post(url + "/v1/completions", json=body) as resp:
                return resp.status, await resp.read()
        except aiohttp.ServerDisconnectedError:
            return "disconnected"


def test_the_faults_are_cli_choices() -> None:
    fault_option = next(p for p in fake_server.params if p.name == "fault")
    for fault in HOSTILE:
        assert fault in FAULT_MODES and fault in fault_option.type.choices  # type: ignore[attr-defined]


def test_drop_after_read_closes_concurrent_requests_without_a_reply() -> None:
    body = {"prompt": "count with me", "max_tokens": 4, "stream": True}

    async def go(url: str) -> list[Any]:
        return list(await asyncio.gather(*(_post(url, body) for _ in range(3))))

    with _server("drop_after_read", fault_when="concurrent") as server:
        replies = asyncio.run(go(server.base_url))
        lone = asyncio.run(_post(server.base_url, body))
    assert replies == ["disconnected"] * 3
    assert isinstance(lone, tuple) and lone[0] == 200 and b"[DONE]" in lone[1]


@pytest.mark.parametrize("stream", [False, True])
def test_ignore_max_tokens_answers_far_beyond_it(stream: bool) -> None:
    body = {"prompt": "count with me", "max_tokens": 4, "stream": stream}
    with _server("ignore_max_tokens") as server:
        reply = asyncio.run(_post(server.base_url, body))
    assert isinstance(reply, tuple) and reply[0] == 200
    raw = reply[1]
    if stream:
        assert raw.count(b'"text":') >= 1 << 12
    else:
        assert b'"completion_tokens":4096' in raw


def test_huge_event_sends_one_50_mb_line() -> None:
    body = {"prompt": "count with me", "max_tokens": 4, "stream": True}
    with _server("huge_event") as server:
        reply = asyncio.run(_post(server.base_url, body))
    assert isinstance(reply, tuple) and reply[0] == 200
    longest = max(len(line) for line in reply[1].split(b"\n"))
    assert longest >= 50_000_000 - 100
