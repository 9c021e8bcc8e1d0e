"""The fake server's bug modes of one row run with another row's request, and the modes a
judge needs to tell a bug from a flip: each against the fake alone, with plain aiohttp."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest

from batchprobe.fake import FakeServerConfig, FakeServerProcess, FakeServerThread
from batchprobe.fake._tokens import CORRUPT_PIECE
from batchprobe.workload.needle import needle_line

Body = dict[str, Any]
# Long enough a TTFT that a burst has all arrived before any first token.
TIMING: dict[str, Any] = {"ttft_ms": 80.0, "itl_ms": 2.0}


@dataclass
class Reply:
    status: int
    events: list[Any] = field(default_factory=list)

    def choices(self) -> list[Any]:
        return [e["choices"][0] for e in self.events if e.get("choices")]

    @property
    def text(self) -> str:
        parts = []
        for choice in self.choices():
            if "text" in choice:
                parts.append(choice["text"] or "")
            else:
                holder = choice.get("delta") or choice.get("message") or {}
                parts.append(holder.get("content") or "")
        return "".join(parts)

    @property
    def pieces(self) -> list[str]:
        out = []
        for choice in self.choices():
            holder = choice.get("delta") or choice.get("message") or {}
            piece = choice.get("text", holder.get("content"))
            if piece:
                out.append(piece)
        return out

    @property
    def finish_reason(self) -> str | None:
        reasons = [c.get("finish_reason") for c in self.choices()]
        return next((r for r in reversed(reasons) if r), None)

    @property
    def usage(self) -> Any:
        return next((e["usage"] for e in reversed(self.events) if e.get("usage")), None)

    @property
    def logprobs(self) -> list[Any]:
        return [c.get("logprobs") for c in self.choices()]


def fake(**values: Any) -> FakeServerConfig:
    return FakeServerConfig(**{**TIMING, **values})


def counting(session: int, start: int, max_tokens: int, **extra: Any) -> Body:
    numbers = ", ".join(str(n) for n in range(start, start + 4))
    prompt = f"[run t session {session}] Counting from {start}: {numbers},"
    return {"prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}, **extra}  # fmt: skip


def count_of(body: Body, tokens: int) -> str:
    last = int(body["prompt"].rstrip(",").split(", ")[-1])
    return "".join(f" {n}," for n in range(last + 1, last + 1 + tokens))


def recall(code: str, prompt_head: str = "log start") -> Body:
    prompt = f"{prompt_head}\n{needle_line(code)}\nlog end\nThe access code is"
    return {"prompt": prompt, "max_tokens": 8, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip


async def _send(session: aiohttp.ClientSession, url: str, body: Body, path: str) -> Reply:
    async with session.post(url + path, json=body) as response:
        if response.status != 200 or not body.get("stream"):
            return Reply(response.status, [await response.json(content_type=None)])
        events = []
        async for raw in response.content:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[len("data: ") :]))
        return Reply(response.status, events)


def together(url: str, bodies: list[Body], path: str = "/v1/completions") -> list[Reply]:
    async def go() -> list[Reply]:
        async with aiohttp.ClientSession() as session:
            return list(await asyncio.gather(*(_send(session, url, b, path) for b in bodies)))

    return asyncio.run(go())


def alone(url: str, body: Body, path: str = "/v1/completions") -> Reply:
    return together(url, [body], path)[0]


def words(reply: Reply) -> int:
    """Tokens of a count or of pseudo-words: one whitespace word each."""
    return len(reply.text.split())


def consistent(reply: Reply) -> bool:
    """usage.completion_tokens counts the tokens that came."""
    return reply.usage is not None and reply.usage["completion_tokens"] == words(reply)


# -- a clean early end ------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_clean_stop_under_early_ends_survivors_with_stop_and_consistent_usage(
    stream: bool,
) -> None:
    bodies = [counting(s, 1000 * (s + 2), tokens, stream=stream)
              for s, tokens in ((0, 4), (1, 24), (2, 32))]  # fmt: skip
    with FakeServerThread(fake(fault="clean_stop", fault_when="early")) as server:
        short, *survivors = together(server.base_url, bodies)
    assert short.text == count_of(bodies[0], 4) and short.finish_reason == "length"
    for body, reply in zip(bodies[1:], survivors):
        assert reply.finish_reason == "stop"
        assert words(reply) < body["max_tokens"]  # at the departure: maybe none yet
        assert reply.text == count_of(body, words(reply))  # a clean prefix
        assert consistent(reply)


def test_clean_stop_concurrent_ends_half_way_and_spares_a_lone_request() -> None:
    body = counting(0, 2000, 20)
    with FakeServerThread(fake(fault="clean_stop", fault_when="concurrent")) as server:
        lone = alone(server.base_url, body)
        pair = together(server.base_url, [body, counting(1, 3000, 20)])
    assert lone.finish_reason == "length" and len(lone.pieces) == 20
    for reply in pair:
        assert reply.finish_reason == "stop"
        assert len(reply.pieces) == 10
        assert consistent(reply)


# -- one row run with another row's request --------------------------------------------


def test_max_tokens_leak_ends_a_row_at_the_smaller_neighbours_count() -> None:
    bodies = [counting(0, 2000, 6), counting(1, 3000, 30)]
    with FakeServerThread(fake(fault="max_tokens_leak", fault_when="concurrent")) as server:
        lone = alone(server.base_url, bodies[1])
        small, large = together(server.base_url, bodies)
    assert len(lone.pieces) == 30
    assert small.text == count_of(bodies[0], 6)  # no smaller neighbour: its own
    assert large.text == count_of(bodies[1], 6)
    assert large.finish_reason == "length"
    assert consistent(large)


def test_stop_leak_runs_a_row_with_another_rows_stop_strings() -> None:
    own_stop = counting(0, 2000, 12, stop=[" 2008,"])
    other_stop = counting(1, 3000, 12, stop=[" 3006,"])
    with FakeServerThread(fake(fault="stop_leak", fault_when="concurrent")) as server:
        lone = alone(server.base_url, own_stop)
        mine, theirs = together(server.base_url, [own_stop, other_stop])
    assert lone.text == " 2004, 2005, 2006, 2007," and lone.finish_reason == "stop"
    # Each honours the other's stop string, never met in its own count: its own is passed.
    assert " 2008," in mine.text and mine.finish_reason == "length"
    assert " 3006," in theirs.text and theirs.finish_reason == "length"


def _forced_id(url: str) -> int:
    async def go() -> int:
        async with (
            aiohttp.ClientSession() as session,
            session.post(url + "/tokenize", json={"content": "zebra"}) as response,
        ):
            tokens: list[int] = (await response.json())["tokens"]
            return tokens[0]

    return asyncio.run(go())


def test_bias_leak_moves_only_the_logit_bias_between_rows() -> None:
    with FakeServerThread(fake(fault="bias_leak", fault_when="concurrent")) as server:
        forced = _forced_id(server.base_url)
        greedy = counting(0, 2000, 8)
        biased = counting(1, 3000, 8, logit_bias={str(forced): 100})
        sampled = counting(2, 4000, 8, temperature=1.0)
        g, b, s = together(server.base_url, [greedy, biased, sampled])
    assert g.pieces == [" zebra"] * 8  # the biased row's bias
    assert " zebra" not in b.text  # lost its own: got the sampled row's (none)
    assert s.pieces == [" zebra"] * 8  # sampled, and now biased too
    assert consistent(g)


def test_param_leak_samples_a_greedy_row_and_its_logprobs_show_it() -> None:
    """A greedy row run with a sampled neighbour's temperature: its text is not its serial
    text, and some chosen tokens are not their own top-1."""
    body = {"prompt": "[run t session 0] Tell me a story.", "max_tokens": 24, "stream": True,
            "logprobs": 3, "stream_options": {"include_usage": True}}  # fmt: skip
    sampled = {**body, "prompt": "[run t session 1] Tell me a story.", "temperature": 1.0}
    with FakeServerThread(fake(fault="param_leak", fault_when="params")) as server:
        serial = alone(server.base_url, body)
        leaked, _ = together(server.base_url, [body, sampled])
    assert _top1_misses(serial) == 0
    assert leaked.text != serial.text
    assert _top1_misses(leaked) > 0


def _top1_misses(reply: Reply) -> int:
    """Tokens whose chosen text is not the first of their legacy top_logprobs."""
    misses = 0
    for block in reply.logprobs:
        for token, top in zip(block["tokens"], block["top_logprobs"]):
            best = max(top.items(), key=lambda kv: kv[1])[0]
            misses += best != token
    return misses


def test_usage_leak_reports_another_rows_usage() -> None:
    short = counting(0, 2000, 5)
    long = counting(1, 3000, 17)
    long["prompt"] = "pad " * 9 + long["prompt"]
    with FakeServerThread(fake(fault="usage_leak", fault_when="concurrent")) as server:
        lone = alone(server.base_url, short)
        a, b = together(server.base_url, [short, long])
    assert consistent(lone)
    assert a.text == count_of(short, 5) and b.text == count_of(long, 17)  # text untouched
    # The long row reports the short one's usage; the short one finds no usage that fits
    # its max_tokens (a leak the client's bounds would catch first) and keeps its own.
    assert b.usage["completion_tokens"] == 5
    assert b.usage["prompt_tokens"] == lone.usage["prompt_tokens"]
    assert consistent(a) and a.usage["prompt_tokens"] == lone.usage["prompt_tokens"]


# -- re-sends and flips ---------------------------------------------------------------


def test_wrong_resend_answers_a_prompt_right_once_then_wrong_every_time() -> None:
    code = "7123456"
    count = counting(0, 2000, 8)
    with FakeServerThread(fake(fault="wrong_resend")) as server:
        url = server.base_url
        firsts = [alone(url, recall(code)), alone(url, count)]
        again = [alone(url, recall(code)) for _ in range(3)]
        counts = [alone(url, count) for _ in range(2)]
        other = alone(url, recall("7654321"))
    assert firsts[0].text.strip() == code and firsts[1].text == count_of(count, 8)
    for reply in again:
        answer = reply.text.strip()
        assert answer != code and answer.isdigit() and answer[:4] == code[:4]
    for reply in counts:
        assert CORRUPT_PIECE in reply.text
    assert other.text.strip() == "7654321"


def test_flip_once_errs_once_in_the_servers_life_under_concurrency() -> None:
    bodies = [counting(s, 1000 * (s + 2), 10) for s in range(4)]
    with FakeServerThread(fake(fault="flip_once", fault_when="concurrent")) as server:
        url = server.base_url
        lone = [alone(url, b) for b in bodies]
        rounds = [together(url, bodies) for _ in range(3)]
    assert all(r.text == count_of(b, 10) for r, b in zip(lone, bodies))
    wrong = [(n, i) for n, replies in enumerate(rounds) for i, r in enumerate(replies)
             if r.text != count_of(bodies[i], 10)]  # fmt: skip
    assert len(wrong) == 1 and wrong[0][0] == 0
    flipped = rounds[0][wrong[0][1]]
    assert flipped.pieces.count(f" {CORRUPT_PIECE}") == 1  # one token, its own count otherwise
    assert len(flipped.pieces) == 10 and consistent(flipped)


def test_flip_once_skips_what_a_judge_could_not_see() -> None:
    story = {"prompt": "a story", "max_tokens": 6, "stream": True}
    count = counting(0, 2000, 6)
    with FakeServerThread(fake(fault="flip_once")) as server:
        first = alone(server.base_url, story)
        second = alone(server.base_url, count)
        third = alone(server.base_url, count)
    assert CORRUPT_PIECE not in first.text
    assert CORRUPT_PIECE in second.text and third.text == count_of(count, 6)


# -- warm-up failures and a chat-only server ------------------------------------------


def test_warmup_hits_only_the_warm_up_requests() -> None:
    warm = {"prompt": "[warm-up r1 c@2] The weather today is", "max_tokens": 4}
    chat = {"messages": [{"role": "user", "content": warm["prompt"]}], "max_tokens": 4}
    with FakeServerThread(fake(fault="http_500", fault_when="warmup")) as server:
        url = server.base_url
        replies = [alone(url, warm), alone(url, chat, "/v1/chat/completions")]
        other = alone(url, counting(0, 2000, 4))
        liveness = alone(url, {**warm, "prompt": "[liveness r1 c@2] The weather today is"})
    assert [r.status for r in replies] == [500, 500]
    assert other.status == 200 and liveness.status == 200


def test_a_server_without_completions_answers_404_there_and_serves_chat() -> None:
    chat = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 3}
    with FakeServerThread(fake(serve_completions=False)) as server:
        completions = alone(server.base_url, counting(0, 2000, 3))
        answered = alone(server.base_url, chat, "/v1/chat/completions")
    assert completions.status == 404
    assert answered.status == 200 and answered.text


# -- logprobs in the engines' three layouts -------------------------------------------


def _story(api: str, **extra: Any) -> Body:
    text = "[run t session 3] Tell me a story."
    head: Body = {"prompt": text} if api == "completions" else {
        "messages": [{"role": "user", "content": text}]
    }
    return {**head, "max_tokens": 30, **extra}


def _asks(api: str, k: int) -> Body:
    return {"logprobs": k} if api == "completions" else {"logprobs": True, "top_logprobs": k}


def _entries(reply: Reply) -> list[Any]:
    return [entry for block in reply.logprobs for entry in block["content"]]


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("stream", [True, False])
def test_top_logprobs_greedy_is_always_top1_and_sampled_sometimes_not(
    api: str, stream: bool
) -> None:
    path = "/v1/completions" if api == "completions" else "/v1/chat/completions"
    greedy = _story(api, stream=stream, **_asks(api, 3))
    sampled = {**greedy, "temperature": 0.9}
    layout = "openai" if api == "chat" else "llama_cpp"
    for fmt in ("openai", layout):
        with FakeServerThread(fake(logprobs_format=fmt)) as server:
            g = alone(server.base_url, greedy, path)
            s = alone(server.base_url, sampled, path)
        if api == "completions" and fmt == "openai":
            assert _top1_misses(g) == 0 and _top1_misses(s) > 0
            tokens = [t for block in g.logprobs for t in block["tokens"]]
            assert "".join(tokens) == g.text
            continue
        for reply, sampled_row in ((g, False), (s, True)):
            entries = _entries(reply)
            assert "".join(e["token"] for e in entries) == reply.text
            assert all(len(e["top_logprobs"]) == 3 for e in entries)
            misses = [e for e in entries if e["top_logprobs"][0]["token"] != e["token"]]
            assert bool(misses) == sampled_row
            for e in misses:  # the passed-over token is likelier than the chosen one
                assert e["top_logprobs"][0]["logprob"] > e["logprob"]
                assert e["token"] in [t["token"] for t in e["top_logprobs"]]


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_logprobs_format_none_never_returns_logprobs(api: str) -> None:
    path = "/v1/completions" if api == "completions" else "/v1/chat/completions"
    for stream in (True, False):
        with FakeServerThread(fake(logprobs_format="none")) as server:
            reply = alone(server.base_url, _story(api, stream=stream, **_asks(api, 2)), path)
        assert reply.status == 200 and reply.text
        assert reply.logprobs and all(block is None for block in reply.logprobs)


def test_the_cli_serves_chat_only_without_logprobs() -> None:
    args = ("--no-completions", "--logprobs-format", "none", "--fault", "flip_once",
            "--fault-when", "warmup", "--ttft-ms", "1", "--itl-ms", "0")  # fmt: skip
    with FakeServerProcess(*args) as server:
        completions = alone(server.base_url, counting(0, 2000, 3))
        chat = alone(server.base_url, _story("chat", stream=True, **_asks("chat", 2)),
                     "/v1/chat/completions")  # fmt: skip
    assert completions.status == 404
    assert chat.status == 200 and chat.text
    assert all(block is None for block in chat.logprobs)
