"""The fake's streams damaged under batching (``drop_deltas``, ``cut_stream``) and its healthy
coalescing (``tokens_per_delta``), as batchprobe's own client records them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from batchprobe.client import Api, CompletionRequest, OpenAIClient, RequestRecord, run
from batchprobe.client.types import ErrorKind
from batchprobe.fake import FakeServerConfig, FakeServerThread

MAX_TOKENS = 24


def _request(index: int, api: Api = "completions", logprobs: int | None = None) -> CompletionRequest:
    return CompletionRequest(
        request_id=f"r{index}",
        api=api,
        prompt=f"Write a long story number {index}:",
        max_tokens=MAX_TOKENS,
        logprobs=logprobs,
        stream=True,
    )


async def _send(url: str, requests: list[CompletionRequest]) -> list[RequestRecord]:
    """The first request, then the others once its first chunk came back: the first one
    arrives alone and every other one while it decodes, however loaded the machine."""
    async with OpenAIClient(url) as client:
        client.model = "fake-model"
        streaming = asyncio.Event()
        first = asyncio.ensure_future(client.complete(requests[0], lambda _: streaming.set()))
        if len(requests) > 1:
            await streaming.wait()
        rest = await asyncio.gather(*(client.complete(r) for r in requests[1:]))
        return [await first, *rest]


def _alone_and_together(
    together: int = 3, api: Api = "completions", logprobs: int | None = None, **fake: Any
) -> tuple[list[RequestRecord], list[RequestRecord]]:
    """Requests 0..together-1 one at a time, then all at once: the fault hits those that
    arrive while another is in flight (all but the first)."""
    # 24 tokens 10 ms apart: the first request still decodes when the others arrive.
    config = FakeServerConfig(ttft_ms=20.0, itl_ms=10.0, fault_when="above", **fake)
    requests = [_request(i, api, logprobs) for i in range(together)]
    with FakeServerThread(config) as server:
        alone = [run(_send(server.base_url, [r]))[0] for r in requests]
        batch = run(_send(server.base_url, requests))
    return alone, batch


def test_drop_deltas_drops_every_other_delta_only_when_requests_overlap() -> None:
    serial, batch = _alone_and_together(fault="drop_deltas")
    alone = serial[-1]
    assert all(r.ok for r in serial) and batch[0].text == serial[0].text
    assert alone.ok and len(alone.pieces) == MAX_TOKENS == alone.completion_tokens
    dropped = batch[-1]
    assert dropped.ok, dropped.error
    # Its first token, then every other one, the last with its finish: the text of the lone
    # reply with pieces missing, while usage and finish_reason stay right.
    assert dropped.pieces == alone.pieces[0::2] + alone.pieces[-1:]
    assert dropped.completion_tokens == MAX_TOKENS
    assert dropped.finish_reason == alone.finish_reason == "length"


def test_drop_deltas_at_an_interval_sends_every_nth_token_only() -> None:
    serial, batch = _alone_and_together(fault="drop_deltas", tokens_per_delta=8)
    alone = serial[-1]
    assert len(alone.pieces) == 1 + 3  # alone: coalesced 1 + 8 + 8 + 7, nothing dropped
    kept = batch[-1]
    assert kept.ok and kept.completion_tokens == MAX_TOKENS
    words = [f" {word}" for word in alone.text.split()]  # the fake's tokens
    assert len(words) == MAX_TOKENS
    assert kept.pieces == [words[i] for i in (0, 8, 16, 23)]
    # Usage far above what the text holds: 24 tokens in 20 bytes.
    assert len(kept.text.encode()) < MAX_TOKENS


def test_cut_stream_ends_cleanly_with_no_finish_and_no_done_when_requests_overlap() -> None:
    serial, batch = _alone_and_together(fault="cut_stream")
    assert all(r.ok and r.finish_reason == "length" for r in serial)
    assert batch[0].ok
    for record in batch[1:]:
        # The client's view: a stream that ended before [DONE] or a finish_reason.
        assert record.error is not None and record.error.kind is ErrorKind.DISCONNECTED
        assert "before [DONE] or a finish_reason" in record.error.message
        assert record.completion_tokens is None


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("per_delta", [3, 8])
def test_coalesced_deltas_carry_every_token_text_and_logprob(api: Api, per_delta: int) -> None:
    [plain], _ = _alone_and_together(1, api, logprobs=1)
    [alone, _], batch = _alone_and_together(2, api, logprobs=1, tokens_per_delta=per_delta)
    for record in (alone, *batch):
        assert record.ok, record.error
        assert record.completion_tokens == MAX_TOKENS and record.finish_reason == "length"
    assert alone.text == plain.text and alone.logprobs == plain.logprobs
    # The first token alone, then per_delta tokens a delta.
    assert len(alone.pieces) == 1 + -(-(MAX_TOKENS - 1) // per_delta) < MAX_TOKENS
    assert alone.pieces[0] == plain.pieces[0]
    assert alone.pieces[1] == "".join(plain.pieces[1 : 1 + per_delta])
