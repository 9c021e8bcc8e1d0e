"""A corpus expectation checked against real probe verdicts (of the fake server): every
field that differs is named, and a matching verdict gives no mismatch."""

from __future__ import annotations

from pathlib import Path

from batchprobe.client.types import ErrorKind
from batchprobe.corpus import Expectation, check
from batchprobe.fake import FakeServerThread
from batchprobe.probe import plan_run, run_plan
from batchprobe.results.models import Outcome, Status

from .fakeprobe import probe
from .test_fake_probe import fast


def test_a_dropping_server_matches_a_broken_expectation_and_not_a_clean_one(
    tmp_path: Path,
) -> None:
    report = probe(
        tmp_path, fast(fault="drop_after_read", fault_when="concurrent", ttft_ms=300.0),
        shapes=["burst"],
    )  # fmt: skip
    broken = Expectation(outcome=Outcome.FAIL, correct=False, error_kinds=[ErrorKind.DISCONNECTED])
    assert check(report, broken) == []
    clean = Expectation(
        outcome=Outcome.PASS, correct=True, no_errors=True, error_kinds=[ErrorKind.HTTP_STATUS],
        diagnosed=["some-issue"],
    )  # fmt: skip
    found = check(report, clean)
    assert "outcome is FAIL, expected PASS" in found
    assert "correct is False, expected True" in found
    assert "requests failed: ['disconnected']" in found
    assert any(m.startswith("no http_status error") for m in found)
    assert any(m.startswith("some-issue was not diagnosed") for m in found)
    assert len(found) == 5


def test_a_healthy_server_is_clean(tmp_path: Path) -> None:
    report = probe(tmp_path, fast(batching="continuous", slowdown=0.05), shapes=["burst"])
    assert check(report, Expectation(correct=True, no_errors=True, not_diagnosed=["x"])) == []
    assert check(report, Expectation(correct=False)) == ["correct is True, expected False"]
    # A case whose bug kills the engine expects the run to end engine_died.
    died = check(report, Expectation(status=Status.ENGINE_DIED))
    assert died == ["the run ended ok, expected engine_died"]


def test_a_clean_expectation_needs_an_answer_judged_and_correct_not_false(
    tmp_path: Path,
) -> None:
    clean = Expectation(clean=True)
    # The default plan against a server that answers everything with 500: nothing judged.
    with FakeServerThread(fast(fault="http_500")) as server:
        plan = plan_run(base_url=server.base_url, output=tmp_path / "all500.json")
        all_500 = run_plan(plan)
    assert all_500.verdict.correct is None
    assert check(all_500, clean) == ["no answer was judged, expected a clean run that judged some"]
    cross_talk = probe(tmp_path, fast(fault="cross_talk", fault_when="concurrent"), shapes=["burst"])
    assert check(cross_talk, clean) == ["correct is False, expected not false (clean)"]
    healthy = probe(tmp_path, fast(batching="continuous"), shapes=["burst"])
    assert check(healthy, clean) == []
