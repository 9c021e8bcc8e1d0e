"""The conversation shape through the default plan against the fake: its two cache bugs are
cross-talk naming the right source sessions, and a healthy fake stays clean."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe import plan_run, run_plan
from batchprobe.results import Outcome, Report, read_report
from batchprobe.results.models import ArmResult, SessionResult

_SHAPE_IN_REASON = re.compile(r"shape (\w+):")


def default_plan(tmp_path: Path, fault: str) -> Report:
    """The default plan (a sweep), kept small as the other sweep tests keep it."""
    output = tmp_path / "verdict.json"
    config = FakeServerConfig(ttft_ms=30.0, itl_ms=3.0, prefix_cache=True, fault=fault)  # type: ignore[arg-type]
    with FakeServerThread(config) as server:
        # Every shape but aborts, whose own conversation (a dropped turn, then the next one)
        # the turn faults hit too: these tests read the conversation shape's turns.
        plan = plan_run(
            base_url=server.base_url, output=output, sessions=4, haystack_tokens=200,
            max_tokens=24, shapes="burst,join,ragged,early,repeat,params,conversation",
        )
        report = run_plan(plan)
    assert read_report(output) == report
    return report


def turns(arm: ArmResult) -> list[SessionResult]:
    return [s for s in arm.sessions if s.shape == "conversation" and s.workload == "recall"]


def turn_of(arm: ArmResult, conversation: int, index: int) -> int:
    """The session of turn ``index`` of ``conversation`` in ``arm``."""
    return next(
        s.session for s in turns(arm)
        if s.situation and s.situation.conversation == conversation and s.situation.turn == index
    )  # fmt: skip


def flagged(report: Report) -> list[tuple[ArmResult, SessionResult]]:
    return [(arm, s) for arm in report.arms for s in arm.sessions if s.cross_talk_from]


def assert_failed_on_conversation_only(report: Report) -> None:
    assert report.verdict.outcome is Outcome.FAIL and report.verdict.correct is False
    blamed = {m for r in report.verdict.reasons for m in _SHAPE_IN_REASON.findall(r)}
    assert blamed == {"conversation"}, report.verdict.reasons
    assert all(s.shape == "conversation" for _, s in flagged(report))


def test_conversation_leak_is_cross_talk_from_the_other_conversations_turn(tmp_path: Path) -> None:
    report = default_plan(tmp_path, "conversation_leak")
    assert_failed_on_conversation_only(report)
    hits = flagged(report)
    assert hits
    for arm, s in hits:
        assert s.situation is not None and s.situation.turn in (2, 3), "turn 1 continues nothing"
        assert arm.spec.concurrency > 1, "the cold serial arm is spared"
        # The same turn of another conversation: a step has one, so an earlier step's (the
        # launch's prefix cache still holds it), named across arms.
        (source,) = [t for a in report.arms for t in turns(a) if t.session in s.cross_talk_from]
        assert source.situation is not None and source.situation.turn == s.situation.turn
        assert source.situation.conversation != s.situation.conversation
    # Every later turn of the failing step's conversation; over the run, both request paths
    # (a step's conversation takes the other path from the step before).
    arm = hits[0][0]
    later = {t.session for t in turns(arm) if t.situation and t.situation.turn != 1}
    assert {s.session for a, s in hits if a is arm} == later
    assert {s.situation.api for _, s in hits if s.situation} == {"completions", "chat"}
    line = next(r for r in report.verdict.reasons if "shape conversation:" in r)
    assert f"answered with the code of session(s) {hits[0][1].cross_talk_from[0]}" in line


def test_stale_turn_is_cross_talk_from_the_turn_the_conversation_grew_to(tmp_path: Path) -> None:
    report = default_plan(tmp_path, "stale_turn")
    assert_failed_on_conversation_only(report)
    hits = flagged(report)
    for arm, s in hits:
        assert s.situation is not None and s.situation.turn == 1
        assert s.situation.conversation is not None
        assert s.cross_talk_from == [turn_of(arm, s.situation.conversation, 3)]
    # The re-send after turn 3 of the failing step's conversation is among them.
    arm = hits[0][0]
    resent = [s for a, s in hits if a is arm and s.situation and s.situation.copy_index == 1]
    assert len(resent) == 1


def test_a_healthy_fake_with_its_cache_passes_every_turn_judged(tmp_path: Path) -> None:
    report = default_plan(tmp_path, "none")
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    steps = [a for a in report.arms if a.spec.concurrency > 1]
    assert steps
    for arm in steps:
        conv = [s for s in arm.sessions if s.shape == "conversation"]
        # A conversation of 3 turns, its re-send, a count over 3 turns, at every step.
        assert len(conv) == 7, arm.spec.name
        assert all(s.check is not None and s.check.passed for s in conv), arm.spec.name
        assert {s.situation.turn for s in conv if s.situation} == {1, 2, 3}
        wave = next(w for w in arm.waves if w.shape == "conversation")
        assert wave.prefix_cache.startswith("on")


@pytest.mark.parametrize("fault", ["conversation_leak", "stale_turn"])
def test_without_the_conversation_shape_the_bugs_go_unseen(tmp_path: Path, fault: str) -> None:
    # What the shape adds: the same server passes every one-shot shape.
    output = tmp_path / "verdict.json"
    config = FakeServerConfig(ttft_ms=30.0, itl_ms=3.0, prefix_cache=True, fault=fault)  # type: ignore[arg-type]
    with FakeServerThread(config) as server:
        plan = plan_run(
            base_url=server.base_url, output=output, sessions=4, haystack_tokens=200,
            max_tokens=24, shapes="burst,join,ragged,early,repeat,params",
        )  # fmt: skip
        report = run_plan(plan)
    assert report.verdict.correct is True, report.verdict.reasons
