"""Every output marks a request by its judged status (``judge.views``), never by what the
answer showed on its own; the headline shows the verdict's own parallel figure."""

from __future__ import annotations

from batchprobe.client.types import ErrorKind, RequestError
from batchprobe.judge.compare import compare
from batchprobe.judge.judge import judge
from batchprobe.judge.verdict import decide
from batchprobe.judge.views import RequestStatus, RequestViews
from batchprobe.probe.metrics import arm_metrics
from batchprobe.report._headline import answer, cards
from batchprobe.report._sweep_plots import _colour
from batchprobe.report.html import session_grid
from batchprobe.report.jsonl import read_jsonl, render_jsonl
from batchprobe.results.findings import FindingKind
from batchprobe.results.models import (
    ArmResult,
    ArmSpec,
    Environment,
    Report,
    RunConfig,
    SessionResult,
    Status,
)
from batchprobe.results.shapes import SelfCheck, Situation
from batchprobe.results.sweep import Envelope, SweepStep
from batchprobe.results.thresholds import Thresholds

_ENV = Environment(batchprobe_version="0", python="3", platform="test")
_REFUSED = RequestError(kind=ErrorKind.HTTP_STATUS, message="HTTP 404", http_status=404)
_MISSED = SelfCheck(kind="recall", passed=False, detail="missed its needle")


def _s(arm: str, session: int, **kw: object) -> SessionResult:
    values: dict[str, object] = {
        "arm": arm, "workload": "recall", "session": session, "request_id": f"{arm}-{session}",
        "start_s": 0.0, "first_token_s": 0.1, "last_token_s": 1.0, "end_s": 1.0,
        "text": "the code is 1234", "chunk_ends": [4, 9, 12, 16], "completion_tokens": 4,
        "hit": True, "check": SelfCheck(kind="recall", passed=True),
        "situation": Situation(shape="burst", api="completions", arrival_s=0.0,
                               in_flight_at_arrival=0, decoding_at_arrival=0, max_tokens=16,
                               params="greedy", prefix_cache=False),
        **kw,
    }
    return SessionResult.model_validate(values)


def _arm(name: str, n: int, sessions: list[SessionResult]) -> ArmResult:
    arm = ArmResult(spec=ArmSpec(name=name, concurrency=n), state="done", sessions=sessions,
                    server_alive_after=True)
    arm.metrics = arm_metrics(sessions, 1.0)
    return arm


def _judged_report() -> Report:
    """s0 refused alone and together (not served), s1 a miss whose serial reference missed
    too (not judged), s2 cross-talk (wrong), s3 a hit (ok)."""
    serial = _arm("serial", 1, [
        _s("serial", 0, error=_REFUSED, hit=None, check=None, text="", chunk_ends=[]),
        _s("serial", 1, hit=False, check=_MISSED),
        _s("serial", 2), _s("serial", 3),
    ])
    concurrent = _arm("concurrent", 4, [
        _s("concurrent", 0, error=_REFUSED, hit=None, check=None, text="", chunk_ends=[]),
        _s("concurrent", 1, hit=False, check=_MISSED),
        _s("concurrent", 2, hit=False, check=_MISSED, cross_talk_from=[3]),
        _s("concurrent", 3),
    ])
    arms = [serial, concurrent]
    comps = [compare(concurrent, serial)]
    t = Thresholds(recall_floor=0.0)
    judgement = judge(arms, comps, t)
    verdict = decide(Status.OK, arms, comps, t, judgement=judgement)
    return Report(run_id="r", started_at="2026-01-01T00:00:00Z", status=Status.OK,
                  config=RunConfig(base_url="http://127.0.0.1:1"), environment=_ENV,
                  arms=arms, comparisons=comps, verdict=verdict, findings=judgement.findings,
                  judged=judgement.judged)


def test_a_request_s_status_comes_from_its_findings() -> None:
    report = _judged_report()
    views = RequestViews(report)
    status = {(a.spec.name, s.session): views.of(a.spec.name, s) for a in report.arms
              for s in a.sessions}
    assert status[("serial", 0)].status is RequestStatus.NOT_JUDGED
    assert status[("serial", 0)].label == "not served"
    assert status[("concurrent", 0)].status is RequestStatus.NOT_JUDGED
    # A miss whose reference missed too: the judge never judged it.
    assert status[("serial", 1)].status is RequestStatus.NOT_JUDGED
    assert status[("concurrent", 1)].status is RequestStatus.NOT_JUDGED
    assert status[("concurrent", 2)].status is RequestStatus.FAILED
    assert status[("concurrent", 2)].kinds == (FindingKind.CROSS_TALK,)
    assert status[("concurrent", 3)].status is RequestStatus.OK


def test_the_html_grid_colours_by_the_judged_status() -> None:
    report = _judged_report()
    cells = {row.session: [(c.css, c.label) for c in row.cells] for row in session_grid(report)}
    # Refused alone and together: not served, not an error.
    assert cells[0] == [("none", "not served"), ("none", "not served")]
    # A miss the judge never judged: grey, not the hard-miss colour.
    assert cells[1] == [("none", "not judged"), ("none", "not judged")]
    assert cells[2][1] == ("cross_talk", "cross-talk ←")
    assert cells[3] == [("hit", "hit"), ("hit", "hit")]


def test_jsonl_records_and_the_timeline_read_the_same_status() -> None:
    report = _judged_report()
    records = {(r.arm, r.session): r for r in read_jsonl(render_jsonl(report))}
    assert records[("concurrent", 0)].status is RequestStatus.NOT_JUDGED
    assert records[("concurrent", 1)].status is RequestStatus.NOT_JUDGED
    assert records[("concurrent", 2)].status is RequestStatus.FAILED
    assert records[("concurrent", 2)].failed == ["cross_talk"]
    assert records[("concurrent", 3)].status is RequestStatus.OK
    views = RequestViews(report)
    concurrent = report.arms[1]
    colours = [_colour(views.of("concurrent", s)) for s in concurrent.sessions]
    grey, purple, green = "#9e9e9e", "#8e24aa", "#66bb6a"
    assert colours == [grey, grey, purple, green]


def _step(n: int, speedup: float, correct: bool | None) -> SweepStep:
    return SweepStep(n=n, arm=f"sweep@{n}", references="serial", speedup=speedup,
                     correct=correct)


def test_the_headline_shows_the_verdict_s_own_parallel_figure() -> None:
    # N=1 is no parallel figure, and a wrong step's speedup is no one's: the best correct
    # step deeper than 1, as the verdict judged it.
    report = _judged_report()
    env = Envelope(baseline="serial", steps=[_step(1, 2.0, True), _step(4, 1.6, True),
                                             _step(8, 6.0, False)])
    verdict = decide(Status.OK, report.arms[:1], [], Thresholds(), env, [1, 4, 8])
    report = report.model_copy(update={"envelope": env, "verdict": verdict})
    assert answer(report).startswith("Parallel: yes, 1.6× at N=4."), answer(report)
    assert cards(report)[0].value == "1.6× at N=4"
    # No correct step deeper than 1: not judged, and no figure from a wrong step.
    env = Envelope(baseline="serial", steps=[_step(1, 1.0, True), _step(4, 3.0, False)])
    verdict = decide(Status.OK, report.arms[:1], [], Thresholds(), env, [1, 4])
    report = report.model_copy(update={"envelope": env, "verdict": verdict})
    assert answer(report).startswith("Parallel: not judged."), answer(report)
    assert not [c for c in cards(report) if c.label == "speedup"]
