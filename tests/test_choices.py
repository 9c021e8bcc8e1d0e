"""A row asking for several choices (n) checks each one: every index once, each ended, the
greedy row's every choice its own count; and the fake answers them, or overrides them."""

from __future__ import annotations

import asyncio

from batchprobe.client import OpenAIClient
from batchprobe.client.types import ChoiceText, CompletionRequest
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.results.items import SamplingParams, WorkItem
from batchprobe.workload.checks import self_check
from batchprobe.workload.decode import counting_item


def _row(n: int | None, temperature: float = 0.0) -> WorkItem:
    params = SamplingParams(n=n, temperature=temperature)
    return counting_item(run_id="r", session=3, start=3000, max_tokens=8, shape="params",
                         api="completions", params=params)


COUNT = " 3004, 3005,"


def test_a_greedy_row_of_two_choices_checks_both_as_its_count() -> None:
    item = _row(2)
    good = self_check(item, COUNT, [COUNT], [ChoiceText(index=1, text=COUNT, finish_reason="length")])
    assert good is not None and good.passed and good.kind == "choices"
    broken = self_check(item, COUNT, [COUNT], [ChoiceText(index=1, text=" 7004, 7005,",
                                                          finish_reason="length")])
    assert broken is not None and not broken.passed and broken.kind == "count"
    assert broken.detail is not None and broken.detail.startswith("choice 1: count broke")
    # Its first choice broken: the count's own check says so first.
    first = self_check(item, " 3004, 9", [" 3004, 9"], [ChoiceText(index=1, text=COUNT)])
    assert first is not None and first.kind == "count" and "choice" not in (first.detail or "")


def test_a_missing_doubled_or_unended_choice_fails_sampled_rows_too() -> None:
    item = _row(2, temperature=1.0)
    missing = self_check(item, COUNT, [COUNT], [])
    assert missing is not None and missing.kind == "choices" and not missing.passed
    assert missing.detail == "asked for 2 choices; got indices [0]"
    wrong = self_check(item, COUNT, [COUNT], [ChoiceText(index=2, text="x", finish_reason="stop")])
    assert wrong is not None and wrong.detail == "asked for 2 choices; got indices [0, 2]"
    unended = self_check(item, COUNT, [COUNT], [ChoiceText(index=1, text="x")])
    assert unended is not None and not unended.passed and "no finish reason" in (unended.detail or "")
    # Sampled: any text of its own with a finish is a valid choice.
    ok = self_check(item, COUNT, [COUNT], [ChoiceText(index=1, text=" 3004, 3105",
                                                      finish_reason="length")])
    assert ok is not None and ok.passed
    # A row that asked for one has no choices check.
    single = self_check(_row(None), COUNT, [COUNT])
    assert single is not None and single.kind == "count"


def _two(prompt: str) -> CompletionRequest:
    return CompletionRequest(request_id=prompt[:8], prompt=prompt, max_tokens=6, n=2)


def test_the_fake_answers_two_choices_and_overrides_them_under_its_fault() -> None:
    async def both(url: str) -> list[list[str]]:
        async with OpenAIClient(url) as client:
            records = await asyncio.gather(
                client.complete(_two("[a] Counting from 100: 100, 101, 102, 103,")),
                client.complete(_two("[b] Counting from 900: 900, 901, 902, 903,")),
            )
        return [[r.text, *(c.text for c in r.choices)] for r in records]

    with FakeServerThread(FakeServerConfig(ttft_ms=30, itl_ms=5)) as server:
        healthy = asyncio.run(both(server.base_url))
    assert all(first == second for first, second in healthy), healthy
    assert healthy[0][0].startswith(" 104,") and healthy[1][0].startswith(" 904,")
    config = FakeServerConfig(ttft_ms=30, itl_ms=5, fault="n_override", fault_when="concurrent")
    with FakeServerThread(config) as server:
        overridden = asyncio.run(both(server.base_url))
    # Each one's second choice is the other's count.
    assert overridden[0][0].startswith(" 104,") and overridden[0][1].startswith(" 904,")
    assert overridden[1][0].startswith(" 904,") and overridden[1][1].startswith(" 104,")
