"""The client parsing real replies: SSE split across packets, usage, logprobs, JSON replies."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from batchprobe.client._errors import Fault
from batchprobe.client._stream import ReplyParser
from client_replies import (
    DONE,
    USAGE,
    chat_event,
    completion,
    exchange,
    sse,
    text_event,
)

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
    parser = ReplyParser("completions", want_logprobs=True, streamed=True, max_tokens=8)
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




# --- several choices (n) -------------------------------------------------------------------


def _choice(index: int, text: str, finish: str | None = None) -> bytes:
    event = {"choices": [{"index": index, "text": text, "finish_reason": finish}]}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _feed(events: list[bytes], n: int, api: str = "completions") -> Any:
    parser = ReplyParser(api, want_logprobs=False, streamed=True, max_tokens=8, choices=n)  # type: ignore[arg-type]
    for event in events:
        parser.feed(event, 1.0)
    parser.finish(2.0)
    return parser.record("r", 0.0, 2.0, None)


def test_two_choices_interleaved_are_kept_apart_by_index() -> None:
    # llama.cpp's layout: one choice per event, index 1 may end first with its own usage.
    events = [_choice(1, " 1"), _choice(0, " 1"), _choice(1, "02", "length"), USAGE,
              _choice(0, "02"), _choice(0, "", "length"), USAGE, DONE]
    record = _feed(events, 2)
    assert record.text == " 102" and record.finish_reason == "length"
    assert [(c.index, c.text, c.finish_reason) for c in record.choices] == [(1, " 102", "length")]
    # Asked for one, the first choice of each event is the answer, as before.
    assert _feed([_choice(0, "a", "stop"), DONE], 1).choices == []


def test_more_choice_indices_than_asked_for_stop_the_reading() -> None:
    events = [_choice(0, "a"), _choice(1, "b"), _choice(2, "c"), _choice(3, "d", "stop"), DONE]
    parser = ReplyParser("completions", want_logprobs=False, streamed=True, max_tokens=8,
                         choices=2)
    parser.feed(b"".join(events[:3]), 1.0)
    with pytest.raises(Fault, match="more choices than the 2 asked for"):
        parser.feed(events[3], 1.0)


def test_a_whole_reply_of_two_chat_choices() -> None:
    body = {"choices": [
        {"index": 0, "message": {"role": "assistant", "content": "yes"}, "finish_reason": "stop"},
        {"index": 1, "message": {"role": "assistant", "content": "no"}, "finish_reason": "stop"},
    ], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}
    parser = ReplyParser("chat", want_logprobs=False, streamed=False, max_tokens=8, choices=2)
    parser.feed_json(json.dumps(body).encode(), 1.0)
    parser.finish(1.0)
    record = parser.record("r", 0.0, 1.0, None)
    assert record.text == "yes" and [(c.index, c.text) for c in record.choices] == [(1, "no")]
