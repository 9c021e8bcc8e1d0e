"""The client against batchprobe's own fake server: both APIs, streaming and not, logprobs."""

from __future__ import annotations

import pytest

from batchprobe.client import Api, CompletionRequest, OpenAIClient, RequestRecord, run
from batchprobe.fake import FakeServerConfig, FakeServerThread

MAX_TOKENS = 24


def request(api: Api, stream: bool) -> CompletionRequest:
    return CompletionRequest(
        request_id=f"{api}-{stream}",
        api=api,
        prompt="Write a long story about nothing:",
        max_tokens=MAX_TOKENS,
        logprobs=1,
        stream=stream,
    )


async def exchange(url: str, api: Api) -> tuple[list[str], RequestRecord, RequestRecord]:
    async with OpenAIClient(url) as client:
        models = await client.list_models()
        client.model = models[0]
        streamed = await client.complete(request(api, stream=True))
        whole = await client.complete(request(api, stream=False))
        return models, streamed, whole


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_fake_server_replies_parse_completely(api: Api) -> None:
    with FakeServerThread(FakeServerConfig(ttft_ms=0, itl_ms=1)) as server:
        models, streamed, whole = run(exchange(server.base_url, api))
    assert models == ["fake-model"]
    for record in (streamed, whole):
        assert record.ok, record.error
        assert record.completion_tokens == MAX_TOKENS
        assert record.finish_reason == "length"
        assert record.logprobs is not None
        assert len(record.logprobs) == MAX_TOKENS
    assert streamed.streamed and not whole.streamed
    assert len(streamed.pieces) == MAX_TOKENS
    assert len(whole.pieces) == 1
    # The fake server's text depends only on the prompt: both modes give the same answer.
    assert streamed.text == whole.text
    assert streamed.logprobs == whole.logprobs
