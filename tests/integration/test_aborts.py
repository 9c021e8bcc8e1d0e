"""Client aborts through the default plan: every step from depth 2 drops streams, re-sends
them and sends fresh sessions beside them; each abort bug of the fake (firing only once a
client hangs up) fails the run, named in the findings, JUnit and the gate."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from batchprobe.results import Outcome, Report
from batchprobe.results.findings import FindingKind
from batchprobe.results.sessions import SessionResult

from .judgeprobe import assert_every_output_fails, default_run, junit_failures


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("aborts")


# A first token 30 ms out: a request sent waits for it long enough that a drop meets it.
TTFT = {"ttft_ms": 30.0, "itl_ms": 5.0}


@pytest.fixture(scope="module")
def clean(folder: Path) -> tuple[Report, Path]:
    report, path = default_run(folder, "clean", **TTFT)
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    return report, path


def _aborts(report: Report, arm: str) -> list[SessionResult]:
    return [s for a in report.arms if a.spec.name == arm for s in a.sessions
            if s.shape == "aborts"]


def test_every_step_from_two_drops_streams_and_judges_what_follows(
    clean: tuple[Report, Path],
) -> None:
    report, _ = clean
    env = report.envelope
    assert env is not None
    steps = [s.arm for s in env.steps if s.n >= 2]
    assert steps
    for arm in steps:
        sent = _aborts(report, arm)
        dropped = [s for s in sent if s.hung_up]
        # A counting prompt and a conversation turn, each cut after its first chunk or so.
        assert {s.situation.role for s in dropped if s.situation} == {"retried", "dropped-turn"}
        assert all(s.error is None and 1 <= len(s.chunk_ends) < 96 for s in dropped)
        # Its retry (the same session, sent again), the fresh session, the long prompt and
        # the next turn each came back whole and were judged.
        roles = {(s.situation.role, s.situation.copy_index) for s in sent
                 if s.situation and not s.hung_up}
        assert {("retried", 1), ("fresh", 0), ("prefill", 0), ("next-turn", 0)} <= roles, roles
        judged = [j for j in report.judged if j.arm == arm and j.shape == "aborts"]
        assert {j.check for j in judged if j.judged} >= {"errors", "cross_talk", "count"}
        # The server ran nothing its clients had left, once the step was over.
        capacity = next(a.capacity for a in report.arms if a.spec.name == arm)
        assert capacity is not None and capacity.hung_up == len(dropped)
        assert capacity.drained_s is not None and capacity.excess_s < 1.0
    # At least one drop came while another request of its wave waited for a first token.
    waiting = [s for arm in steps for s in _aborts(report, arm)
               if s.hung_up and s.situation and s.situation.waiting_at_hang_up]
    assert waiting
    assert not [f for f in report.findings if f.kind is FindingKind.ABORT_IGNORED]


def test_a_dropped_streams_content_in_its_neighbours_is_cross_talk_naming_it(
    folder: Path, clean: tuple[Report, Path],
) -> None:
    report, path = default_run(folder, "abort-leak", fault="abort_leak")
    assert report.verdict.correct is False and report.verdict.outcome is Outcome.FAIL
    dropped = {s.session for a in report.arms for s in a.sessions if s.hung_up}
    # Every request after the drop (the fresh session, and any shape's beside it) holds the
    # dropped stream's count or code: cross-talk naming the dropped session (and, for a
    # dropped turn's code, the next turn that asks for the same one).
    leaks = [f for f in report.findings if f.hard and f.kind is FindingKind.CROSS_TALK]
    assert leaks and all(set(f.sources) & dropped for f in leaks), leaks
    assert_every_output_fails(report, path, clean[1], leaks[0].shape or "", "cross_talk")


def test_a_dropped_request_that_never_stops_is_capacity_lost_for_good(
    folder: Path, clean: tuple[Report, Path],
) -> None:
    report, path = default_run(folder, "abort-held", fault="abort_held")
    v = report.verdict
    assert v.correct is False and v.outcome is Outcome.FAIL, v.reasons
    held = [f for f in report.findings if f.kind is FindingKind.ABORT_IGNORED]
    assert held and all(f.hard and f.shape == "aborts" for f in held)
    assert "never stopped" in held[0].message and held[0].sessions
    assert_every_output_fails(report, path, clean[1], "aborts", "aborts")


def test_a_dropped_request_run_on_to_its_max_tokens_is_a_soft_finding(folder: Path) -> None:
    # Tokens of 40 ms: a dropped count of 96 runs on for about 4 s, past a 1 s grace.
    report, _ = default_run(folder, "abort-ignored", {"sweep": "1,2", "abort_grace_s": 1.0},
                            fault="abort_ignored", itl_ms=40.0)
    ran_on = [f for f in report.findings if f.kind is FindingKind.ABORT_IGNORED]
    assert ran_on and all(f.severity == "soft" for f in ran_on), ran_on
    assert "ran on" in ran_on[0].message
    v = report.verdict
    assert v.outcome is Outcome.PASS and v.correct is True, v.reasons
    assert any(r.startswith("soft: ") and "ran on" in r for r in v.reasons)


def test_a_server_wedged_by_an_abort_gives_a_verdict_naming_it(folder: Path) -> None:
    timeout = 30.0
    started = time.monotonic()
    report, path = default_run(folder, "abort-wedge", {"request_timeout_s": timeout},
                               fault="abort_wedge", **TTFT)
    # The steps before the wedge take seconds; the wedge is found within two timeouts.
    assert time.monotonic() - started < 2 * timeout + 20
    v = report.verdict
    assert v.correct is False and v.outcome is Outcome.FAIL, v.reasons
    dead = [f for f in report.findings if f.kind is FindingKind.SERVER_DEAD]
    assert dead and dead[0].hard
    # It names the abort and who waited for a first token when it came.
    assert "after 1 client abort" in dead[0].message or "client abort(s)" in dead[0].message
    assert "waited for their first token" in dead[0].message
    assert dead[0].sessions and all(s in {x.session for a in report.arms for x in a.sessions
                                          if x.hung_up} for s in dead[0].sessions)
    failed = junit_failures(report, path.parent)
    assert any(name.endswith(".server_alive") for name in failed), sorted(failed)
