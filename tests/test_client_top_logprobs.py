"""Top logprobs, asked per request: parsed from the engines' three layouts into each token
and its best alternative; a request that does not ask sends no logprob field at all."""

from __future__ import annotations

import json
from typing import Any

import pytest

from batchprobe.client import Api, CompletionRequest, OpenAIClient, RequestRecord, run
from batchprobe.client._stream import ReplyParser
from batchprobe.fake import FakeServerConfig, FakeServerThread, LogprobsFormat

MAX_TOKENS = 30


def request(api: Api, *, stream: bool, temperature: float = 0.0, k: int | None = 3) -> CompletionRequest:
    return CompletionRequest(
        request_id=f"{api}-{stream}-{temperature}",
        api=api,
        prompt="[run t session 9] Tell me a story.",
        max_tokens=MAX_TOKENS,
        temperature=temperature,
        logprobs=k,
        stream=stream,
    )


async def _both(url: str, api: Api, stream: bool) -> tuple[RequestRecord, RequestRecord]:
    async with OpenAIClient(url) as client:
        greedy = await client.complete(request(api, stream=stream))
        sampled = await client.complete(request(api, stream=stream, temperature=1.0))
        return greedy, sampled


@pytest.mark.parametrize("fmt", ["openai", "llama_cpp"])
@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("stream", [True, False])
def test_each_layout_gives_each_token_and_its_best_alternative(
    fmt: LogprobsFormat, api: Api, stream: bool
) -> None:
    config = FakeServerConfig(ttft_ms=0, itl_ms=0, logprobs_format=fmt)
    with FakeServerThread(config) as server:
        greedy, sampled = run(_both(server.base_url, api, stream))
    for record in (greedy, sampled):
        assert record.ok, record.error
        tops = record.top_logprobs
        assert tops is not None and len(tops) == MAX_TOKENS
        assert "".join(t.token for t in tops) == record.text
        assert [t.logprob for t in tops] == record.logprobs
        assert all(len(t.alternatives) == 3 for t in tops)
        assert all(t.alternatives[0].logprob >= t.alternatives[-1].logprob for t in tops)
    assert all(t.top1 and t.alternatives[0].token == t.token for t in greedy.top_logprobs or [])
    passed_over = [t for t in sampled.top_logprobs or [] if not t.top1]
    assert passed_over
    for t in passed_over:
        assert t.alternatives[0].token != t.token and t.alternatives[0].logprob > t.logprob


def test_a_server_that_sends_no_logprobs_leaves_an_empty_list() -> None:
    config = FakeServerConfig(ttft_ms=0, itl_ms=0, logprobs_format="none")
    with FakeServerThread(config) as server:
        greedy, _ = run(_both(server.base_url, "completions", True))
    assert greedy.ok and greedy.text
    assert greedy.top_logprobs == [] and greedy.logprobs == []


def test_chosen_only_logprobs_record_no_alternatives() -> None:
    with FakeServerThread(FakeServerConfig(ttft_ms=0, itl_ms=0)) as server:

        async def go() -> RequestRecord:
            async with OpenAIClient(server.base_url) as client:
                return await client.complete(request("chat", stream=True, k=0))

        record = run(go())
    assert record.logprobs is not None and len(record.logprobs) == MAX_TOKENS
    assert record.top_logprobs is None


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_request_that_does_not_ask_sends_no_logprob_field(api: Api) -> None:
    client = OpenAIClient("http://127.0.0.1:1")
    plain = client.request_body(request(api, stream=True, k=None))
    assert not {"logprobs", "top_logprobs"} & set(plain)
    asked = client.request_body(request(api, stream=True, k=4))
    expected: dict[str, Any] = (
        {"logprobs": 4} if api == "completions" else {"logprobs": True, "top_logprobs": 4}
    )
    assert {k: asked[k] for k in expected} == expected


def _sse(*events: Any) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + (
        b"data: [DONE]\n\n"
    )


def test_malformed_entries_are_skipped_not_fatal() -> None:
    """A token without a text or a numeric logprob is left out; the reply still parses."""
    parser = ReplyParser("completions", want_logprobs=True, streamed=True, max_tokens=4,
                         want_top=True)  # fmt: skip
    block = {"content": [{"token": " a", "logprob": -0.1, "top_logprobs": [
        {"token": " a", "logprob": -0.1}, {"token": " b", "logprob": "x"}]},
        {"token": None, "logprob": -0.5, "top_logprobs": None}]}  # fmt: skip
    event = {"choices": [{"index": 0, "text": " a", "logprobs": block, "finish_reason": "stop"}]}
    parser.feed(_sse(event), 1.0)
    parser.finish(1.0)
    record = parser.record("r", 0.0, 1.0, None)
    assert record.top_logprobs is not None and len(record.top_logprobs) == 1
    choice = record.top_logprobs[0]
    assert (choice.token, choice.top1) == (" a", True)
    assert [(a.token, a.logprob) for a in choice.alternatives] == [(" a", -0.1)]
