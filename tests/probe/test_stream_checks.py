"""Streams judged as streams: pieces missing against the serial reference, and usage beyond
what the streamed text can hold (vllm-mlx's dropped deltas), while a server that coalesces
several tokens into one delta passes."""

from __future__ import annotations

from batchprobe.client.types import Api
from batchprobe.judge.answers import missing_pieces, usage_beyond_stream
from batchprobe.judge.judge import judge
from batchprobe.results.findings import CHECK_OF, FindingKind
from batchprobe.results.models import ArmResult, ArmSpec, SessionResult
from batchprobe.results.shapes import SelfCheck, Situation
from batchprobe.results.thresholds import Thresholds

T = Thresholds()
SLACK = T.length_slack


def _reply(pieces: list[str], *, tokens: int | None = None, ok: bool = True,
           api: Api = "completions", session: int = 0, arm: str = "c",
           digest: str = "p0") -> SessionResult:
    ends, total = [], 0
    for piece in pieces:
        total += len(piece)
        ends.append(total)
    return SessionResult(
        arm=arm, workload="decode", session=session, shape="burst", request_id=f"{arm}-{session}",
        text="".join(pieces), chunk_ends=ends, finish_reason="length",
        completion_tokens=len(pieces) if tokens is None else tokens, prompt_tokens=11,
        prompt_digest=digest, start_s=0.0, first_token_s=0.1, last_token_s=1.0, end_s=1.0,
        check=SelfCheck(kind="count", passed=ok, token=None if ok else 1,
                        detail=None if ok else "count broke at token 1"),
        situation=Situation(shape="burst", api=api, arrival_s=0.0, in_flight_at_arrival=1,
                            decoding_at_arrival=0, max_tokens=len(pieces) if tokens is None
                            else tokens, params="greedy",
                            sampled=False, prefix_cache=False, stop=[]),
    )


def _numbers(n: int, start: int = 2000) -> list[str]:
    return [f" {i}," for i in range(start, start + n)]


REF = _reply(_numbers(24), arm="serial")


def _dropped(every: int = 2, start: int = 2000, pieces: list[str] | None = None) -> list[str]:
    """vllm-mlx's --stream-interval bug: the first token, every Nth, and the last."""
    pieces = _numbers(24, start) if pieces is None else pieces
    return [p for i, p in enumerate(pieces) if i % every == 0 or i == len(pieces) - 1]


# Short tokens (2 bytes each, as a count's single digits or a CJK text's are).
DIGITS = [f" {i % 10}" for i in range(64)]


def test_a_stream_with_pieces_missing_while_usage_counts_them_all() -> None:
    s = _reply(_dropped(), tokens=24, ok=False)
    evidence = missing_pieces(s, REF, SLACK)
    assert evidence is not None
    assert "13 streamed pieces" in evidence and "11 gap(s)" in evidence
    assert "(the first: ' 2001,')" in evidence and "usage says 24 completion tokens" in evidence


def test_pieces_missing_at_the_start_or_the_end_count_too() -> None:
    assert missing_pieces(_reply(_numbers(24)[3:], tokens=24), REF, SLACK) is not None
    tail = missing_pieces(_reply(_numbers(18), tokens=24), REF, SLACK)
    assert tail is not None and "1 gap(s)" in tail


def test_no_missing_pieces_where_the_text_is_whole_other_or_said_shorter() -> None:
    # Coalesced: the same text in fewer, longer pieces.
    pieces = _numbers(24)
    coalesced = [pieces[0]] + ["".join(pieces[i : i + 4]) for i in range(1, 24, 4)]
    assert missing_pieces(_reply(coalesced, tokens=24), REF, SLACK) is None
    # Its usage says it generated fewer tokens: an early end, the length check's.
    assert missing_pieces(_reply(_dropped(), ok=False), REF, SLACK) is None
    # Other text (a diverged count): its pieces are not found in order.
    other = _numbers(12) + _numbers(12, start=5000)
    assert missing_pieces(_reply(other, tokens=24), REF, SLACK) is None
    # One delta a token, as many as its usage counts: a short reply that skipped text
    # diverged (a miss its replays judge), no delta of it was dropped.
    code = _reply([" 12", "345", "67", "\n"], arm="serial")
    assert missing_pieces(_reply([" 12", "345", "\n", "\n"]), code, SLACK) is None
    # Another prompt (a later turn built from its own answers).
    assert missing_pieces(_reply(_dropped(), tokens=24, digest="p9"), REF, SLACK) is None


def test_usage_far_above_what_the_stream_can_hold() -> None:
    # --stream-interval 8: 9 pieces of 2 bytes for 64 tokens, each token at least one byte.
    s = _reply(_dropped(8, pieces=DIGITS), tokens=64)
    evidence = usage_beyond_stream(s, None, SLACK)
    assert evidence is not None
    assert "usage says 64 completion tokens" in evidence and "18 bytes" in evidence
    assert "9 pieces" in evidence


def test_a_server_that_coalesces_tokens_into_one_delta_is_not_failed() -> None:
    # 64 short tokens, 16 a delta: few pieces, but every token's text is there.
    words = [" a"] * 64
    coalesced = ["".join(words[i : i + 16]) for i in range(0, 64, 16)]
    assert usage_beyond_stream(_reply(coalesced, tokens=64), None, SLACK) is None
    # End-of-sequence and a stop string's tokens carry no text: a few tokens over the bytes.
    assert usage_beyond_stream(_reply([" 1", " 2"], tokens=12), None, SLACK) is None


def test_over_chat_usage_beyond_the_text_is_judged_only_against_a_reference() -> None:
    s = _reply(_dropped(8, pieces=DIGITS), tokens=64, api="chat")
    # A reasoning parser streams the thinking outside the content and counts it.
    assert usage_beyond_stream(s, None, SLACK) is None
    thinking = _reply([" 42"], tokens=64, api="chat", arm="serial")
    assert usage_beyond_stream(s, thinking, SLACK) is None
    assert usage_beyond_stream(s, _reply(DIGITS, api="chat"), SLACK) is not None


def _arm(name: str, n: int, sessions: list[SessionResult]) -> ArmResult:
    arm = ArmResult(spec=ArmSpec(name=name, concurrency=n), state="done", sessions=sessions)
    arm.server_alive_after = True
    return arm


def test_the_judge_fails_dropped_deltas_as_a_stream_finding_naming_the_session() -> None:
    # Session 2 has no reference: it checked itself (its count held), so none was asked for.
    serial = _arm("serial", 1, [_reply(_numbers(24, 1000 * i), arm="serial", session=i,
                                       digest=f"p{i}") for i in range(2)])
    concurrent = _arm("batched", 3, [
        _reply(_numbers(24), arm="batched", session=0),
        # Its count broke: judged against its reference.
        _reply(_dropped(2, 1000), tokens=24, ok=False, arm="batched", session=1, digest="p1"),
        # Its count held: judged without a reference, on what its text can hold.
        _reply(_dropped(8, pieces=DIGITS), tokens=64, arm="batched", session=2, digest="p2"),
    ])
    judgement = judge([serial, concurrent], [], T)
    stream = [f for f in judgement.findings if f.kind is FindingKind.STREAM]
    assert sorted(f.sessions[0] for f in stream) == [1, 2], judgement.findings
    assert all(f.hard and f.check == "stream" and f.arm == "batched" for f in stream)
    assert all(f"session {f.sessions[0]}" in f.message and f.evidence for f in stream)
    assert "gap(s)" in stream[0].evidence and "bytes of text" in stream[1].evidence
    judged = {(j.arm, j.check): j.judged for j in judgement.judged}
    assert judged[("batched", "stream")] == 3
    assert CHECK_OF[FindingKind.STREAM] == "stream"
