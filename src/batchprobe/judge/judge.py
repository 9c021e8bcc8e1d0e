"""The judge: every answer against its own request and its serial reference, as findings.

The only place a judgement is made (``results.findings`` says how the outputs read it):

- an error is a failure; a refusal of a path or parameter in the serial reference makes the
  item "not supported by this server" (not judged), and the same refusal under concurrency
  where the reference was served stays a failure;
- an answer holding another session's content (needle, count, turn) is cross-talk;
- a self-check that broke (recall, count, bias, stop), a reply that ended early, usage that is
  not the reply's own, a greedy row whose token was not its top-1: failures, judged only
  where the item's cold serial reference passed;
- a wrong answer with only its own content (a miss, a broken count, an early end) is replayed
  in its wave (``probe.replay``): wrong again is a failure, right every time a numerics flip,
  which is soft and named, as is one that left its reference at a near tie (``ties``); flips
  far above the serial rate are a failure again;
- greedy divergence from the serial run is soft (a failure with ``strict_greedy``); greedy rows
  beside sampled ones that diverge far more than those beside greedy ones were sampled.

Every line names the arm, the shape and the sessions, with each session's situation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from batchprobe.client.types import ErrorKind
from batchprobe.judge.answers import (
    beside,
    ended_early,
    leaked_param,
    missing_pieces,
    not_top1,
    passed,
    refused,
    short_length,
    situation,
    usage_beyond_stream,
    usage_mismatch,
)
from batchprobe.judge.arm_level import arm_level, pool_failures, step_of
from batchprobe.judge.divergence import sampled_divergence
from batchprobe.judge.references import References, is_reference, needs_reference, references
from batchprobe.judge.ties import Tie, near_tie
from batchprobe.results.arms import ArmComparison, ArmResult
from batchprobe.results.findings import CheckName, Finding, FindingKind, Judged
from batchprobe.results.sessions import SessionResult, refused_up_front
from batchprobe.results.shapes import SelfCheck
from batchprobe.results.thresholds import Thresholds

# Wrong answers with only their own content: replayed before they are called a failure.
REPLAYABLE = frozenset({FindingKind.RECALL_MISS, FindingKind.COUNT_BROKE, FindingKind.ENDED_EARLY})
_SELF_CHECK = {
    "recall": FindingKind.RECALL_MISS,
    "count": FindingKind.COUNT_BROKE,
    "bias": FindingKind.BIAS,
    "stop": FindingKind.STOP,
    "constraint": FindingKind.CONSTRAINT,
    "choices": FindingKind.CHOICES,
}
# Checks that judge an answer's content (a run where none judged anything is not judged).
CONTENT_CHECKS: frozenset[CheckName] = frozenset(
    {"recall", "count", "length", "bias", "stop", "constraint", "choices", "usage", "stream",
     "greedy"}
)


def _copy(s: SessionResult) -> int:
    return s.situation.copy_index if s.situation is not None else 0


def _finding(arm: ArmResult, s: SessionResult, kind: FindingKind, detail: str, **kw: object) -> Finding:
    return Finding(
        arm=arm.spec.name,
        step=step_of(arm),
        shape=s.shape,
        kind=kind,
        sessions=[s.session],
        copy_index=_copy(s),
        evidence=detail,
        message=f"session {s.session}{situation(s)} {detail}",
        **kw,  # type: ignore[arg-type]
    )


def _error(arm: ArmResult, s: SessionResult, refs: References, reference: bool) -> Finding:
    error = s.error
    kind = error.kind if error is not None else ErrorKind.MALFORMED_STREAM
    status = f" {error.http_status}" if error is not None and error.http_status else ""
    detail = f"errored ({kind.value}{status}): {error.message if error else ''}"
    unsupported = refused(s) and (reference or s.session in refs.refused)
    if unsupported:
        return _finding(arm, s, FindingKind.UNSUPPORTED, f"not served by this server: {detail}",
                        severity="info", error_kind=kind)
    return _finding(arm, s, FindingKind.ERROR, detail, error_kind=kind)


def _cross_talk(arm: ArmResult, s: SessionResult) -> Finding:
    sources = ", ".join(map(str, s.cross_talk_from))
    what = "the code" if s.workload == "recall" else "the content"
    detail = f"answered with {what} of session(s) {sources} (cross-talk): {s.text[:48]!r}" + "".join(
        f"; its choice {c.index}: {c.text[:48]!r}" for c in s.choices if c.text != s.text
    )
    return _finding(arm, s, FindingKind.CROSS_TALK, detail, sources=list(s.cross_talk_from))


@dataclass
class _Tally:
    judged: dict[tuple[str | None, CheckName], int] = field(
        default_factory=lambda: defaultdict(int)
    )

    def count(self, shape: str | None, check: CheckName) -> None:
        self.judged[(shape, check)] += 1


def _content(
    arm: ArmResult, s: SessionResult, ref: SessionResult, t: Thresholds, tally: _Tally
) -> list[Finding]:
    """Every check of one concurrent answer whose reference passed."""
    found: list[Finding] = []
    check: SelfCheck | None = s.check
    if check is None and s.workload == "recall" and s.hit is not None:
        # Scored without a checker: its hit says.
        check = SelfCheck(kind="recall", passed=s.hit, detail=None if s.hit else "missed its needle")
    if check is not None:
        tally.count(s.shape, check.kind)
        if not check.passed:
            found.append(_finding(arm, s, _SELF_CHECK[check.kind], check.detail or "failed"))
    sampled = s.situation is not None and s.situation.sampled
    early = None if sampled else ended_early(s, ref, t.length_slack)
    found += _on_any_model(arm, s, ref, early, t, tally)
    leak = _leaked(arm, s, ref)
    if leak is not None:
        found = [f for f in found if f.kind not in _LEAK_EXPLAINS] + [leak]
    return found


# What another row's parameter explains in an answer: its findings give way to the leak's.
_LEAK_EXPLAINS = frozenset({
    FindingKind.RECALL_MISS, FindingKind.COUNT_BROKE, FindingKind.ENDED_EARLY, FindingKind.BIAS,
    FindingKind.STOP, FindingKind.CONSTRAINT,
})


# Leaks that are failures outright, with or without a reference (a broken count beside a
# penalty row waits for its reference and its replays: a numerics flip can look the same).
_OUTRIGHT = frozenset({FindingKind.STOP, FindingKind.BIAS, FindingKind.CONSTRAINT})


def _leaked(arm: ArmResult, s: SessionResult, ref: SessionResult | None) -> Finding | None:
    """Another row's stop string, logit bias or penalties in this answer, as a finding that
    names that row in ``sources``. A stop or a bias is a failure outright (no healthy answer
    stops at a string it never asked for or writes another row's forced word); a count
    broken as penalties break one is a broken count, replayed like one (a numerics flip can
    look the same)."""
    leak = leaked_param(s, beside(s, arm.sessions), ref)
    if leak is None:
        return None
    if leak.kind == "penalty":
        broke = s.check is not None and not s.check.passed
        kind = FindingKind.COUNT_BROKE if broke else FindingKind.ENDED_EARLY
    else:
        kind = {"stop": FindingKind.STOP, "constraint": FindingKind.CONSTRAINT}.get(
            leak.kind, FindingKind.BIAS)
    return _finding(arm, s, kind, leak.detail, sources=leak.sources)


def _stream(
    arm: ArmResult, s: SessionResult, ref: SessionResult | None, t: Thresholds, tally: _Tally
) -> list[Finding]:
    """The stream itself, on any model: pieces missing against its reference's text (where
    it has one) and usage beyond what its text can hold (vllm-mlx's dropped deltas)."""
    if s.error is not None or not s.streamed:
        return []
    tally.count(s.shape, "stream")
    found = (
        missing_pieces(s, ref, t.length_slack) if ref is not None else None,
        usage_beyond_stream(s, ref, t.length_slack),
    )
    evidence = "; ".join(d for d in found if d is not None)
    return [_finding(arm, s, FindingKind.STREAM, evidence)] if evidence else []


def _undetermined(
    arm: ArmResult, s: SessionResult, ref: SessionResult, t: Thresholds, tally: _Tally
) -> list[Finding]:
    """An answer whose reference answered but failed its own check (a model that cannot do
    the task): its content is not judged, what holds on any model is: its usage, and a
    'length' finish short of its own max_tokens. A clean early stop is not: an undetermined
    text may end anywhere under other numerics."""
    return _on_any_model(arm, s, ref, short_length(s, t.length_slack), t, tally)


def _on_any_model(
    arm: ArmResult, s: SessionResult, ref: SessionResult | None, length: str | None,
    t: Thresholds, tally: _Tally,
) -> list[Finding]:
    """What is judged whatever the answer's content: its length (``length``: the evidence the
    caller could read), its usage, its stream, a greedy row's every token its own top-1."""
    found = []
    for name, kind, detail in (
        ("length", FindingKind.ENDED_EARLY, length),
        ("usage", FindingKind.USAGE, usage_mismatch(s, ref, t.length_slack)),
    ):
        tally.count(s.shape, name)  # type: ignore[arg-type]
        if detail is not None:
            found.append(_finding(arm, s, kind, detail))
    found += _stream(arm, s, ref, t, tally)
    if s.top_logprobs:
        tally.count(s.shape, "greedy")
        top = not_top1(s)
        if top is not None:
            found.append(_finding(arm, s, FindingKind.SAMPLED, top))
    return found


def _self_checked(arm: ArmResult, s: SessionResult, t: Thresholds, tally: _Tally) -> list[Finding]:
    """An answer that checks itself and passed (its own code, a count run on to its
    max_tokens): judged without a reference on its self-check and on what needs none."""
    if s.check is not None:
        tally.count(s.shape, s.check.kind)
    elif passed(s) is not None:
        tally.count(s.shape, "recall")  # scored without a checker: its hit says
    return _on_any_model(arm, s, None, short_length(s, t.length_slack), t, tally)


def wrong_again(s: SessionResult, ref: SessionResult, t: Thresholds) -> bool:
    """A replayed answer went wrong again (any way at all)."""
    if s.error is not None or s.cross_talk_from or passed(s) is False:
        return True
    return ended_early(s, ref, t.length_slack) is not None


def _replayed(arm: ArmResult, f: Finding, refs: References, t: Thresholds) -> Finding:
    """A replayable finding after its replays: still a failure, or a soft flip."""
    session = f.sessions[0]
    again = [r for r in arm.replays if r.session == session and _copy(r) == f.copy_index]
    ref = refs.passed.get(session)
    if not again or ref is None:
        return f
    wrong = [r for r in again if wrong_again(r, ref, t)]
    failed = len(wrong)
    counts = {"replays": len(again), "replays_failed": failed}
    if failed:
        message = f"{f.message}; wrong again in {failed}/{len(again)} replays of its wave"
        tie = _tied(arm, f, wrong, ref, t)
        if tie is None:
            return f.model_copy(update={"message": message, **counts})
        message += (f", but {tie.describe()}: a near tie, which numerics decide (the batch, "
                    "the prefill's split, the prefix cache), not a fault")
        return f.model_copy(
            update={"kind": FindingKind.FLIP, "severity": "soft", "message": message, **counts}
        )
    message = (
        f"{f.message}; right in {len(again)}/{len(again)} replays of its wave: a numerics flip"
    )
    return f.model_copy(
        update={"kind": FindingKind.FLIP, "severity": "soft", "message": message, **counts}
    )


def _tied(
    arm: ArmResult, f: Finding, wrong: list[SessionResult], ref: SessionResult, t: Thresholds
) -> Tie | None:
    """The near tie where the answer left its reference, when every wrong replay left it at
    a near tie too (or answered the same); never under ``strict_greedy``."""
    if t.strict_greedy:
        return None
    first = next(
        (s for s in arm.sessions if s.session == f.sessions[0] and _copy(s) == f.copy_index), None
    )
    if first is None or (tie := near_tie(first, ref, t.near_tie_nats)) is None:
        return None
    same = all(
        r.error is None and (r.text == first.text or near_tie(r, ref, t.near_tie_nats))
        for r in wrong
    )
    return tie if same else None


def _flip_rate(arm: ArmResult, flips: list[Finding], judged: int, t: Thresholds) -> Finding | None:
    serial = arm.serial_replays
    serial_rate = sum(1 for s in serial if s.error or passed(s) is False) / len(serial) if serial else 0.0
    rate = len(flips) / judged if judged else 0.0
    if len(flips) < 2 or rate <= t.max_flip_rate or rate <= 3 * serial_rate:
        return None
    sessions = sorted({s for f in flips for s in f.sessions})
    return Finding(
        arm=arm.spec.name,
        step=step_of(arm),
        kind=FindingKind.FLIP_RATE,
        sessions=sessions,
        evidence=f"{len(flips)}/{judged} answers flipped; serial {serial_rate:.0%}",
        message=(
            f"{len(flips)}/{judged} answers ({rate:.0%}) were wrong once and right on replay, "
            f"against {serial_rate:.0%} of {len(serial)} serial references replayed alone: "
            f"far above what numerics flip (threshold {t.max_flip_rate:.0%})"
        ),
    )


def _errors_grouped(found: list[Finding]) -> list[Finding]:
    """One error finding per shape and error kind, listing its sessions."""
    groups: dict[tuple[str | None, ErrorKind | None], list[Finding]] = defaultdict(list)
    rest = []
    for f in found:
        if f.kind is FindingKind.ERROR:
            groups[(f.shape, f.error_kind)].append(f)
        else:
            rest.append(f)
    merged = []
    for group in groups.values():
        if len(group) <= 3:
            merged += group
            continue
        first = group[0]
        sessions = [s for f in group for s in f.sessions]
        kind = first.error_kind.value if first.error_kind else "error"
        merged.append(first.model_copy(update={
            "sessions": sessions,
            "message": f"sessions {', '.join(map(str, sessions))} errored ({kind}): "
                       f"{first.evidence.split(': ', 1)[-1]}",
        }))
    return merged + rest


@dataclass
class ArmJudgement:
    """One arm's (or step's) findings, how many answers each check judged, and the answers
    that wait for a reference the judge has not got (not judged, in a final pass)."""

    findings: list[Finding]
    judged: list[Judged]
    awaiting: list[int] = field(default_factory=list)


def judge_arm(arm: ArmResult, reference: bool, refs: References, t: Thresholds) -> ArmJudgement:
    """Every finding of one arm (or step), and how many answers each check judged."""
    found = arm_level(arm, t)
    tally = _Tally()
    awaiting: list[int] = []
    pooled = {s.session for s in pool_failures(arm)}
    for s in arm.sessions:
        if s.error is not None:
            if arm.pressure is None or not (s.session in pooled or refused_up_front(s)
                                            or (s.situation and s.situation.role == "oversize")):
                found.append(_error(arm, s, refs, reference))
            continue
        if s.situation is not None and s.situation.role == "oversize":
            continue  # larger than the pool: answered or refused, both are the server's call
        if s.hung_up:
            continue  # cut by its own client on purpose: its retry and neighbours are judged
        tally.count(s.shape, "errors")
        if not reference:
            # Every answer that came back is judged for another session's content.
            tally.count(s.shape, "cross_talk")
        if s.cross_talk_from:
            found.append(_cross_talk(arm, s))
            continue
        if reference:
            continue
        ref = refs.passed.get(s.session)
        if ref is not None:
            found += _content(arm, s, ref, t, tally)
        elif s.session in refs.failed and refs.failed[s.session].error is None:
            found += _undetermined(arm, s, refs.failed[s.session], t, tally)
        elif not needs_reference(s, t.length_slack):
            found += _self_checked(arm, s, t, tally)
        elif (leak := _leaked(arm, s, None)) is not None and leak.kind in _OUTRIGHT:
            found.append(leak)  # another row's stop string or forced word: no reference needed
        elif s.session not in refs:
            awaiting.append(s.session)
    found = [_replayed(arm, f, refs, t) if f.kind in REPLAYABLE else f for f in found]
    flips = [f for f in found if f.kind is FindingKind.FLIP]
    replayable = sum(n for (_, check), n in tally.judged.items() if check in ("recall", "count"))
    rate = _flip_rate(arm, flips, replayable, t)
    if flips:
        tally.count(None, "flips")
    found += [rate] if rate is not None else []
    judged = [
        Judged(arm=arm.spec.name, step=step_of(arm), shape=shape, check=check, judged=n)
        for (shape, check), n in tally.judged.items()
    ]
    return ArmJudgement(_errors_grouped(found), judged, sorted(set(awaiting)))


def _not_judged(arms: Sequence[ArmResult], refs: References) -> list[Finding]:
    """Items whose serial reference failed its own check: named per shape, not judged."""
    by_shape: dict[str, list[int]] = defaultdict(list)
    for s in refs.failed.values():
        if s.error is None:
            by_shape[s.shape].append(s.session)
    if not by_shape or not arms:
        return []
    base = arms[0].spec.name
    return [
        Finding(
            arm=base,
            shape=shape,
            kind=FindingKind.NOT_JUDGED,
            severity="info",
            sessions=sorted(sessions),
            message=f"{len(sessions)} item(s) not judged: their serial reference in {base} "
            "failed its own check",
        )
        for shape, sessions in by_shape.items()
    ]


def _greedy(comparisons: Iterable[ArmComparison], arms: Sequence[ArmResult], t: Thresholds) -> list[Finding]:
    steps = {a.spec.name: step_of(a) for a in arms}
    found = []
    for c in comparisons:
        differ = c.greedy_compared - c.greedy_matches
        if not c.greedy_compared or not differ:
            continue
        sessions = sorted({d.session for d in c.divergences})
        found.append(Finding(
            arm=c.arm,
            step=steps.get(c.arm),
            kind=FindingKind.GREEDY_DIVERGENCE,
            severity="hard" if t.strict_greedy else "soft",
            sessions=sessions,
            evidence=f"{c.greedy_matches}/{c.greedy_compared} equal",
            message=f"{differ}/{c.greedy_compared} greedy outputs differ from {c.baseline}"
            + (" (strict greedy)" if t.strict_greedy else
               " (soft: expected numerics on an engine that is not batch-invariant)"),
        ))
    return found


@dataclass
class Judgement:
    findings: list[Finding]
    judged: list[Judged]


def judge(
    arms: Sequence[ArmResult], comparisons: Sequence[ArmComparison], t: Thresholds
) -> Judgement:
    """Every finding of the run: each arm and step, the items not judged, greedy divergence."""
    refs = references(arms)
    findings: list[Finding] = []
    judged: list[Judged] = []
    for index, arm in enumerate(arms):
        one = judge_arm(arm, is_reference(index, arm), refs, t)
        findings += one.findings + _unreferenced(arm, one.awaiting)
        judged += one.judged
    findings += sampled_divergence(arms, refs.passed, t)
    findings += _greedy(comparisons, arms, t)
    findings += _not_judged(arms, refs)
    return Judgement(findings, judged)


def _unreferenced(arm: ArmResult, sessions: list[int]) -> list[Finding]:
    """Wrong answers the judge got no reference for: the first references of their class
    (request path and workload) all failed alone, so the model cannot do it."""
    if not sessions:
        return []
    return [Finding(
        arm=arm.spec.name, step=step_of(arm), kind=FindingKind.NOT_JUDGED, severity="info",
        sessions=sessions,
        message=f"{len(sessions)} wrong answer(s) not judged: no serial reference (the first "
        "ones of their kind, request path and workload, failed alone too, or the run ended "
        "before its references)",
    )]


def replay_candidates(arm: ArmResult, arms: Sequence[ArmResult], t: Thresholds) -> list[int]:
    """Sessions of ``arm`` to replay: wrong with only their own content, in an arm with no
    other failure (an arm that failed already fails whatever a replay says)."""
    hard = [f for f in judge_arm(arm, False, references(arms), t).findings if f.hard]
    if any(f.kind not in REPLAYABLE for f in hard):
        return []
    return sorted({s for f in hard for s in f.sessions})
