"""The fake server's protocol: endpoints, answers, usage, logprobs, prompt cache, config."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from pydantic import ValidationError

import batchprobe.fake
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.workload.needle import needle_line

FAST = FakeServerConfig(ttft_ms=1.0, itl_ms=0.5)


def recall_prompt(code: str) -> str:
    return f"run 7f3a\nboot ok\n{needle_line(code)}\ndisk ok\nThe access code is"


async def post(url: str, path: str, body: dict[str, Any]) -> tuple[int, Any, float]:
    """Non-streaming POST: status, parsed JSON body, seconds taken."""
    async with aiohttp.ClientSession() as session:
        start = time.perf_counter()
        async with session.post(url + path, json=body) as response:
            data = await response.json(content_type=None)
            return response.status, data, time.perf_counter() - start


async def stream(url: str, path: str, body: dict[str, Any]) -> list[Any]:
    """Streaming POST: every SSE data payload, ``"[DONE]"`` kept as a string."""
    events: list[Any] = []
    body = {**body, "stream": True}
    async with aiohttp.ClientSession() as session, session.post(url + path, json=body) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        async for raw in response.content:
            line = raw.decode().strip()
            if line.startswith("data: "):
                payload = line[len("data: ") :]
                events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_public_api_matches_all() -> None:
    public = {name for name in vars(batchprobe.fake) if not name.startswith("_")}
    public -= {"annotations"}  # from __future__
    assert set(batchprobe.fake.__all__) == public


def test_models_health_and_no_props_without_cache() -> None:
    async def go(url: str) -> None:
        async with aiohttp.ClientSession() as session:
            async with session.get(url + "/v1/models") as response:
                models = await response.json()
            async with session.get(url + "/health") as response:
                assert response.status == 200
            async with session.get(url + "/props") as response:
                assert response.status == 404
        assert [m["id"] for m in models["data"]] == ["probe-me"]

    with FakeServerThread(FakeServerConfig(model_id="probe-me")) as server:
        run(go(server.base_url))


def test_recall_completion_stream_answers_code_then_newline() -> None:
    prompt = recall_prompt("4718305")
    body = {"prompt": prompt, "max_tokens": 16, "stream_options": {"include_usage": True}}
    with FakeServerThread(FAST) as server:
        events = run(stream(server.base_url, "/v1/completions", body))
    assert events[-1] == "[DONE]"
    usage = events[-2]["usage"]
    tokens = [e["choices"][0] for e in events[:-2]]
    assert [t["text"] for t in tokens] == [" 4718305", "\n"]
    assert [t["finish_reason"] for t in tokens] == [None, "stop"]
    assert events[-2]["choices"] == []
    assert usage["completion_tokens"] == 2
    assert usage["prompt_tokens"] == len(prompt.split())
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}


def test_recall_chat_non_stream_has_code_and_usage() -> None:
    messages = [{"role": "user", "content": recall_prompt("9001234") + " Reply with the code."}]
    with FakeServerThread(FAST) as server:
        status, data, _ = run(
            post(server.base_url, "/v1/chat/completions", {"messages": messages, "model": "x"})
        )
    assert status == 200
    choice = data["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "9001234\n"}
    assert choice["finish_reason"] == "stop"
    assert data["object"] == "chat.completion"
    assert data["usage"]["completion_tokens"] == 2


def test_chat_stream_first_chunk_carries_role_and_no_usage_unless_asked() -> None:
    body = {"messages": [{"role": "user", "content": "tell a long story"}], "max_tokens": 4}
    with FakeServerThread(FAST) as server:
        events = run(stream(server.base_url, "/v1/chat/completions", body))
    assert events[-1] == "[DONE]"
    deltas = [e["choices"][0]["delta"] for e in events[:-1]]
    assert len(deltas) == 4
    assert deltas[0]["role"] == "assistant"
    assert all("role" not in d for d in deltas[1:])
    assert all("usage" not in e for e in events[:-1])
    assert events[-2]["choices"][0]["finish_reason"] == "length"


def test_decode_is_exactly_max_tokens_and_deterministic() -> None:
    prompt = {"prompt": "Write a very long story about the sea.", "max_tokens": 40}
    with FakeServerThread(FAST) as server:
        events = run(stream(server.base_url, "/v1/completions", prompt))
        _, whole, _ = run(post(server.base_url, "/v1/completions", prompt))
        _, other, _ = run(post(server.base_url, "/v1/completions", {**prompt, "prompt": "Other."}))
    with FakeServerThread(FakeServerConfig(ttft_ms=0, itl_ms=0, seed=99)) as second:
        _, again, _ = run(post(second.base_url, "/v1/completions", prompt))
    pieces = [e["choices"][0]["text"] for e in events[:-1]]
    assert len(pieces) == 40  # one SSE chunk per token
    assert all(p.startswith(" ") and p.strip().isalpha() for p in pieces)
    assert "".join(pieces) == whole["choices"][0]["text"] == again["choices"][0]["text"]
    assert whole["choices"][0]["finish_reason"] == "length"
    assert whole["usage"]["completion_tokens"] == 40
    assert other["choices"][0]["text"] != whole["choices"][0]["text"]


def test_completion_logprobs_are_deterministic_and_aligned() -> None:
    body = {"prompt": "count sheep slowly", "max_tokens": 6, "logprobs": 1}
    with FakeServerThread(FAST) as server:
        _, first, _ = run(post(server.base_url, "/v1/completions", body))
        events = run(stream(server.base_url, "/v1/completions", body))
    logprobs = first["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == 6
    assert "".join(logprobs["tokens"]) == first["choices"][0]["text"]
    assert all(lp < 0 for lp in logprobs["token_logprobs"])
    streamed = [e["choices"][0]["logprobs"]["token_logprobs"][0] for e in events[:-1]]
    assert streamed == logprobs["token_logprobs"]
    assert logprobs["text_offset"][1] == len(logprobs["tokens"][0])


def test_chat_logprobs_content_entries() -> None:
    body = {
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": 3,
        "logprobs": True,
    }
    with FakeServerThread(FAST) as server:
        _, data, _ = run(post(server.base_url, "/v1/chat/completions", body))
        _, plain, _ = run(
            post(server.base_url, "/v1/chat/completions", {**body, "logprobs": False})
        )
    content = data["choices"][0]["logprobs"]["content"]
    assert [c["token"] for c in content] == [
        t for t in _split_words(data["choices"][0]["message"]["content"])
    ]
    assert all(isinstance(c["logprob"], float) and c["logprob"] < 0 for c in content)
    assert plain["choices"][0]["logprobs"] is None


def _split_words(text: str) -> list[str]:
    return [" " + word for word in text.split()]


def test_prefix_cache_reports_cached_tokens_and_shortens_ttft() -> None:
    config = FakeServerConfig(ttft_ms=200.0, itl_ms=1.0, prefix_cache=True, batch_cap=5)
    body = {"prompt": "the same prompt twice", "max_tokens": 2}
    with FakeServerThread(config) as server:
        url = server.base_url
        _, cold, cold_s = run(post(url, "/v1/completions", body))
        _, warm, warm_s = run(post(url, "/v1/completions", body))
        _, off, off_s = run(post(url, "/v1/completions", {**body, "cache_prompt": False}))
        _, props, _ = run(_get(url + "/props"))
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == 4
    assert off["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert cold_s > 0.19 and off_s > 0.19
    assert warm_s < 0.1
    assert props["total_slots"] == 5
    assert props["default_generation_settings"]["params"]["cache_prompt"] is True


def test_without_prefix_cache_repeats_are_never_cached() -> None:
    body = {"prompt": "again and again", "max_tokens": 1}
    with FakeServerThread(FAST) as server:
        run(post(server.base_url, "/v1/completions", body))
        _, data, _ = run(post(server.base_url, "/v1/completions", body))
    assert data["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


async def _get(url: str) -> tuple[int, Any, float]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json(), 0.0


def test_request_id_is_echoed() -> None:
    async def go(url: str) -> str:
        async with aiohttp.ClientSession() as session:
            body = {"prompt": "hi", "max_tokens": 1}
            headers = {"x-request-id": "req-42"}
            async with session.post(url + "/v1/completions", json=body, headers=headers) as r:
                await r.read()
                return r.headers["x-request-id"]

    with FakeServerThread(FAST) as server:
        assert run(go(server.base_url)) == "req-42"


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/completions", {"max_tokens": 3}, "prompt"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 10**9}, "max_tokens"),
        ("/v1/completions", {"prompt": "x", "stream": "maybe"}, "stream"),
        ("/v1/completions", {"prompt": ["a", "b"]}, "prompt"),
        ("/v1/chat/completions", {"messages": []}, "messages"),
        ("/v1/chat/completions", {"messages": "hi"}, "messages"),
    ],
)
def test_bad_request_is_400_naming_the_field(path: str, body: dict[str, Any], param: str) -> None:
    with FakeServerThread(FAST) as server:
        status, data, _ = run(post(server.base_url, path, body))
    assert status == 400
    assert data["error"]["param"] == param
    assert data["error"]["type"] == "invalid_request_error"


def test_body_that_is_not_json_is_400() -> None:
    async def go(url: str) -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(url + "/v1/completions", data=b"{nope") as response,
        ):
            return response.status, await response.json()

    with FakeServerThread(FAST) as server:
        status, data = run(go(server.base_url))
    assert status == 400
    assert data["error"]["param"] == "body"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"batching": "dynamic"}, "batching"),
        ({"fault": "explode"}, "fault"),
        ({"fault_when": "sometimes"}, "fault_when"),
        ({"ttft_ms": -1.0}, "ttft_ms"),
        ({"batch_cap": 0}, "batch_cap"),
        ({"fault": "exit_after"}, "exit_after"),
        ({"exit_after": 3}, "exit_after"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        FakeServerConfig(**kwargs)
    assert info.value.errors()[0]["loc"] == (field,)


def test_config_fields_are_documented() -> None:
    for name, field in FakeServerConfig.model_fields.items():
        assert field.description, name


def test_two_servers_keep_separate_state() -> None:
    config = FakeServerConfig(ttft_ms=0, itl_ms=0, prefix_cache=True)
    body = {"prompt": "shared prompt", "max_tokens": 1}
    with FakeServerThread(config) as first, FakeServerThread(config) as second:
        run(post(first.base_url, "/v1/completions", body))
        _, data, _ = run(post(second.base_url, "/v1/completions", body))
    assert data["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
