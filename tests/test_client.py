"""The client against real aiohttp servers on 127.0.0.1: request shape, discovery and setup."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict

import batchprobe.client as client_pkg
from aioserver import serve
from batchprobe.client import ChatMessage, OpenAIClient, RequestRecord, Timeouts, run
from batchprobe.errors import ConfigError
from client_replies import (
    DONE,
    chat_event,
    completion,
    exchange,
    sse,
    text_event,
)

# --- request shape -------------------------------------------------------------------


class Capture:
    """A handler that remembers what it was sent and replies with a short stream."""

    def __init__(self, chat: bool = False) -> None:
        self.chat = chat
        self.body: dict[str, Any] = {}
        self.headers: CIMultiDict[str] = CIMultiDict()
        self.path = ""

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        self.body = await request.json()
        self.headers = request.headers.copy()
        self.path = request.path
        first = chat_event({"content": "42"}, "stop") if self.chat else text_event("42", "stop")
        return await sse(request, [first, DONE])


def test_completions_request_carries_every_field() -> None:
    capture = Capture()
    req = completion(
        request_id="sess-7",
        seed=3,
        logprobs=2,
        temperature=0.5,
        extra_body={"cache_prompt": False, "temperature": 0.0},
    )
    record = exchange(capture, req, model="tiny", api_key="k")
    assert record.ok, record.error
    assert capture.path == "/v1/completions"
    assert capture.body == {
        "model": "tiny",
        "prompt": "The access code for vault 3 is",
        "max_tokens": 8,
        "temperature": 0.0,  # extra_body is merged last and wins
        "stream": True,
        "stream_options": {"include_usage": True},
        "seed": 3,
        "logprobs": 2,
        "cache_prompt": False,
    }
    assert capture.headers["x-request-id"] == "sess-7"
    assert capture.headers["Authorization"] == "Bearer k"
    # A server that refuses ids it did not make (llama-cpp-python's) gets none.
    quiet = Capture()
    assert exchange(quiet, req, model="tiny", request_ids=False).ok
    assert "x-request-id" not in quiet.headers and quiet.body == capture.body


def test_chat_request_is_one_user_message_with_chat_logprobs() -> None:
    capture = Capture(chat=True)
    req = completion(api="chat", prompt="What is the code?", logprobs=0, stream=False)
    record = exchange(capture, req)
    assert capture.path == "/v1/chat/completions"
    assert capture.body["messages"] == [{"role": "user", "content": "What is the code?"}]
    assert capture.body["logprobs"] is True
    assert capture.body["top_logprobs"] == 0
    assert capture.body["stream"] is False
    assert "stream_options" not in capture.body
    assert "model" not in capture.body  # no model given: none sent
    assert "Authorization" not in capture.headers
    # The handler streamed anyway: parsed as a stream.
    assert record.text == "42"


def test_base_url_with_v1_and_trailing_slash_is_normalised() -> None:
    capture = Capture()
    record: list[RequestRecord] = []

    async def go() -> None:
        async with serve(capture) as url, OpenAIClient(url + "/v1/") as client:
            assert client.base_url == url
            record.append(await client.complete(completion()))

    run(go())
    assert capture.path == "/v1/completions"
    assert record[0].ok


def test_base_url_path_prefix_is_kept() -> None:
    capture = Capture()

    async def go() -> None:
        async with serve(capture) as url, OpenAIClient(url + "/engine/v1") as client:
            assert client.base_url == url + "/engine"
            await client.complete(completion())

    run(go())
    assert capture.path == "/engine/v1/completions"


@pytest.mark.parametrize("bad", ["127.0.0.1:8000", "ftp://host/", "http://"])
def test_bad_base_url_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        OpenAIClient(bad)
    assert info.value.field == "base_url"


# --- discovery -----------------------------------------------------------------------


async def discovery(request: web.Request) -> web.StreamResponse:
    if request.path == "/v1/models":
        return web.json_response({"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]})
    if request.path == "/props":
        return web.json_response({"n_ctx": 4096})
    if request.path == "/tokenize":
        body = await request.json()
        return web.json_response({"tokens": list(range(len(body["content"].split())))})
    if request.path == "/text":
        return web.Response(text="not json")
    raise web.HTTPNotFound()


def test_discovery_endpoints() -> None:
    async def go() -> tuple[Any, ...]:
        async with serve(discovery) as url, OpenAIClient(url) as client:
            return (
                await client.list_models(),
                await client.get_json("/props"),
                await client.get_json("/missing"),
                await client.get_json("/text"),
                await client.tokenize("one two three"),
            )

    assert run(go()) == (["m1", "m2"], {"n_ctx": 4096}, None, None, 3)


def test_tokenize_unsupported_is_none() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        raise web.HTTPNotFound()

    async def go() -> int | None:
        async with serve(handler) as url, OpenAIClient(url) as client:
            return await client.tokenize("anything")

    assert run(go()) is None


def test_injected_session_is_used_and_left_open() -> None:
    async def go() -> bool:
        async with serve(discovery) as url, aiohttp.ClientSession() as session:
            async with OpenAIClient(url, session=session) as client:
                assert await client.list_models() == ["m1", "m2"]
            return session.closed

    assert run(go()) is False


def test_client_outside_async_with_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="async with"):
        run(OpenAIClient("http://127.0.0.1:9").list_models())


def test_timeouts_validate() -> None:
    assert Timeouts() == Timeouts(connect=10.0, read=900.0, total=900.0)
    # No shorter silence limit hides under the request's own: --request-timeout is the bound.
    assert Timeouts(total=300.0).read == 300.0
    assert Timeouts(read=5.0, total=300.0).read == 5.0
    assert (Timeouts().floor_window, Timeouts().floor_bytes) == (60.0, 128)
    with pytest.raises(ValueError, match="read"):
        Timeouts(read=0)
    with pytest.raises(ValueError, match="extra"):
        Timeouts(conect=1.0)  # type: ignore[call-arg]


def test_exported_members() -> None:
    public = {name for name in dir(client_pkg) if not name.startswith("_")}
    modules = {"annotations", "limits", "timeouts", "types"}
    assert set(client_pkg.__all__) == public - modules


def test_chat_request_sends_the_conversation_before_its_prompt() -> None:
    capture = Capture(chat=True)
    earlier = [ChatMessage(role="user", content="Plant 7."), ChatMessage(role="assistant", content="7")]
    req = completion(api="chat", prompt="What was planted?", messages=earlier)
    assert exchange(capture, req).ok
    assert capture.body["messages"] == [
        {"role": "user", "content": "Plant 7."},
        {"role": "assistant", "content": "7"},
        {"role": "user", "content": "What was planted?"},
    ]
