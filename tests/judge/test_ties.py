"""Near ties: a wrong answer that left its reference where the reference nearly chose it.

The token lists are the ones llama.cpp 0.3.36 returned for Gemma 3 270M's cold references of
conversation turns that answered otherwise with the prefix cache on (measured here).
"""

from __future__ import annotations

from batchprobe.judge.compare import compare
from batchprobe.judge.judge import judge
from batchprobe.judge.ties import near_tie, parting
from batchprobe.probe.metrics import arm_metrics
from batchprobe.results.findings import FindingKind
from batchprobe.results.models import ArmResult, ArmSpec, SessionResult
from batchprobe.results.sessions import TokenAlternative, TokenChoice
from batchprobe.results.shapes import SelfCheck, Situation
from batchprobe.results.thresholds import Thresholds

T = Thresholds()


def _tok(chosen: str, logprob: float, *others: tuple[str, float]) -> TokenChoice:
    alts = sorted([(chosen, logprob), *others], key=lambda a: -a[1])
    return TokenChoice(token=chosen, logprob=logprob,
                       alternatives=[TokenAlternative(token=t, logprob=lp) for t, lp in alts])


# '9867269\n': at token 3 '7' led '\n\n' by 0.18 nats (the cached answer: '986\n\nNever').
TIED_AT_3 = [
    _tok("9", -0.176, ("8", -3.266), ("1", -3.368)),
    _tok("8", -0.092, ("9", -4.021)),
    _tok("6", -0.045, ("7", -4.837)),
    _tok("7", -1.16, ("\n\n", -1.338), ("\n", -1.434)),
    _tok("2", -0.02, ("1", -5.188)),
    _tok("6", -0.02, ("7", -4.97)),
    _tok("9", -0.02, ("8", -4.925)),
    _tok("\n", -0.421, ("\n\n", -1.128)),
]
# '476\nVA': at token 3 '\n' led '\n\n' by 0.08 nats; the answer took the longer one.
SHORTER_CHOSEN = [
    _tok("4", -0.206, ("8", -3.398)),
    _tok("7", -0.128, ("8", -3.691)),
    _tok("6", -0.069, ("5", -4.142)),
    _tok("\n", -0.816, ("\n\n", -0.892), ("0", -3.65)),
    _tok("VA", -1.334, ("1", -2.066), ("The", -2.437)),
]


def _recall(arm: str, session: int, text: str, *, ok: bool, digest: str = "p1",
            tops: list[TokenChoice] | None = None, nonce: str | None = None,
            code: str = "9867269") -> SessionResult:
    return SessionResult(
        arm=arm, workload="recall", session=session, shape="aborts", request_id=f"{arm}-{session}",
        text=text, chunk_ends=list(range(1, len(text) + 1)), finish_reason="length",
        completion_tokens=8, prompt_tokens=279, prompt_digest=digest, start_s=0.0,
        first_token_s=0.1, last_token_s=1.0, end_s=1.0, expected_code=code, hit=ok,
        top_logprobs=tops,
        check=SelfCheck(kind="recall", passed=ok, detail=None if ok else f"missed its needle ({text!r})"),
        situation=Situation(shape="aborts", api="completions", arrival_s=0.0, in_flight_at_arrival=1,
                            decoding_at_arrival=1, max_tokens=8, params="greedy", sampled=False,
                            prefix_cache=True, role="next-turn", nonce=nonce),
    )


REF = _recall("serial", 1, "9867269\n", ok=True, tops=TIED_AT_3)


def test_an_answer_that_took_the_runner_up_at_a_near_tie_is_a_tie() -> None:
    tie = near_tie(_recall("c", 1, "986\n\nNever", ok=False), REF, T.near_tie_nats)
    assert tie is not None and tie.index == 3 and tie.taken.token == "\n\n"
    assert round(tie.gap, 3) == 0.178 and "0.18 nats apart" in tie.describe()


def test_a_shorter_chosen_token_inside_the_longer_one_taken_is_the_parting() -> None:
    ref = _recall("serial", 1, "476\nVA", ok=True, tops=SHORTER_CHOSEN)
    tie = near_tie(_recall("c", 1, "476\n\nNever", ok=False), ref, T.near_tie_nats)
    assert tie is not None and (tie.index, tie.chosen.token, tie.taken.token) == (3, "\n", "\n\n")


def test_a_listed_token_far_below_the_choice_is_no_near_tie() -> None:
    wrong = _recall("c", 1, "9167269\n", ok=False)  # '1' at token 1 is not listed there
    assert parting(wrong, REF) is None
    wrong = _recall("c", 1, "8867269\n", ok=False)  # '8' at token 0: 3.09 nats below '9'
    tie = parting(wrong, REF)
    assert tie is not None and tie.index == 0 and near_tie(wrong, REF, T.near_tie_nats) is None


def test_no_tie_without_the_same_prompt_or_with_an_early_end() -> None:
    assert near_tie(_recall("c", 1, "986", ok=False), REF, T.near_tie_nats) is None
    other = _recall("c", 1, "986\n\nNever", ok=False, digest="p2")
    assert near_tie(other, REF, T.near_tie_nats) is None
    nonced = _recall("serial", 1, "9867269\n", ok=True, tops=TIED_AT_3, digest="n1", nonce="ab")
    assert near_tie(other, nonced, T.near_tie_nats) is not None  # differs by the nonce only
    plain = _recall("serial", 1, "9867269\n", ok=True)
    assert near_tie(_recall("c", 1, "986\n\nNever", ok=False), plain, T.near_tie_nats) is None


def _arm(name: str, n: int, sessions: list[SessionResult]) -> ArmResult:
    arm = ArmResult(spec=ArmSpec(name=name, concurrency=n), state="done", sessions=sessions)
    arm.metrics = arm_metrics(sessions, 1.0)
    arm.server_alive_after = True
    return arm


def _judge(wrong: str, replays: list[str | None], t: Thresholds = T) -> FindingKind:
    serial = _arm("serial", 1, [_recall("serial", 0, "4476913\n", ok=True, code="4476913"), REF])
    arm = _arm("c", 2, [_recall("c", 0, "4476913\n", ok=True, code="4476913"),
                        _recall("c", 1, wrong, ok=False)])
    for k, text in enumerate(replays, start=1):
        again = _recall(f"c~replay{k}", 1, text or "", ok=text == REF.text)
        if text is None:
            again = again.model_copy(update={"error": {"kind": "disconnected", "message": "gone"}})
        arm.replays.append(again)
    found = judge([serial, arm], [compare(arm, serial)], t).findings
    (miss,) = [f for f in found if f.sessions == [1] and f.kind is not FindingKind.GREEDY_DIVERGENCE]
    assert miss.replays == len(replays)
    if miss.kind is FindingKind.FLIP:
        assert miss.severity == "soft" and "a near tie" in miss.message
        assert "its reference took '7' (-1.16) over '\\n\\n' (-1.34)" in miss.message
    return miss.kind


def test_wrong_again_on_replay_at_a_near_tie_is_a_soft_flip_not_a_failure() -> None:
    assert _judge("986\n\nNever", ["986\n\nNever", "9867269\n"]) is FindingKind.FLIP


def test_a_near_tie_stays_a_failure_under_strict_greedy_or_beside_a_replay_gone_otherwise() -> None:
    strict = Thresholds(strict_greedy=True)
    assert _judge("986\n\nNever", ["986\n\nNever"], strict) is FindingKind.RECALL_MISS
    assert _judge("986\n\nNever", [None]) is FindingKind.RECALL_MISS  # the replay's error
    assert _judge("986\n\nNever", ["9167269\n"]) is FindingKind.RECALL_MISS  # unlisted token
    assert _judge("8867269\n", ["8867269\n"]) is FindingKind.RECALL_MISS  # 3.09 nats: no tie
    assert _judge("986\n\nNever", ["986\n\nNever"], Thresholds(near_tie_nats=0.1)) is (
        FindingKind.RECALL_MISS
    )
