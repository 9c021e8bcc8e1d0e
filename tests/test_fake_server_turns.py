"""The fake server on conversation turns: healthy answers, and its two conversation bug modes.

The turns are the conversation shape's own, built as the probe builds them at send time.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from batchprobe.client import CompletionRequest, OpenAIClient, run
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.results.items import WorkItem
from batchprobe.workload.checks import check_count
from batchprobe.workload.conversation import continue_turn
from batchprobe.workload.shapes import ShapeContext, default_shapes


def turns() -> tuple[list[WorkItem], list[WorkItem], list[WorkItem]]:
    """The shape's completions conversation, its chat one, and its count continuation."""
    ctx = ShapeContext(
        run_id="f", seed=1, sessions=4, haystack_tokens=300, max_tokens=24,
        recall_max_tokens=16, prompt_style="completion", chars_per_token=3.2, both_paths=True,
    )  # fmt: skip
    by: dict[int, list[WorkItem]] = {}
    for item in default_shapes().get("conversation").build(ctx).items:
        assert item.turn is not None
        by.setdefault(item.turn.conversation, []).append(item)
    completions, chat, count = by.values()
    return completions, chat, count


async def _converse(
    url: str, conversations: list[list[WorkItem]], cold: bool = False
) -> list[list[tuple[WorkItem, str]]]:
    """Each conversation's turns in order (conversations interleaved by turn), each built from
    the answer before; returns (the turn as sent, its answer)."""
    async with OpenAIClient(url) as client:
        done: list[list[tuple[WorkItem, str]]] = [[] for _ in conversations]
        for depth in range(max(len(c) for c in conversations)):
            for index, conv in enumerate(conversations):
                if depth >= len(conv):
                    continue
                item = conv[depth]
                if depth:
                    item = continue_turn(item, *done[index][-1])
                done[index].append((item, await _send(client, item, cold)))
        return done


async def _send(client: OpenAIClient, item: WorkItem, cold: bool) -> str:
    request = CompletionRequest(
        request_id=f"turn-{item.session}",
        api=item.api or "completions",
        prompt=item.prompt,
        messages=list(item.history),
        max_tokens=item.max_tokens,
        extra_body={"cache_prompt": False} if cold else {},
    )
    record = await client.complete(request)
    assert record.ok, record.error
    return record.text


def again(url: str, item: WorkItem, cold: bool = False) -> str:
    async def go() -> str:
        async with OpenAIClient(url) as client:
            return await _send(client, item, cold)

    return run(go())


def fake(fault: str = "none") -> FakeServerThread:
    return FakeServerThread(FakeServerConfig(ttft_ms=1, itl_ms=1, prefix_cache=True, fault=fault))


def test_a_healthy_fake_answers_each_turn_the_code_it_asks_and_continues_the_count() -> None:
    completions, chat, count = turns()
    with fake() as server:
        done = run(_converse(server.base_url, [completions, chat, count]))
    for conv in done[:2]:
        assert [answer.strip() for _, answer in conv] == [t.expected_code for t, _ in conv]
    for sent, answer in done[2]:
        assert sent.count is not None
        assert check_count(sent.count, answer, [answer]).passed, (sent.prompt, answer)
    assert done[2][1][0].prompt == done[2][0][0].prompt + done[2][0][1]


def test_stale_turn_answers_a_re_sent_turn_1_from_its_grown_conversation() -> None:
    completions, chat, _ = turns()
    with fake("stale_turn") as server:
        done = run(_converse(server.base_url, [completions, chat]))
        # The first time through, nothing was re-sent: every turn healthy.
        for conv in done:
            assert [answer.strip() for _, answer in conv] == [t.expected_code for t, _ in conv]
        for conv in (completions, chat):
            # Turn 1 again: answered from turn 3's cache, with the code turn 3 asks for.
            assert again(server.base_url, conv[0]).strip() == conv[2].expected_code
            # A cold request is not served from the cache.
            assert again(server.base_url, conv[0], cold=True).strip() == conv[0].expected_code


def test_conversation_leak_answers_a_later_turn_from_another_conversation() -> None:
    completions, chat, count = turns()
    with fake("conversation_leak") as server:
        done = run(_converse(server.base_url, [completions, chat, count]))
        answers = [[answer.strip() for _, answer in conv] for conv in done]
        # Turn 1 continues nothing: its own code. Each later turn: the other one's same turn.
        assert answers[0][0] == completions[0].expected_code
        assert answers[1][0] == chat[0].expected_code
        assert answers[0][1:] == [t.expected_code for t in chat[1:]]
        assert answers[1][1:] == [t.expected_code for t in completions[1:]]
        # The count asks for no key: it keeps counting.
        for sent, answer in done[2]:
            assert sent.count is not None
            assert check_count(sent.count, answer, [answer]).passed
        # Cold, the same turn is answered from its own prompt.
        assert again(server.base_url, done[0][1][0], cold=True).strip() == completions[1].expected_code


@pytest.mark.parametrize("fault", ["conversation_leak", "stale_turn"])
def test_the_conversation_bugs_need_the_prefix_cache(fault: str) -> None:
    with pytest.raises(ValidationError, match="needs prefix_cache true"):
        FakeServerConfig(fault=fault)  # type: ignore[arg-type]
