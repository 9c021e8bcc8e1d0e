"""The conversation shape's plan and its turns as built at send time."""

from __future__ import annotations

import itertools

import pytest

from batchprobe.client.types import ChatMessage, CompletionRequest
from batchprobe.judge.verdict import floor_recall
from batchprobe.probe.metrics import arm_metrics
from batchprobe.results.items import CountSpec, WorkItem
from batchprobe.results.models import SessionResult
from batchprobe.results.shapes import Situation
from batchprobe.workload.checks import check_count
from batchprobe.workload.conversation import continue_turn
from batchprobe.workload.needle import asked_code, asked_key
from batchprobe.workload.shapes import ShapeContext, ShapePlan, default_shapes
from batchprobe.workload.shapes.conversation import ASKS, COUNT_TURNS, KEYS


def context(serves_chat: bool = True, prompt_style: str = "completion") -> ShapeContext:
    return ShapeContext(
        run_id="r1", seed=3, sessions=4, haystack_tokens=600, max_tokens=48,
        recall_max_tokens=16, prompt_style=prompt_style, chars_per_token=3.2,
        both_paths=serves_chat,
    )  # fmt: skip


def plan(ctx: ShapeContext | None = None) -> ShapePlan:
    return default_shapes().get("conversation").build(ctx or context())


def conversations(p: ShapePlan) -> dict[int, list[WorkItem]]:
    by: dict[int, list[WorkItem]] = {}
    for item in p.items:
        assert item.turn is not None
        by.setdefault(item.turn.conversation, []).append(item)
    return by


def test_it_is_in_the_default_set_with_the_cache_on() -> None:
    assert "conversation" in default_shapes().names
    p = plan()
    assert p.prefix_cache is True
    assert len({i.session for i in p.items}) == len(p.items), "one session per turn"


def test_two_recall_conversations_one_per_path_and_a_count_over_completions() -> None:
    convs = list(conversations(plan()).values())
    recall = [c for c in convs if c[0].workload == "recall"]
    count = [c for c in convs if c[0].workload == "decode"]
    assert [c[0].api for c in recall] == ["completions", "chat"]
    assert len(count) == 1 and len(count[0]) == COUNT_TURNS
    assert {i.api for i in count[0]} == {"completions"}
    for turns in convs:
        assert [t.turn.index for t in turns if t.turn] == list(range(1, len(turns) + 1))
        assert turns[0].turn is not None and turns[0].turn.continues is None
        for before, after in itertools.pairwise(turns):
            assert after.turn is not None and after.turn.continues == before.session


def test_every_turn_asks_its_own_code_planted_in_its_conversation_no_two_alike() -> None:
    p = plan()
    codes = [i.expected_code for i in p.items if i.workload == "recall"]
    assert len(set(codes)) == len(codes) == 6
    for turns in conversations(p).values():
        if turns[0].workload != "recall":
            continue
        whole = "".join(t.prompt for t in turns)  # every message of the conversation
        for turn, key in zip(turns, ASKS):
            assert asked_key(turn.prompt) == key
            assert f"{key}={turn.expected_code}" in whole
        # Turn 1 asks what it plants itself; the later ones what an earlier turn planted.
        assert asked_code(turns[0].prompt) == turns[0].expected_code
        for index, turn in enumerate(turns[1:], start=1):
            earlier = "".join(t.prompt for t in turns[:index])
            assert f"{ASKS[index]}={turn.expected_code}" in earlier
    assert set(ASKS) == set(KEYS)


def test_turns_go_out_one_depth_per_phase_and_turn_1_again_after_turn_3() -> None:
    p = plan()
    for turns in conversations(p).values():
        phases = [next(s.phase for s in p.sends if s.item == t and s.copy_index == 0) for t in turns]
        assert phases == sorted(phases) and len(set(phases)) == len(phases)
        copies = [s for s in p.sends if s.item.session == turns[0].session and s.copy_index]
        if turns[0].workload == "recall":
            assert len(copies) == 1 and copies[0].phase > phases[-1], "re-sent after its last turn"
        else:
            assert copies == []
    # The count's turns run after every recall phase (one length per phase).
    recall_phases = {s.phase for s in p.sends if s.item.workload == "recall"}
    assert min(s.phase for s in p.sends if s.item.workload == "decode") > max(recall_phases)


def test_a_completions_turn_is_the_turn_before_plus_its_answer_plus_the_message() -> None:
    t1, t2, t3 = next(c for c in conversations(plan()).values() if c[0].api == "completions")
    sent2 = continue_turn(t2, t1, " 1234567\n")
    assert sent2.prompt == t1.prompt + " 1234567\n" + t2.prompt
    sent3 = continue_turn(t3, sent2, " 7654321")
    assert sent3.prompt.startswith(sent2.prompt + " 7654321")
    assert sent3.history == () and asked_key(sent3.prompt) == ASKS[2]
    assert len({t1.digest(), sent2.digest(), sent3.digest()}) == 3


def test_a_chat_turn_carries_the_conversation_as_messages() -> None:
    t1, t2, t3 = next(c for c in conversations(plan()).values() if c[0].api == "chat")
    sent2 = continue_turn(t2, t1, "1234567")
    sent3 = continue_turn(t3, sent2, "7654321")
    assert sent3.prompt == t3.prompt
    assert sent3.history == (
        ChatMessage(role="user", content=t1.prompt),
        ChatMessage(role="assistant", content="1234567"),
        ChatMessage(role="user", content=t2.prompt),
        ChatMessage(role="assistant", content="7654321"),
    )
    # Another answer before it is another request: the digest tells them apart.
    assert continue_turn(t3, continue_turn(t2, t1, "1"), "7654321").digest() != sent3.digest()


def test_the_count_continuation_is_exactly_the_prompt_plus_its_whole_completion() -> None:
    t1, t2, t3 = next(c for c in conversations(plan()).values() if c[0].workload == "decode")
    assert t1.count is not None
    first = t1.count.first
    answer1 = "".join(f" {n}," for n in range(first, first + 3)) + f" {first + 3}"[:3]
    sent2 = continue_turn(t2, t1, answer1)
    assert sent2.prompt == t1.prompt + answer1
    assert sent2.count is not None and sent2.count.skip == len(answer1)
    rest = f" {first + 3}"[3:] + f", {first + 4},"
    assert check_count(sent2.count, rest, [rest]).passed
    # Continuing another number (a count restarted, or another session's) breaks it.
    assert not check_count(sent2.count, f" {first}, {first + 1},", ["x"]).passed
    sent3 = continue_turn(t3, sent2, rest)
    assert sent3.prompt == sent2.prompt + rest
    assert sent3.count is not None and check_count(sent3.count, f" {first + 5},", ["x"]).passed


def test_a_broken_count_leaves_the_next_turn_undetermined() -> None:
    spec = CountSpec(first=3000, leading_space=True)
    assert spec.continued(" 3000, 3001,") == spec.model_copy(update={"skip": 12})
    assert spec.continued(" 3000, 3002,") is None
    assert CountSpec(first=3000, leading_space=False).continued("3000,") is None


def test_without_the_completions_path_there_is_no_count_continuation() -> None:
    p = plan(context(serves_chat=False, prompt_style="chat"))
    assert {i.workload for i in p.items} == {"recall"}
    assert any("no count continuation" in n for n in p.notes)


def test_one_session_is_not_a_conversation_side_by_side() -> None:
    ctx = context()
    ctx.sessions = 1
    assert default_shapes().get("conversation").unavailable(ctx) is not None


def test_earlier_messages_go_only_with_chat() -> None:
    with pytest.raises(ValueError, match="messages: only a chat request"):
        CompletionRequest(
            request_id="x", prompt="p", max_tokens=1,
            messages=[ChatMessage(role="user", content="u")],
        )  # fmt: skip


def _recall_session(session: int, api: str, hit: bool) -> SessionResult:
    situation = Situation(
        shape="conversation", api=api, arrival_s=0.0, in_flight_at_arrival=0,  # type: ignore[arg-type]
        decoding_at_arrival=0, max_tokens=16, params="greedy", prefix_cache=False,
    )  # fmt: skip
    return SessionResult(
        arm="serial", workload="recall", session=session, request_id=str(session),
        hit=hit, start_s=0.0, end_s=1.0, situation=situation,
    )  # fmt: skip


def test_the_recall_floor_reads_the_best_request_path() -> None:
    # A base model: every completions needle found, every chat one missed (not judged).
    sessions = [_recall_session(n, "completions", True) for n in range(4)]
    sessions += [_recall_session(n, "chat", False) for n in range(4, 8)]
    assert arm_metrics(sessions, 1.0).recall == 0.5
    assert floor_recall(sessions) == 1.0
    assert floor_recall(sessions[4:]) == 0.0
    assert floor_recall([]) is None
