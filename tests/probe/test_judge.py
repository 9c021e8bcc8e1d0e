"""The judge: each answer against its own request and its serial reference, as findings."""

from __future__ import annotations

from batchprobe.client.types import ErrorKind, RequestError
from batchprobe.judge.compare import compare
from batchprobe.judge.divergence import fisher_greater
from batchprobe.judge.judge import judge, replay_candidates
from batchprobe.judge.verdict import decide
from batchprobe.probe.metrics import arm_metrics
from batchprobe.results.findings import FindingKind
from batchprobe.results.models import ArmResult, ArmSpec, Outcome, SessionResult, Status
from batchprobe.results.sessions import TokenAlternative, TokenChoice
from batchprobe.results.shapes import SelfCheck, Situation
from batchprobe.results.sweep import Envelope, StopRule, SweepStep, SweepStop
from batchprobe.results.thresholds import Thresholds

T = Thresholds()


def _sit(max_tokens: int = 8, *, stop: list[str] | None = None, sampled: bool = False,
         role: str | None = None, shape: str = "burst") -> Situation:
    return Situation(shape=shape, api="completions", arrival_s=0.0, in_flight_at_arrival=1,
                     decoding_at_arrival=0, max_tokens=max_tokens,
                     params="temperature 1" if sampled else "greedy", sampled=sampled,
                     prefix_cache=False, stop=stop or [], role=role)


def _count(arm: str, session: int, pieces: list[str], *, finish: str = "length",
           tokens: int | None = None, max_tokens: int | None = None, ok: bool = True,
           **extra: object) -> SessionResult:
    text = "".join(pieces)
    ends, total = [], 0
    for p in pieces:
        total += len(p)
        ends.append(total)
    return SessionResult(
        arm=arm, workload="decode", session=session, shape="burst", request_id=f"{arm}-{session}",
        text=text, chunk_ends=ends, finish_reason=finish,
        completion_tokens=len(pieces) if tokens is None else tokens,
        prompt_tokens=11, prompt_digest=f"p{session}", start_s=0.0, first_token_s=0.1,
        last_token_s=1.0, end_s=1.0,
        check=SelfCheck(kind="count", passed=ok, token=None if ok else 2,
                        detail=None if ok else "count broke at token 2"),
        situation=_sit(max_tokens or len(pieces)), **extra,  # type: ignore[arg-type]
    )


def _numbers(start: int, n: int) -> list[str]:
    return [f" {i}," for i in range(start, start + n)]


def _arm(name: str, n: int, sessions: list[SessionResult], **spec: object) -> ArmResult:
    arm = ArmResult(spec=ArmSpec(name=name, concurrency=n, **spec),  # type: ignore[arg-type]
                    state="done", sessions=sessions)
    arm.metrics = arm_metrics(sessions, 1.0)
    arm.server_alive_after = True
    return arm


def _serial(n: int = 4, length: int = 8) -> ArmResult:
    return _arm("serial", 1, [_count("serial", i, _numbers(2000 + 1000 * i, length))
                              for i in range(n)])


def _run(*arms: ArmResult, t: Thresholds = T, **kw: object):  # type: ignore[no-untyped-def]
    comps = [compare(a, arms[0]) for a in arms[1:]]
    judgement = judge(list(arms), comps, t)
    verdict = decide(Status.OK, list(arms), comps, t, judgement=judgement, **kw)  # type: ignore[arg-type]
    return judgement.findings, verdict


def _kinds(findings: list) -> set[tuple[FindingKind, str]]:  # type: ignore[type-arg]
    return {(f.kind, f.severity) for f in findings}


def test_a_reply_cut_short_with_a_clean_stop_is_a_failure() -> None:
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    # Every number it has is right (the count check holds): only its length shows the bug.
    concurrent[1] = _count("c", 1, _numbers(3000, 4), finish="stop", max_tokens=8)
    findings, verdict = _run(_serial(), _arm("c", 4, concurrent))
    early = [f for f in findings if f.kind is FindingKind.ENDED_EARLY]
    assert [f.sessions for f in early] == [[1]] and early[0].hard
    assert "went on to 8 tokens (finish 'length')" in early[0].message
    assert verdict.correct is False and verdict.outcome is Outcome.FAIL


def test_another_rows_max_tokens_is_a_failure_even_with_finish_length() -> None:
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    concurrent[2] = _count("c", 2, _numbers(4000, 3), max_tokens=8)  # 'length' after 3 of 8
    findings, _ = _run(_serial(), _arm("c", 4, concurrent))
    assert any(f.kind is FindingKind.ENDED_EARLY and f.sessions == [2]
               and "after 3 of its max_tokens 8" in f.message for f in findings)


def test_its_own_stop_string_explains_an_early_stop() -> None:
    serial = _serial()
    ref = serial.sessions[0]
    serial.sessions[0] = ref.model_copy(update={"situation": _sit(8, stop=[" 2004,"])})
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    cut = _count("c", 0, _numbers(2000, 4), finish="stop", max_tokens=8)
    concurrent[0] = cut.model_copy(update={"situation": _sit(8, stop=[" 2004,"])})
    findings, _ = _run(serial, _arm("c", 4, concurrent))
    assert not [f for f in findings if f.kind is FindingKind.ENDED_EARLY]


def test_a_stop_row_cut_before_its_stop_string_is_a_failure() -> None:
    # The early shape's stop row: its reference ran to its stop string (finish 'stop' at
    # token 7); a reply ended 'stop' at token 3, its text the reference's so far, was cut.
    serial = _serial()
    stop = _sit(12, stop=[" 2007,"])
    serial.sessions[0] = _count("serial", 0, _numbers(2000, 7), finish="stop", max_tokens=12)
    serial.sessions[0] = serial.sessions[0].model_copy(update={"situation": stop})
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    cut = _count("c", 0, _numbers(2000, 3), finish="stop", max_tokens=12)
    concurrent[0] = cut.model_copy(update={"situation": stop})
    findings, verdict = _run(serial, _arm("c", 4, concurrent))
    early = [f for f in findings if f.kind is FindingKind.ENDED_EARLY]
    assert [f.sessions for f in early] == [[0]], findings
    assert "after 3 tokens" in early[0].message and "(finish 'stop')" in early[0].message
    assert verdict.correct is False
    # The same reply reaching its stop string where the reference did is its own stop.
    whole = _count("c", 0, _numbers(2000, 7), finish="stop", max_tokens=12)
    concurrent[0] = whole.model_copy(update={"situation": stop})
    findings, _ = _run(serial, _arm("c", 4, concurrent))
    assert not [f for f in findings if f.kind is FindingKind.ENDED_EARLY]


def test_usage_that_is_not_the_replys_own() -> None:
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    concurrent[3] = _count("c", 3, _numbers(5000, 8), tokens=3)  # 8 pieces streamed
    concurrent[1] = concurrent[1].model_copy(update={"prompt_tokens": 40})
    findings, verdict = _run(_serial(), _arm("c", 4, concurrent))
    usage = {f.sessions[0]: f.message for f in findings if f.kind is FindingKind.USAGE}
    assert "3 completion tokens; 8 pieces were streamed" in usage[3]
    assert "40 prompt tokens; the same prompt had 11" in usage[1]
    assert verdict.correct is False


def test_a_greedy_row_whose_token_was_not_its_top1_was_sampled() -> None:
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    choices = [TokenChoice(token=" 3000,", logprob=-0.01,
                           alternatives=[TokenAlternative(token=" 3000,", logprob=-0.01)])] * 7
    choices.append(TokenChoice(token=" 3007,", logprob=-2.5,
                               alternatives=[TokenAlternative(token=" 3007,", logprob=-2.5),
                                             TokenAlternative(token=" the", logprob=-0.2)]))
    concurrent[1] = concurrent[1].model_copy(update={"top_logprobs": choices})
    findings, verdict = _run(_serial(), _arm("c", 4, concurrent))
    sampled = [f for f in findings if f.kind is FindingKind.SAMPLED]
    assert [f.sessions for f in sampled] == [[1]] and "not its top-1" in sampled[0].message
    assert verdict.correct is False


def test_an_empty_count_is_a_failure() -> None:
    from batchprobe.results.items import CountSpec
    from batchprobe.workload.checks import check_count

    check = check_count(CountSpec(first=2004, leading_space=True), "", [])
    assert not check.passed and "no number generated" in (check.detail or "")


def _refused(arm: str, session: int, status: int) -> SessionResult:
    error = RequestError(kind=ErrorKind.HTTP_STATUS, message=f"HTTP {status}", http_status=status)
    return _count(arm, session, [], error=error, finish="error")


def test_a_path_the_server_does_not_serve_is_not_judged_not_failed() -> None:
    serial = _serial()
    serial.sessions[2] = _refused("serial", 2, 404)
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    concurrent[2] = _refused("c", 2, 404)
    findings, verdict = _run(serial, _arm("c", 4, concurrent))
    assert _kinds(findings) == {(FindingKind.UNSUPPORTED, "info")}
    assert verdict.correct is True
    assert any(r.startswith("not judged:") and "not served by this server" in r
               for r in verdict.reasons)


def test_the_same_refusal_under_concurrency_where_serial_was_served_fails() -> None:
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    concurrent[2] = _refused("c", 2, 404)
    findings, verdict = _run(_serial(), _arm("c", 4, concurrent))
    assert (FindingKind.ERROR, "hard") in _kinds(findings) and verdict.correct is False


def _wrong_arm() -> ArmResult:
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    concurrent[1] = _count("c", 1, _numbers(3000, 8), ok=False)
    return _arm("c", 4, concurrent)


def test_a_wrong_answer_that_comes_back_on_replay_is_a_failure() -> None:
    arm = _wrong_arm()
    assert replay_candidates(arm, [_serial(), arm], T) == [1]
    arm.replays = [_count("c~replay1", 1, _numbers(3000, 8)),
                   _count("c~replay2", 1, _numbers(3000, 8), ok=False)]
    findings, verdict = _run(_serial(), arm)
    broke = next(f for f in findings if f.kind is FindingKind.COUNT_BROKE)
    assert broke.hard and (broke.replays, broke.replays_failed) == (2, 1)
    assert "wrong again in 1/2 replays" in broke.message and verdict.correct is False


def test_a_wrong_answer_right_in_every_replay_is_a_named_flip() -> None:
    arm = _wrong_arm()
    arm.replays = [_count(f"c~replay{k}", 1, _numbers(3000, 8)) for k in (1, 2, 3)]
    findings, verdict = _run(_serial(), arm)
    flip = next(f for f in findings if f.kind is FindingKind.FLIP)
    assert flip.severity == "soft" and flip.sessions == [1]
    assert verdict.correct is True
    assert not any("every self-check held" in r for r in verdict.reasons)
    assert any(r.startswith("soft: arm c, shape burst: session 1") and "numerics flip" in r
               for r in verdict.reasons)


def test_no_replay_when_the_arm_failed_already() -> None:
    arm = _wrong_arm()
    error = RequestError(kind=ErrorKind.FINISH_REASON_ERROR, message="boom")
    arm.sessions[0] = _count("c", 0, [], error=error, finish="error")
    assert replay_candidates(arm, [_serial(), arm], T) == []


def test_flips_far_above_the_serial_rate_are_a_failure() -> None:
    serial = _serial(10)
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8), ok=i >= 3) for i in range(10)]
    arm = _arm("c", 10, concurrent)
    arm.replays = [_count("c~replay1", i, _numbers(2000 + 1000 * i, 8)) for i in range(3)]
    arm.serial_replays = [_count("c~serial", i, _numbers(2000 + 1000 * i, 8)) for i in range(3)]
    findings, verdict = _run(serial, arm)
    rate = [f for f in findings if f.kind is FindingKind.FLIP_RATE]
    assert rate and rate[0].hard and rate[0].sessions == [0, 1, 2]
    assert "3/10 answers (30%)" in rate[0].message and verdict.correct is False


def test_fisher_exact_one_sided() -> None:
    assert fisher_greater(4, 4, 0, 4) == 1 / 70
    assert fisher_greater(0, 4, 4, 4) == 1.0
    assert fisher_greater(2, 4, 2, 4) > 0.5


def _open(arm: str, session: int, text: str, role: str) -> SessionResult:
    s = _count(arm, session, [text], ok=True)
    return s.model_copy(update={"check": None, "situation": _sit(1, role=role, shape="params")})


def test_greedy_rows_beside_sampled_diverging_far_more_were_sampled() -> None:
    serial = _arm("serial", 1, [_open("serial", i, f"w{i}", "open" if i < 4 else "control")
                                for i in range(8)])
    steps = []
    for depth in (2, 4):
        rows = [_open(f"sweep@{depth}", i, f"x{i}" if i < 4 else f"w{i}",
                      "open" if i < 4 else "control") for i in range(8)]
        steps.append(_arm(f"sweep@{depth}", depth, rows, role="step", depth=depth))
    findings, verdict = _run(serial, *steps)
    found = [f for f in findings if f.kind is FindingKind.SAMPLED_DIVERGENCE]
    # 4/4 against 0/4 in one step is p = 1/70; pooled over both steps it is far below 0.01.
    assert len(found) == 1 and found[0].arm == "run" and found[0].hard
    assert "every step pooled" in found[0].message and verdict.correct is False


def _envelope(*steps: tuple[int, bool | None, float], stop: StopRule, at: int) -> Envelope:
    recorded = [SweepStep(n=n, arm=f"sweep@{n}", references="serial", correct=c, speedup=x)
                for n, c, x in steps]
    correct = [n for n, c, _ in steps if c]
    return Envelope(baseline="serial", steps=recorded, largest_correct_n=max(correct, default=None),
                    stop=SweepStop(rule=stop, at_n=at))


def _clean() -> tuple[ArmResult, ArmResult]:
    concurrent = [_count("c", i, _numbers(2000 + 1000 * i, 8)) for i in range(4)]
    return _serial(), _arm("c", 4, concurrent)


def test_a_sweep_stopped_by_the_slo_claims_correctness_up_to_its_depth() -> None:
    env = _envelope((1, True, 1.0), (2, True, 1.9), (4, True, 3.2), stop=StopRule.SLO, at=4)
    _, verdict = _run(*_clean(), envelope=env, planned=[1, 2, 4, 8, 16])
    assert verdict.correct is True and verdict.correct_up_to_n == 4
    assert "correct up to N=4; stopped: slo at 4; not judged beyond it" in verdict.reasons[0]


def test_a_sweep_cut_by_the_time_budget_is_inconclusive_beyond_it() -> None:
    env = _envelope((1, True, 1.0), (2, True, 1.9), stop=StopRule.TIME_BUDGET, at=4)
    _, verdict = _run(*_clean(), envelope=env, planned=[1, 2, 4, 8])
    assert verdict.correct is None and verdict.correct_up_to_n == 2
    assert verdict.outcome is Outcome.INCONCLUSIVE


def test_parallel_is_judged_on_the_best_correct_step_deeper_than_one() -> None:
    env = _envelope((1, True, 1.0), (2, True, 1.2), (4, True, 1.7), (8, True, 1.6),
                    stop=StopRule.PLAN_END, at=8)
    _, verdict = _run(*_clean(), envelope=env, planned=[1, 2, 4, 8])
    assert verdict.parallel is True and any("1.70x at 4" in r for r in verdict.reasons)
    only_one = _envelope((1, True, 1.0), stop=StopRule.PLAN_END, at=1)
    _, verdict = _run(*_clean(), envelope=only_one, planned=[1])
    assert verdict.parallel is None


def test_a_failed_warm_up_is_an_error_of_its_arm() -> None:
    serial, arm = _clean()
    arm.warm_up_error = RequestError(kind=ErrorKind.HTTP_STATUS, message="HTTP 500", http_status=500)
    findings, verdict = _run(serial, arm)
    warm = [f for f in findings if f.kind is FindingKind.WARM_UP]
    assert warm and warm[0].hard and warm[0].shape is None and verdict.correct is False


def test_a_model_that_cannot_count_is_judged_on_what_holds_on_any_model() -> None:
    # Serial references that fail their own count (a random tiny model): the counts are not
    # judged, but usage and a 'length' finish short of the row's own max_tokens are.
    serial = _arm("serial", 1, [_count("serial", i, _numbers(9, 8), ok=False) for i in range(4)])
    concurrent = [_count("c", i, _numbers(9, 8), ok=False) for i in range(4)]
    findings, verdict = _run(serial, _arm("c", 4, concurrent))
    assert (FindingKind.NOT_JUDGED, "info") in _kinds(findings)
    assert verdict.correct is True and verdict.judged_answers == 4
    concurrent[2] = _count("c", 2, _numbers(9, 3), ok=False, max_tokens=8)
    concurrent[3] = _count("c", 3, _numbers(9, 4), ok=False, max_tokens=8, finish="stop")
    findings, verdict = _run(serial, _arm("c", 4, concurrent))
    early = [f for f in findings if f.kind is FindingKind.ENDED_EARLY]
    assert [f.sessions for f in early] == [[2]] and verdict.correct is False


def test_nothing_judged_is_not_correct() -> None:
    serial = _arm("serial", 1, [_count("serial", i, _numbers(9, 8), ok=False) for i in range(4)])
    serial.sessions[:] = [_refused("serial", i, 404) for i in range(4)]
    serial.sessions.append(_count("serial", 9, _numbers(9, 8)))
    concurrent = [_refused("c", i, 404) for i in range(4)]
    findings, verdict = _run(serial, _arm("c", 4, concurrent))
    assert verdict.correct is None and verdict.judged_answers == 0
    assert {f.kind for f in findings} == {FindingKind.UNSUPPORTED}
