import pytest

from batchprobe.client.types import ErrorKind, RequestError
from batchprobe.judge.compare import compare, first_divergence
from batchprobe.judge.verdict import decide
from batchprobe.probe.metrics import arm_metrics
from batchprobe.results.models import ArmResult, ArmSpec, Outcome, SessionResult, Status
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
