"""The client against real aiohttp servers on 127.0.0.1: request shape and reply parsing."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

import batchprobe.client as client_pkg
from aioserver import Handler, serve
from batchprobe.client import CompletionRequest, OpenAIClient, RequestRecord, Timeouts, run
from batchprobe.client._stream import ReplyParser
from batchprobe.errors import ConfigError


async def sse(request: web.Request, packets: list[bytes], gap: float = 0.0) -> web.StreamResponse:
    """Write each packet separately (``gap`` seconds apart) as an event stream."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for packet in packets:
        await resp.write(packet)
        if gap:
            await asyncio.sleep(gap)
    await resp.write_eof()
    return resp


def event(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def text_event(text: str, finish: str | None = None, **choice: Any) -> bytes:
    return event({"choices": [{"index": 0, "text": text, "finish_reason": finish, **choice}]})


def chat_event(delta: dict[str, Any], finish: str | None = None, **choice: Any) -> bytes:
    return event({"choices": [{"index": 0, "delta": delta, "finish_reason": finish, **choice}]})


USAGE = event(
    {
        "choices": [],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 5},
        },
    }
)
DONE = b"data: [DONE]\n\n"


def complete(url: str, req: CompletionRequest, **kwargs: Any) -> RequestRecord:
    async def go() -> RequestRecord:
        async with OpenAIClient(url, **kwargs) as client:
            return await client.complete(req)

    return run(go())


def completion(**fields: Any) -> CompletionRequest:
    fields.setdefault("request_id", "req-1")
    fields.setdefault("prompt", "The access code for vault 3 is")
    fields.setdefault("max_tokens", 8)
    return CompletionRequest(**fields)


def exchange(handler: Handler, req: CompletionRequest, **kwargs: Any) -> RequestRecord:
    async def go() -> RequestRecord:
        async with serve(handler) as url, OpenAIClient(url, **kwargs) as client:
            return await client.complete(req)

    return run(go())


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


# --- streaming parse -----------------------------------------------------------------


def test_completion_stream_with_usage_chunk() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        packets = [text_event("The"), text_event(" code"), text_event(" 7Q2", "length")]
        return await sse(request, [*packets, USAGE, DONE], gap=0.01)

    record = exchange(handler, completion())
    assert record.ok, record.error
    assert record.pieces == ["The", " code", " 7Q2"]
    assert record.text == "The code 7Q2"
    assert record.finish_reason == "length"
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (12, 3, 5)
    assert record.streamed is True
    assert len(record.token_times) == 3
    assert record.token_times == sorted(record.token_times)
    assert record.first_token_at == record.token_times[0]
    assert record.started_at < record.token_times[0] <= record.finished_at


def test_sse_split_across_packets_is_stamped_when_complete() -> None:
    stream = text_event("a") + text_event("b") + text_event("c", "stop") + DONE
    cut = len(text_event("a")) + 7  # inside the JSON of the second event
    second = cut + len(text_event("b"))

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, [stream[:cut], stream[cut:second], stream[second:]], gap=0.1)

    record = exchange(handler, completion())
    assert record.ok, record.error
    assert record.pieces == ["a", "b", "c"]
    # "b" is only complete in the second packet, 0.1 s after the first.
    assert record.token_times[1] - record.token_times[0] >= 0.08
    assert record.token_times[2] - record.token_times[1] >= 0.08


SPLIT_STREAM = (
    b": hello\r\n\r\n"
    + 'data: {"choices": [{"text": "\u00e9t\u00e9", "finish_reason": null}]}\n\n'.encode()
    + text_event(" 7Q2", logprobs={"token_logprobs": [-0.5]})
    + text_event("", "stop")
    + USAGE
    + DONE
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(SPLIT_STREAM)), max_size=12))
def test_any_packet_split_parses_the_same(cuts: list[int]) -> None:
    # Cuts land anywhere, including inside a multi-byte UTF-8 character.
    bounds = [0, *sorted(cuts), len(SPLIT_STREAM)]
    parser = ReplyParser("completions", want_logprobs=True, streamed=True)
    done = False
    for i, (start, end) in enumerate(itertools.pairwise(bounds)):
        done = parser.feed(SPLIT_STREAM[start:end], float(i))
        if done:
            break
    assert done
    parser.finish(99.0)
    record = parser.record("r", 0.0, 99.0, None)
    assert record.pieces == ["\u00e9t\u00e9", " 7Q2"]
    assert record.logprobs == [-0.5]
    assert record.finish_reason == "stop"
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (12, 3, 5)


def test_many_events_in_one_packet_share_one_arrival_time() -> None:
    packet = b"".join(text_event(t) for t in ("x", "y", "z")) + text_event("", "stop") + DONE

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, [packet])

    record = exchange(handler, completion())
    assert record.ok, record.error
    assert record.pieces == ["x", "y", "z"]
    assert len(set(record.token_times)) == 1


def test_crlf_comments_event_fields_and_multiline_data() -> None:
    multiline = (
        b'data: {"choices": [{"index": 0,\r\ndata: "text": "B", "finish_reason": null}]}\r\n\r\n'
    )
    packets = [
        b": keep-alive\r\n\r\n",
        b"event: message\r\nid: 1\r\n" + text_event("A").replace(b"\n", b"\r\n"),
        multiline,
        text_event("C", "stop").replace(b"\n", b"\r\n"),
        b"data:[DONE]\r\n\r\n",
    ]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, packets)

    record = exchange(handler, completion())
    assert record.ok, record.error
    assert record.pieces == ["A", "B", "C"]


def test_chat_stream_skips_role_and_empty_deltas() -> None:
    packets = [
        chat_event({"role": "assistant"}),
        chat_event({"content": "7Q"}),
        chat_event({"content": ""}),
        chat_event({"content": "2X"}),
        chat_event({}, "stop"),
        USAGE,
        DONE,
    ]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, packets)

    record = exchange(handler, completion(api="chat"))
    assert record.ok, record.error
    assert record.pieces == ["7Q", "2X"]
    assert record.finish_reason == "stop"
    assert record.completion_tokens == 3


def test_completion_logprobs_are_collected() -> None:
    def lp(*values: float) -> dict[str, Any]:
        return {"tokens": ["t"] * len(values), "token_logprobs": list(values), "top_logprobs": []}

    packets = [
        text_event("a", logprobs=lp(-0.5)),
        text_event("bc", logprobs=lp(-1.0, -0.25)),
        text_event("", "stop", logprobs=None),
        DONE,
    ]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, packets)

    record = exchange(handler, completion(logprobs=1))
    assert record.logprobs == [-0.5, -1.0, -0.25]


def test_chat_logprobs_are_collected() -> None:
    def lp(value: float) -> dict[str, Any]:
        return {"content": [{"token": "t", "logprob": value, "top_logprobs": []}]}

    packets = [
        chat_event({"content": "a"}, logprobs=lp(-0.125)),
        chat_event({"content": "b"}, "stop", logprobs=lp(-2.0)),
        DONE,
    ]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, packets)

    record = exchange(handler, completion(api="chat", logprobs=0))
    assert record.logprobs == [-0.125, -2.0]


def test_logprobs_not_requested_stay_none() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        lp = {"token_logprobs": [-1.0]}
        return await sse(request, [text_event("a", "stop", logprobs=lp), DONE])

    assert exchange(handler, completion()).logprobs is None


# --- non-streaming -------------------------------------------------------------------


def test_json_reply_to_a_streaming_request_is_parsed_as_non_streaming() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(
            {
                "choices": [{"index": 0, "text": "7Q2XK9", "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 4},
            }
        )

    record = exchange(handler, completion(stream=True))
    assert record.ok, record.error
    assert record.streamed is False
    assert record.text == "7Q2XK9"
    assert record.pieces == ["7Q2XK9"]
    assert len(record.token_times) == 1
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (30, 4, None)


def test_non_streaming_chat() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        assert body["stream"] is False
        message = {"role": "assistant", "content": "code: 42"}
        lp = {"content": [{"token": "code", "logprob": -0.5}]}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": lp}
        return web.json_response({"choices": [choice]})

    record = exchange(handler, completion(api="chat", stream=False, logprobs=0))
    assert record.ok, record.error
    assert record.streamed is False
    assert record.text == "code: 42"
    assert record.logprobs == [-0.5]
    assert record.first_token_at == record.token_times[0]
    assert record.started_at < record.first_token_at <= record.finished_at


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
    assert Timeouts() == Timeouts(connect=10.0, read=120.0, total=900.0)
    with pytest.raises(ValueError, match="read"):
        Timeouts(read=0)
    with pytest.raises(ValueError, match="extra"):
        Timeouts(conect=1.0)  # type: ignore[call-arg]


def test_exported_members() -> None:
    public = {name for name in dir(client_pkg) if not name.startswith("_")}
    modules = {"annotations", "timeouts", "types"}
    assert set(client_pkg.__all__) == public - modules
