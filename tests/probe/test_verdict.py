import pytest

from batchprobe.client.types import ErrorKind, RequestError
from batchprobe.judge.checks import CheckStatus, run_checks
from batchprobe.judge.compare import compare, first_divergence
from batchprobe.judge.judge import Judgement, judge
from batchprobe.judge.judged import judged_answers, judged_items
from batchprobe.judge.verdict import decide, floor_recall
from batchprobe.probe.metrics import arm_metrics
from batchprobe.results.findings import Finding, FindingKind, Judged
from batchprobe.results.models import (
    ArmResult,
    ArmSpec,
    Environment,
    Outcome,
    Report,
    RunConfig,
    SessionResult,
    Status,
    Verdict,
)
from batchprobe.results.shapes import SelfCheck
from batchprobe.results.sweep import Envelope, SweepStep
from batchprobe.results.thresholds import Thresholds


def _s(arm, workload, session, *, text="abc", t=(0.0, 0.1, 1.0), hit=None, xtalk=(), error=None,
       tokens=21):
    start, first, last = t
    return SessionResult(
        arm=arm, workload=workload, session=session, request_id=f"{arm}{session}",
        start_s=start, first_token_s=first, last_token_s=last, end_s=last,
        text=text, chunk_ends=list(range(1, len(text) + 1)), completion_tokens=tokens, hit=hit,
        cross_talk_from=list(xtalk), error=error)


def _arm(name, n, sessions):
    arm = ArmResult(spec=ArmSpec(name=name, concurrency=n), state="done", sessions=sessions)
    arm.metrics = arm_metrics(sessions, 1.0)
    arm.server_alive_after = True
    return arm


def _serial(n=4):
    recall = [_s("serial", "recall", i, hit=True, t=(i, i + 0.1, i + 0.2)) for i in range(n)]
    decode = [_s("serial", "decode", i, t=(10 + i, 10 + i + 0.1, 10 + i + 1.1)) for i in range(n)]
    return _arm("serial", 1, recall + decode)


def _concurrent(n=4, speed=1.0, **overrides):
    recall = [_s("concurrent", "recall", i, hit=True) for i in range(n)]
    decode = [_s("concurrent", "decode", i, t=(0, 0.1, 0.1 + speed)) for i in range(n)]
    sessions = recall + decode
    for index, changes in overrides.items():
        pos = int(index[1:])
        sessions[pos] = sessions[pos].model_copy(update=changes)
    return _arm("concurrent", n, sessions)


def _verdict(*arms, thresholds=None, status=Status.OK):
    comps = [compare(a, arms[0]) for a in arms[1:]]
    return decide(status, list(arms), comps, thresholds or Thresholds()), comps


def test_pass_when_parallel_and_correct():
    v, comps = _verdict(_serial(), _concurrent())
    assert comps[0].decode_speedup == 4.0 and comps[0].scaling_efficiency == 1.0
    assert comps[0].greedy_match_rate == 1.0
    assert (v.outcome, v.parallel, v.correct) == (Outcome.PASS, True, True)


def test_serial_engine_is_not_parallel():
    v, _ = _verdict(_serial(), _concurrent(speed=4.0))
    assert (v.outcome, v.parallel, v.correct) == (Outcome.FAIL, False, True)


def test_cross_talk_names_source_session():
    v, _ = _verdict(_serial(), _concurrent(s1={"hit": False, "cross_talk_from": [2]}))
    assert v.correct is False and v.outcome is Outcome.FAIL
    assert any("session 1" in r and "session(s) 2" in r for r in v.reasons)


def test_errors_fail_correctness():
    err = RequestError(kind=ErrorKind.FINISH_REASON_ERROR, message="finish_reason error")
    v, _ = _verdict(_serial(), _concurrent(s0={"error": err, "hit": None}))
    assert v.correct is False
    assert any("session 0" in r and "errored (finish_reason_error)" in r for r in v.reasons)


def test_a_single_recall_miss_fails_nothing_tolerated():
    # One miss of 4 (25%), never replayed here: a failure, not a tolerated flip.
    v, comps = _verdict(_serial(), _concurrent(s0={"hit": False}))
    assert comps[0].recall_delta == -0.25 and v.correct is False
    assert any("session 0" in r and "missed its needle" in r for r in v.reasons)
    assert not any("every self-check held" in r for r in v.reasons)


def test_low_baseline_recall_is_inconclusive_with_advice():
    serial = _serial()
    for s in serial.sessions[:3]:
        s.hit = False
    serial.metrics = arm_metrics(serial.sessions, 1.0)
    v, _ = _verdict(serial, _concurrent())
    assert v.correct is None and v.outcome is Outcome.INCONCLUSIVE
    assert any("haystack" in r for r in v.reasons)


def test_greedy_divergence_is_soft_unless_strict():
    conc = _concurrent(s4={"text": "abd", "chunk_ends": [1, 2, 3]})
    v, comps = _verdict(_serial(), conc)
    assert v.outcome is Outcome.PASS and comps[0].greedy_matches == 7
    d = comps[0].divergences[0]
    assert (d.workload, d.session, d.index, d.baseline, d.arm) == ("decode", 0, 2, "c", "d")
    strict, _ = _verdict(_serial(), conc, thresholds=Thresholds(strict_greedy=True))
    assert strict.outcome is Outcome.FAIL


def test_dead_server_fails():
    conc = _concurrent()
    conc.server_alive_after = False
    v, _ = _verdict(_serial(), conc, status=Status.ENGINE_DIED)
    assert v.correct is False


def test_no_arms_is_inconclusive():
    v = decide(Status.ENGINE_UNREACHABLE, [], [], Thresholds())
    assert v.outcome is Outcome.INCONCLUSIVE and "no arm ran" in v.reasons[0]


def test_first_divergence_on_length():
    a = _s("a", "decode", 0, text="ab")
    b = _s("b", "decode", 0, text="abc")
    d = first_divergence(a, b)
    assert d.index == 2 and d.baseline is None and d.arm == "c"


def test_logprob_delta_only_where_both_arms_agree():
    from batchprobe.judge.compare import logprob_delta

    a = _s("a", "decode", 0, text="abc").model_copy(update={"logprobs": [-0.1, -0.2, -0.3]})
    b = _s("b", "decode", 0, text="abd").model_copy(update={"logprobs": [-0.1, -0.5, -9.0]})
    assert logprob_delta(a, b, agree=2) == pytest.approx(0.3)
    assert logprob_delta(a, _s("c", "decode", 0), agree=2) is None


# --- One judgement: the verdict's typed fields, read by every output ---------------------------

_ENV = Environment(batchprobe_version="0", python="3", platform="test")


def _report(arms, verdict, findings=(), envelope=None, judged=()):
    return Report(run_id="r", started_at="2026-01-01T00:00:00Z", status=Status.OK,
                  config=RunConfig(base_url="http://127.0.0.1:1"), environment=_ENV,
                  arms=list(arms), verdict=verdict, findings=list(findings),
                  envelope=envelope, judged=list(judged))


def _check(report, name):
    return next(c for c in run_checks(report) if c.name == name)


def test_the_parallel_check_reads_the_verdict_s_parallel_reason_not_a_reason_s_text():
    # An arm whose name says "parallel" leads the reasons: its line is not the parallel one.
    v, _ = _verdict(_serial(), _concurrent(speed=4.0))
    assert v.parallel is False and v.parallel_reason.startswith("not parallel: decode speedup")
    verdict = v.model_copy(update={"reasons": [
        "arm parallel@8, shape burst: session 1 missed its needle", *v.reasons]})
    check = _check(_report([], verdict), "run.parallel")
    assert check.status is CheckStatus.FAILED and check.message == v.parallel_reason


def test_an_info_not_run_finding_skips_its_check_rather_than_failing_it():
    # An interrupted arm did not complete: not judged (info), not a failure.
    arm = ArmResult(spec=ArmSpec(name="concurrent", concurrency=4), state="interrupted")
    found = Finding(arm="concurrent", kind=FindingKind.NOT_RUN, severity="info",
                    message="did not complete (state interrupted)")
    check = _check(_report([arm], Verdict(), [found]), "concurrent.completed")
    assert check.status is CheckStatus.SKIPPED, check
    hard = found.model_copy(update={"severity": "hard"})
    assert _check(_report([arm], Verdict(), [hard]), "concurrent.completed").status is (
        CheckStatus.FAILED)


def _step(n, speedup, correct):
    return SweepStep(n=n, arm=f"sweep@{n}", references="serial", speedup=speedup, correct=correct)


def test_the_verdict_carries_the_speedup_it_judged_parallelism_on():
    # The best correct step deeper than 1: not N=1's figure, not the wrong step's.
    env = Envelope(baseline="serial", steps=[_step(1, 2.0, True), _step(4, 1.6, True),
                                             _step(8, 6.0, False)])
    v = decide(Status.OK, [_serial()], [], Thresholds(), env, [1, 4, 8], Judgement([], []))
    assert (v.parallel, v.speedup, v.speedup_n) == (True, 1.6, 4)
    assert v.parallel_reason in v.reasons and "1.60x at 4 in flight" in v.parallel_reason
    # An arm plan: the widest arm's.
    v, comps = _verdict(_serial(), _concurrent())
    assert (v.speedup, v.speedup_n) == (comps[0].decode_speedup, 4)


def test_recall_not_judged_is_a_typed_finding_on_the_baseline():
    serial = _serial()
    for s in serial.sessions:
        if s.workload == "recall":
            s.hit = False
    arms = [serial, _concurrent()]
    comps = [compare(arms[1], serial)]
    judgement = judge(arms, comps, Thresholds())
    v = decide(Status.OK, arms, comps, Thresholds(), judgement=judgement)
    floor = [f for f in judgement.findings if f.message.startswith("recall not judged")]
    assert len(floor) == 1, judgement.findings
    assert (floor[0].arm, floor[0].kind, floor[0].severity) == (
        "serial", FindingKind.NOT_JUDGED, "info")
    assert v.correct is None and v.reasons[0] == floor[0].message
    assert sum(floor[0].message in r for r in v.reasons) == 1, "named once"


def test_recall_has_one_definition_the_answer_s_own_self_check():
    # Scored by its checker, which says it missed: every reader of recall agrees.
    missed = SelfCheck(kind="recall", passed=False, detail="missed its needle")
    sessions = [_s("serial", "recall", i, hit=True).model_copy(update={"check": missed})
                for i in range(2)]
    arm = _arm("serial", 1, sessions)
    assert arm.metrics is not None and arm.metrics.recall == 0.0
    assert arm.metrics.recall_hits == 0 and floor_recall(sessions) == 0.0


def test_judged_answers_has_one_definition():
    rows = [Judged(arm="sweep@4", step=4, shape="burst", check="cross_talk", judged=4),
            Judged(arm="sweep@4", step=4, shape="burst", check="count", judged=4),
            Judged(arm="sweep@8", step=8, shape="params", check="stop", judged=2)]
    assert judged_answers(rows) == 6
    assert judged_items(_report([], Verdict(), judged=rows)) == 6


def test_one_miss_in_a_small_sample_is_no_recall_floor():
    # The seeded sample sends about three recall items alone: 2 of 3 is no evidence the
    # model cannot do the task (a base model's third miss flipped the first word of 1 in 5
    # default runs); none of 4 is.
    def verdict_with(hits: int, n: int) -> list[str]:
        serial = _serial()
        recall = [s for s in serial.sessions if s.workload == "recall"][:n]
        assert len(recall) == n
        for i, s in enumerate(recall):
            s.hit = i < hits
            s.check = SelfCheck(kind="recall", passed=i < hits, detail="")
        serial.sessions = [s for s in serial.sessions if s.workload != "recall"] + recall
        arms = [serial, _concurrent()]
        comps = [compare(arms[1], serial)]
        judgement = judge(arms, comps, Thresholds())
        decide(Status.OK, arms, comps, Thresholds(), judgement=judgement)
        return [f.message for f in judgement.findings if f.message.startswith("recall not judged")]

    assert verdict_with(2, 3) == []
    assert len(verdict_with(0, 4)) == 1
