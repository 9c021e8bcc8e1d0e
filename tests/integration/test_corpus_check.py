"""A corpus expectation checked against real probe verdicts (of the fake server): every
field that differs is named, and a matching verdict gives no mismatch."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.client.types import ErrorKind
from batchprobe.corpus import Case, Expectation, check, run_case
from batchprobe.corpus import run as corpus_run
from batchprobe.corpus.models import VersionCase
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


def _flaky_case(tries: int) -> Case:
    broken = VersionCase(version="1.0", label="broken", default_plan_not_checked="a test",
                         expect=Expectation(outcome=Outcome.FAIL, correct=False))
    fixed = VersionCase(version="2.0", label="fixed", default_plan_not_checked="a test",
                        expect=Expectation(clean=True))
    return Case(case_id="flaky", title="a bug that needs requests to meet by timing",
                issue_id="none", references=[], engine="llama.cpp", model="m", tries=tries,
                run={"shapes": "burst", "sessions": 4, "haystack_tokens": 200, "max_tokens": 24},
                versions=[broken, fixed])


def _runs_against(monkeypatch: pytest.MonkeyPatch, urls: list[str]) -> list[str]:
    """run_case's engine runs sent, one after another, to the fake servers at ``urls``."""
    left = iter(urls)
    monkeypatch.setattr(corpus_run, "install", lambda ref, cache_dir=None: None)

    def to_the_next(**options: object) -> object:
        for name in ("engine", "model", "patches", "engine_args", "cache_dir"):
            options.pop(name)
        return plan_run(base_url=next(left), **options)  # type: ignore[arg-type]

    monkeypatch.setattr(corpus_run, "plan_run", to_the_next)
    return urls


@pytest.mark.parametrize("wrong_on", [1, 2, None])
def test_a_version_expected_wrong_is_run_again_until_its_bug_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wrong_on: int | None
) -> None:
    healthy = fast(batching="continuous")
    faulty = fast(fault="cross_talk", fault_when="concurrent")
    configs = [faulty if i == wrong_on else healthy for i in (1, 2, 3)]
    with FakeServerThread(configs[0]) as a, FakeServerThread(configs[1]) as b, \
            FakeServerThread(configs[2]) as c:
        _runs_against(monkeypatch, [a.base_url, b.base_url, c.base_url])
        result = run_case(_flaky_case(tries=3), "broken", tmp_path)
    assert result.tries == (wrong_on or 3)
    assert result.as_expected is (wrong_on is not None), result.mismatches
    assert result.verdict_file.endswith("-try2.json" if wrong_on == 2 else
                                        "-try3.json" if wrong_on is None else "broken.json")
    assert len(list(tmp_path.glob("flaky-broken*.json"))) == result.tries


def test_a_version_expected_clean_runs_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeServerThread(fast(fault="cross_talk", fault_when="concurrent")) as a, \
            FakeServerThread(fast(batching="continuous")) as b:
        _runs_against(monkeypatch, [a.base_url, b.base_url])
        result = run_case(_flaky_case(tries=3), "fixed", tmp_path)
    assert result.tries == 1
    assert result.mismatches == ["correct is False, expected not false (clean)"]
