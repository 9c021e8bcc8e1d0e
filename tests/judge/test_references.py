"""References on demand: the judge asks for a cold, alone answer only where one decides."""

from __future__ import annotations

from batchprobe.judge.judge import judge
from batchprobe.judge.references import (
    PER_CLASS,
    References,
    more,
    needs_reference,
    references,
    wanted,
)
from batchprobe.probe.metrics import arm_metrics
from batchprobe.probe.references import ReferenceRounds, reference_plans
from batchprobe.results.findings import FindingKind
from batchprobe.results.items import Turn, WorkItem
from batchprobe.results.models import ArmResult, ArmSpec, SessionResult
from batchprobe.results.shapes import SelfCheck, Situation
from batchprobe.results.thresholds import Thresholds
from batchprobe.workload.shapes import ShapePlan

T = Thresholds()


def _answer(arm: str, session: int, *, ok: bool = True, tokens: int = 8, max_tokens: int = 8,
            workload: str = "decode", api: str = "completions", role: str | None = None,
            finish: str = "length", shape: str = "burst") -> SessionResult:
    return SessionResult(
        arm=arm, workload=workload, session=session, shape=shape,  # type: ignore[arg-type]
        request_id=f"{arm}-{session}", text="x" * tokens, chunk_ends=list(range(1, tokens + 1)),
        finish_reason=finish, completion_tokens=tokens, prompt_tokens=9,
        prompt_digest=f"p{session}", start_s=0.0, first_token_s=0.1, last_token_s=1.0,
        end_s=1.0,
        check=SelfCheck(kind="recall" if workload == "recall" else "count", passed=ok,
                        detail=None if ok else "broke"),
        situation=Situation(shape=shape, api=api, arrival_s=0.0,  # type: ignore[arg-type]
                            in_flight_at_arrival=1, decoding_at_arrival=0,
                            max_tokens=max_tokens, params="greedy", sampled=False,
                            prefix_cache=False, role=role),
    )


def _arm(name: str, sessions: list[SessionResult], role: str = "step", n: int = 4) -> ArmResult:
    arm = ArmResult(spec=ArmSpec(name=name, concurrency=n, depth=n, role=role),  # type: ignore[arg-type]
                    state="done", sessions=sessions)
    arm.metrics = arm_metrics(sessions, 1.0)
    arm.server_alive_after = True
    return arm


def test_an_answer_that_checks_itself_needs_no_reference() -> None:
    assert not needs_reference(_answer("s", 1), T.length_slack)
    assert not needs_reference(_answer("s", 2, workload="recall", tokens=3, finish="stop"),
                               T.length_slack)


def test_a_wrong_or_short_answer_needs_its_reference() -> None:
    assert needs_reference(_answer("s", 1, ok=False), T.length_slack)
    # A count that stopped on its own short of its max_tokens: only a reference can say.
    assert needs_reference(_answer("s", 2, tokens=4, finish="stop"), T.length_slack)


def test_compared_greedy_rows_need_references_only_without_logprobs() -> None:
    control = _answer("s", 1, role="control")
    assert not needs_reference(control, T.length_slack, logprobs=True)
    assert needs_reference(control, T.length_slack, logprobs=False)


def test_the_first_round_asks_for_the_sample_and_a_few_wrong_answers_of_each_kind() -> None:
    wrong_chat = [_answer("sweep@4", 100 + i, ok=False, api="chat", shape="ragged")
                  for i in range(10)]
    right = [_answer("sweep@4", i) for i in range(6)]
    want = wanted([*right, *wrong_chat], References(), T.length_slack, seed=1)
    assert {s.session for s in wrong_chat[:PER_CLASS]} <= want.sessions
    assert len({s.session for s in wrong_chat} & want.sessions) <= PER_CLASS + 1  # + sample
    assert want.sample and want.sample <= want.sessions
    # Seeded: the same sample for the same seed.
    again = wanted([*right, *wrong_chat], References(), T.length_slack, seed=1)
    assert again.sample == want.sample


def test_a_kind_the_model_cannot_do_alone_is_not_sent_again_and_not_judged() -> None:
    step_answers = [_answer("sweep@4", i) for i in range(4)]  # the burst's counts: the sample
    step_answers += [_answer("sweep@4", 100 + i, ok=False, api="chat", shape="ragged")
                     for i in range(10)]
    step_answers += [_answer("sweep@4", 200 + i, ok=False, shape="ragged") for i in range(6)]
    step = _arm("sweep@4", step_answers)
    first = wanted(step.sessions, References(), T.length_slack, seed=1).sessions
    # Alone, the chat ones fail too (the model cannot do it); the completions ones pass.
    refs = [_answer("simple@1", s, ok=s >= 200 or s < 100) for s in sorted(first)]
    base = _arm("simple@1", refs, role="reference", n=1)
    second = more(step.sessions, references([base, step]), T.length_slack)
    asked_chat = {s for s in first if 100 <= s < 200}
    assert len(asked_chat) >= PER_CLASS
    assert second.sessions == {s for s in range(200, 206) if s not in first}
    skipped = set(range(100, 110)) - asked_chat
    assert second.skipped == {("chat", "decode"): sorted(skipped)}
    base.sessions += [_answer("simple@1", s) for s in sorted(second.sessions)]
    findings = judge([base, step], [], T).findings
    not_judged = [f for f in findings if f.kind is FindingKind.NOT_JUDGED and f.arm == "sweep@4"]
    assert not_judged and set(not_judged[0].sessions) == skipped
    # The completions ones whose reference passed are failures (before any replay).
    hard = {s for f in findings if f.hard for s in f.sessions}
    assert set(range(200, 206)) <= hard


def test_a_later_turn_is_sent_alone_behind_its_earlier_turns() -> None:
    def item(session: int, continues: int | None) -> WorkItem:
        return WorkItem(workload="recall", session=session, prompt="p", max_tokens=4,
                        shape="conversation",
                        turn=Turn(conversation=1, index=1 if continues is None else 2,
                                  continues=continues))

    plan = ShapePlan("conversation", [item(1, None), item(2, 1), item(3, 2), item(9, None)], [])
    (subset,) = reference_plans([plan], {3})
    assert [i.session for i in subset.items] == [1, 2, 3]
    # The tally the verdict states (``references_asked``) counts the earlier turns sent along:
    # the third turn answered wrong brings the two before it.
    step = ArmResult(spec=ArmSpec(name="sweep@4", concurrency=4, role="step"),
                     sessions=[_answer("sweep@4", s, ok=s != 3, workload="recall",
                                       shape="conversation") for s in (1, 2, 3, 9)])
    rounds = ReferenceRounds([plan], [step], slack=0, seed=0)
    sent = [i.session for p in rounds.next(0) for i in p.items]
    assert {1, 2, 3} <= set(sent) and rounds.asked == set(sent)
