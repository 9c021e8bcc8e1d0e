"""Correctness per shape: errors, cross-talk, and self-checks judged where the serial reference passed.

Every failure names its arm, its shape and its sessions, with each session's situation, so it
reads like "arm batching@8, shape join: session 21 (joined while 4 were decoding) count broke at
token 3 ('!!!!')". Recall misses keep a tolerance per shape (one flipped answer in a shape is
what engines that are not batch-invariant produce); a broken count, a bias or stop not honoured,
an error or cross-talk is a failure on its own.
"""

from __future__ import annotations

import math
from collections import defaultdict

from batchprobe.results.models import ArmResult, SessionResult
from batchprobe.results.thresholds import Thresholds
from batchprobe.workload.checks import count_sources

_MAX_LINES = 6  # per arm and shape; the rest are counted


def situation(s: SessionResult) -> str:
    """The session's circumstances in words, for a reason line."""
    sit = s.situation
    if sit is None:
        return ""
    words = []
    if sit.copy_index:
        words.append(f"its copy {sit.copy_index + 1}")
    if sit.decoding_at_arrival:
        words.append(f"joined while {sit.decoding_at_arrival} were decoding")
    elif sit.in_flight_at_arrival:
        words.append(f"arrived with {sit.in_flight_at_arrival} in flight")
    token = s.check.token if s.check is not None else None
    gone = [d for d in sit.departures if token is None or d.at_token <= token]
    if gone and token is not None:
        last = gone[-1]
        words.append(
            f"after session {last.session} left at its token {last.at_token} "
            f"({last.in_flight} still in flight)"
        )
    if sit.params != "greedy":
        words.append(sit.params)
    if s.cached_tokens:
        words.append(f"{s.cached_tokens} prompt tokens cached")
    words.append(f"max_tokens {sit.max_tokens}, {s.prompt_tokens or '?'} prompt tokens, {sit.api}")
    return f" ({'; '.join(words)})"


def passed(s: SessionResult) -> bool | None:
    """The session's self-check; a recall session scored without one counts by its hit."""
    if s.check is not None:
        return s.check.passed
    return s.hit if s.workload == "recall" else None


def _is_reference(index: int, arm: ArmResult) -> bool:
    """The baseline (the first arm), or a serial pass run for a sweep step's references."""
    return index == 0 or arm.spec.role == "reference"


def _passed_references(arms: list[ArmResult]) -> dict[int, SessionResult]:
    return {
        s.session: s
        for index, arm in enumerate(arms)
        if _is_reference(index, arm)
        for s in arm.sessions
        if s.ok and passed(s) and (s.situation is None or s.situation.copy_index == 0)
    }


def _leak_sources(s: SessionResult, arm: ArmResult) -> str:
    """For a params row that broke: the overlapping rows whose parameters differ, named."""
    if s.situation is None:
        return ""
    mine = s.situation.params
    others = [
        o for o in arm.sessions
        if o.shape == s.shape and o.session != s.session and o.situation is not None
        and o.situation.params != mine and o.start_s < s.end_s and s.start_s < o.end_s
    ]
    for o in others:
        forced = o.situation.bias_text if o.situation else None
        if forced and forced.strip() and forced.strip() in s.text:
            return f"; it shows session {o.session}'s parameter ({o.situation.params})"  # type: ignore[union-attr]
    if not others:
        return ""
    broken = s.text[_broken_at(s):]
    sampled = [o for o in others if o.situation and o.situation.sampled]
    if sampled and not s.situation.sampled and not any(c.isdigit() for c in broken):
        names = ", ".join(f"session {o.session} ({o.situation.params})" for o in sampled)  # type: ignore[union-attr]
        return f"; a greedy row that reads sampled: it shows the parameters of {names}"
    listed = ", ".join(f"session {o.session} ({o.situation.params})" for o in others[:4])  # type: ignore[union-attr]
    return f"; a parameter leak? rows in flight with other parameters: {listed}"


def _broken_at(s: SessionResult) -> int:
    token = s.check.token if s.check is not None and s.check.token is not None else 0
    return sum(len(p) for p in s.pieces[:token])


def _self_check_failure(s: SessionResult, arm: ArmResult, counting: set[int]) -> str:
    detail = s.check.detail if s.check is not None else "failed its check"
    line = f"session {s.session}{situation(s)} {detail}"
    if s.workload == "decode":
        sources = count_sources(s.text, s.session, counting)
        if sources:
            line += f"; its text has the count of session(s) {', '.join(map(str, sources))} (cross-talk)"
    if s.shape == "params":
        line += _leak_sources(s, arm)
    return line


def _errors(s: SessionResult) -> str:
    kind = s.error.kind.value if s.error is not None else "?"
    return f"session {s.session}{situation(s)} errored ({kind})"


def _cross_talk(s: SessionResult) -> str:
    sources = ", ".join(map(str, s.cross_talk_from))
    return f"session {s.session}{situation(s)} answered with the code of session(s) {sources} (cross-talk)"


def _recall_tolerance(judged: int, t: Thresholds) -> int:
    # One miss per shape is tolerated whenever any drop is (max_recall_drop > 0).
    return max(math.floor(t.max_recall_drop * judged), 1 if t.max_recall_drop > 0 else 0)


def _arm_failures(arm: ArmResult, refs: dict[int, SessionResult], t: Thresholds, is_base: bool) -> dict[str, list[str]]:
    by_shape: dict[str, list[str]] = defaultdict(list)
    counting = {s.session for s in arm.sessions if s.workload == "decode"}
    recall_judged: dict[str, int] = defaultdict(int)
    recall_missed: dict[str, list[SessionResult]] = defaultdict(list)
    errored: dict[str, list[SessionResult]] = defaultdict(list)
    for s in arm.sessions:
        if s.error is not None:
            errored[s.shape].append(s)
            continue
        if s.cross_talk_from and s.workload == "recall":
            by_shape[s.shape].append(_cross_talk(s))
            continue
        verdict = passed(s)
        if is_base or s.session not in refs or verdict is None:
            continue
        if s.workload == "recall":
            recall_judged[s.shape] += 1
            if not verdict:
                recall_missed[s.shape].append(s)
        elif not verdict:
            by_shape[s.shape].append(_self_check_failure(s, arm, counting))
    for shape, failed in errored.items():
        if len(failed) <= 3:
            by_shape[shape][:0] = [_errors(s) for s in failed]
        else:
            kinds = sorted({s.error.kind.value for s in failed if s.error is not None})
            names = ", ".join(str(s.session) for s in failed)
            by_shape[shape].insert(0, f"sessions {names} errored ({', '.join(kinds)})")
    for shape, missed in recall_missed.items():
        judged = recall_judged[shape]
        if len(missed) > _recall_tolerance(judged, t):
            names = "; ".join(
                f"session {s.session}{situation(s)} "
                + (s.check.detail or "" if s.check else "missed its needle")
                for s in missed
            )
            by_shape[shape].append(
                f"{len(missed)}/{judged} missed needles their serial reference found "
                f"(tolerated: {_recall_tolerance(judged, t)}): {names}"
            )
    return by_shape


def shape_failures(arms: list[ArmResult], t: Thresholds) -> list[str]:
    """Hard failures of every arm, each line naming the arm, the shape and the sessions."""
    if not arms:
        return []
    refs = _passed_references(arms)
    lines = []
    for index, arm in enumerate(arms):
        for shape, failures in _arm_failures(arm, refs, t, _is_reference(index, arm)).items():
            shown = failures[:_MAX_LINES]
            more = len(failures) - len(shown)
            text = "; ".join(shown) + (f"; and {more} more" if more else "")
            lines.append(f"arm {arm.spec.name}, shape {shape}: {text}")
    return lines


def unjudged(arms: list[ArmResult]) -> str | None:
    """How many self-checking items were not judged because their serial reference failed."""
    if not arms:
        return None
    checked = [
        s
        for index, arm in enumerate(arms)
        if _is_reference(index, arm)
        for s in arm.sessions
        if s.ok and passed(s) is not None
    ]
    failed = [s for s in checked if not passed(s)]
    if not failed:
        return None
    by_shape: dict[str, int] = defaultdict(int)
    for s in failed:
        by_shape[s.shape] += 1
    parts = ", ".join(f"{shape} {n}" for shape, n in by_shape.items())
    return (
        f"{len(failed)}/{len(checked)} self-checking items not judged: their serial reference in "
        f"{arms[0].spec.name} failed its own check ({parts})"
    )
