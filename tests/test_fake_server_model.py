"""The fake answers self-checking items like a sane model: counts, stop, max_tokens,
temperature, logit_bias through its own /tokenize, penalties."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from pydantic import ValidationError

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.fake._tokens import VOCAB
from batchprobe.workload.decode import build_decode_items
from fake_traffic import send

FAST = FakeServerConfig(ttft_ms=0.0, itl_ms=0.0)


async def _post(url: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(url + path, json=body) as response:
        return response.status, await response.json(content_type=None)


async def _stream_text(url: str, body: dict[str, Any]) -> tuple[list[str], str | None]:
    """The streamed pieces of a completion and its finish reason."""
    async with aiohttp.ClientSession() as session:
        reply = await send(session, url, {**body, "stream": True})
    return reply.pieces, reply.finish_reason


def complete(body: dict[str, Any], path: str = "/v1/completions") -> tuple[int, Any]:
    with FakeServerThread(FAST) as server:
        return asyncio.run(_post(server.base_url, path, body))


def text(data: Any) -> str:
    choice = data["choices"][0]
    return str(choice["message"]["content"] if "message" in choice else choice["text"])


COUNTING = "[run r session 3] Counting from 4150: 4150, 4151, 4152, 4153,"


def test_counting_prompt_continues_the_count_one_number_per_token() -> None:
    with FakeServerThread(FAST) as server:
        pieces, finish = asyncio.run(
            _stream_text(server.base_url, {"prompt": COUNTING, "max_tokens": 5})
        )
    assert pieces == [" 4154,", " 4155,", " 4156,", " 4157,", " 4158,"]
    assert finish == "length"


def test_the_decode_workloads_prompts_are_counted_in_both_styles() -> None:
    for style in ("completion", "chat"):
        item = build_decode_items(run_id="r", sessions=1, max_tokens=6, prompt_style=style, seed=3)[
            0
        ]
        start = int(item.prompt.split("from ")[1].split(":")[0].split(",")[0])
        if style == "chat":
            status, data = complete(
                {"messages": [{"role": "user", "content": item.prompt}], "max_tokens": 6},
                "/v1/chat/completions",
            )
            numbers = range(start, start + 6)
            expected = ", ".join(str(n) for n in numbers) + ","
        else:
            status, data = complete({"prompt": item.prompt, "max_tokens": 6})
            numbers = range(start + 4, start + 10)
            expected = "".join(f" {n}," for n in numbers)
        assert status == 200
        assert text(data) == expected, style
        assert data["usage"]["completion_tokens"] == 6


@pytest.mark.parametrize("stop", [" 4156,", [" 4156", "never"], ["never", "56,"]])
def test_stop_cuts_the_text_before_the_stop_string(stop: str | list[str]) -> None:
    status, data = complete({"prompt": COUNTING, "max_tokens": 10, "stop": stop})
    assert status == 200
    assert text(data).startswith(" 4154, 4155,")
    assert "4156," not in text(data)
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"]["completion_tokens"] in (2, 3)  # a cut token keeps its head


def test_stop_in_the_stream_and_a_stop_that_never_comes() -> None:
    with FakeServerThread(FAST) as server:
        cut, cut_finish = asyncio.run(
            _stream_text(server.base_url, {"prompt": COUNTING, "max_tokens": 8, "stop": " 4157,"})
        )
        whole, whole_finish = asyncio.run(
            _stream_text(server.base_url, {"prompt": COUNTING, "max_tokens": 8, "stop": "x"})
        )
    assert cut == [" 4154,", " 4155,", " 4156,"]
    assert cut_finish == "stop"
    assert len(whole) == 8
    assert whole_finish == "length"


def test_recall_answer_honours_a_newline_stop() -> None:
    prompt = "[run r session 1] log\nACCESS_CODE=7123456\nend\nACCESS_CODE="
    status, data = complete({"prompt": prompt, "max_tokens": 8, "stop": ["\n"]})
    assert status == 200
    assert text(data) == " 7123456"
    assert data["choices"][0]["finish_reason"] == "stop"


def test_temperature_gives_other_seeded_text_and_zero_is_greedy() -> None:
    base = {"prompt": "[run r session 1] Tell me a story.", "max_tokens": 12}
    with FakeServerThread(FAST) as server:
        url = server.base_url

        async def go() -> list[str]:
            bodies = [
                base,
                {**base, "temperature": 0.0},
                {**base, "temperature": 0.9, "seed": 1},
                {**base, "temperature": 0.9, "seed": 1},
                {**base, "temperature": 0.9, "seed": 2},
            ]
            return [text((await _post(url, "/v1/completions", b))[1]) for b in bodies]

        plain, greedy, sampled, again, other_seed = asyncio.run(go())
    assert plain == greedy
    assert sampled == again  # seeded: reproducible
    assert sampled != greedy
    assert other_seed != sampled
    assert len(sampled.split()) == 12


def test_a_sampled_count_keeps_counting() -> None:
    """Its next number is near certain: a model counts at temperature 1 too."""
    base = {"prompt": COUNTING, "max_tokens": 12}
    with FakeServerThread(FAST) as server:
        url = server.base_url

        async def go() -> list[str]:
            bodies = [base, {**base, "temperature": 1.0, "top_p": 0.95}]
            return [text((await _post(url, "/v1/completions", b))[1]) for b in bodies]

        greedy, sampled = asyncio.run(go())
    assert greedy == sampled == "".join(f" {n}," for n in range(4154, 4166))


def test_tokenize_gives_vocabulary_ids_and_a_forcing_logit_bias_holds_every_token() -> None:
    with FakeServerThread(FAST) as server:
        url = server.base_url

        async def go() -> tuple[Any, ...]:
            _, known = await _post(url, "/tokenize", {"content": VOCAB[9]})
            _, fresh = await _post(url, "/tokenize", {"content": " zebra  quokka zebra"})
            forced_id = fresh["tokens"][0]
            _, biased = await _post(
                url,
                "/v1/completions",
                {"prompt": COUNTING, "max_tokens": 6, "logit_bias": {str(forced_id): 100}},
            )
            _, weak = await _post(
                url,
                "/v1/completions",
                {"prompt": COUNTING, "max_tokens": 6, "logit_bias": {"9": 10}},
            )
            _, vocab = await _post(
                url,
                "/v1/completions",
                {"prompt": COUNTING, "max_tokens": 3, "logit_bias": {"9": 50}},
            )
            return known, fresh, biased, weak, vocab

        known, fresh, biased, weak, vocab = asyncio.run(go())
    assert known == {"tokens": [9]}
    first, second, third = fresh["tokens"]
    assert first == third != second and first >= len(VOCAB)
    assert text(biased) == " zebra" * 6
    assert biased["choices"][0]["finish_reason"] == "length"
    assert text(weak) == "".join(f" {n}," for n in range(4154, 4160))  # below 50: no force
    assert text(vocab) == VOCAB[9] * 3


def test_penalties_are_accepted_without_effect() -> None:
    status, data = complete(
        {"prompt": COUNTING, "max_tokens": 4, "presence_penalty": 1.5, "frequency_penalty": -0.5}
    )
    assert status == 200
    assert text(data) == " 4154, 4155, 4156, 4157,"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"logit_bias": {"99999": 100}}, "logit_bias"),
        ({"logit_bias": {"abc": 100}}, "logit_bias"),
        ({"logit_bias": {"5": 500}}, "logit_bias"),
        ({"stop": ["ok", ""]}, "stop"),
        ({"temperature": -1}, "temperature"),
        ({"presence_penalty": 9}, "presence_penalty"),
    ],
)
def test_bad_parameters_are_400_naming_the_field(body: dict[str, Any], param: str) -> None:
    status, data = complete({"prompt": COUNTING, **body})
    assert status == 400
    assert data["error"]["param"] == param
    assert param in data["error"]["message"]


def test_tokenize_needs_content() -> None:
    status, data = complete({"text": "hello"}, "/tokenize")
    assert status == 400
    assert data["error"]["param"] == "content"


def test_early_trigger_takes_only_faults_it_can_apply_mid_reply() -> None:
    with pytest.raises(ValidationError, match="corrupt, finish_error, truncated_stream"):
        FakeServerConfig(fault="http_500", fault_when="early")
    assert FakeServerConfig(fault="corrupt", fault_when="early").fault_when == "early"
    assert FakeServerConfig(fault_when="early").fault == "none"
