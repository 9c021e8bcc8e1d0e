"""Per-arm metrics from scored sessions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from batchprobe.client.types import ErrorKind
from batchprobe.judge.judged import recall as recall_of
from batchprobe.probe.stats import distribution, percentile, union_length
from batchprobe.results.models import ArmMetrics, ArmResult, SessionResult
from batchprobe.results.shapes import Situations


def _decode_window(s: SessionResult) -> tuple[float, float] | None:
    if s.buffered:
        return (s.start_s, s.end_s)
    if s.first_token_s is None or s.last_token_s is None:
        return None
    return (s.first_token_s, s.last_token_s)


def _decode_tokens(s: SessionResult) -> int:
    tokens = s.completion_tokens if s.completion_tokens is not None else len(s.chunk_ends)
    # Tokens after the first: the first one belongs to prefill (TTFT). Buffered: all of them.
    return tokens if s.buffered else max(tokens - 1, 0)


def _rate(sessions: list[SessionResult]) -> float | None:
    windows = [w for s in sessions if (w := _decode_window(s)) is not None]
    tokens = sum(_decode_tokens(s) for s in sessions if _decode_window(s) is not None)
    span = union_length(windows)
    return tokens / span if span > 0 and tokens > 0 else None


def _prefill_rate(sessions: list[SessionResult]) -> float | None:
    windows = [(s.start_s, s.first_token_s) for s in sessions if s.first_token_s is not None]
    tokens = sum(s.prompt_tokens or 0 for s in sessions if s.first_token_s is not None)
    span = union_length(windows)
    return tokens / span if span > 0 and tokens > 0 else None


def _own_rate(s: SessionResult) -> float | None:
    window = _decode_window(s)
    tokens = _decode_tokens(s)
    if window is None or window[1] <= window[0] or tokens <= 0:
        return None
    return tokens / (window[1] - window[0])


def most_at_once(sessions: list[SessionResult]) -> int:
    """The most sessions decoding at the same moment, from their decode windows."""
    edges = sorted(
        (t, step)
        for s in sessions
        if (w := _decode_window(s)) is not None and w[1] > w[0]
        for t, step in ((w[0], 1), (w[1], -1))
    )
    most = current = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        current += step
        most = max(most, current)
    return most


def arm_metrics(
    sessions: list[SessionResult], wall_s: float, *, every_shape: bool = False
) -> ArmMetrics:
    """Rates come from the burst wave; ``every_shape``: the latency distributions cover every
    session (a sweep step's, whose mixed wave shares the server among all shapes)."""
    ok = [s for s in sessions if s.ok]
    recall = recall_of(sessions)
    # Throughput and latency come from the burst wave, cold; the other shapes are about
    # correctness. A sweep step's latencies cover its mixed wave too.
    timed = [s for s in ok if s.shape == "burst"] or ok
    latency = ok if every_shape else timed
    own = sorted(r for s in ok if (r := _own_rate(s)) is not None)
    decode = [s for s in timed if s.workload == "decode"]
    errors: Counter[ErrorKind] = Counter(s.error.kind for s in sessions if s.error is not None)
    cached = [s.cached_tokens for s in sessions if s.cached_tokens is not None]
    return ArmMetrics(
        sessions=len(sessions),
        ok_sessions=len(ok),
        errors_by_kind=dict(errors),
        recall=recall.rate,
        recall_hits=recall.hits,
        recall_sessions=recall.answered,
        cross_talk_sessions=sum(1 for s in sessions if s.cross_talk_from),
        prompt_tokens=sum(s.prompt_tokens or 0 for s in ok),
        completion_tokens=sum(s.completion_tokens or len(s.chunk_ends) for s in ok),
        cached_prompt_tokens=sum(cached) if cached else None,
        decode_tokens_per_s=_rate(decode),
        recall_decode_tokens_per_s=_rate([s for s in timed if s.workload == "recall"]),
        aggregate_decode_tokens_per_s=_rate(ok),
        per_session_decode_tokens_per_s=percentile(own, 50) if own else None,
        timed_shapes="all" if every_shape else "burst",
        output_tokens_per_s=(
            sum(s.completion_tokens or len(s.chunk_ends) for s in ok) / wall_s if wall_s > 0 else None
        ),
        prefill_tokens_per_s=_prefill_rate([s for s in timed if s.workload == "recall"]),
        ttft_s=distribution(t for s in latency if not s.buffered and (t := s.ttft_s) is not None),
        itl_s=distribution(gap for s in latency if not s.buffered for gap in s.itl_s),
        e2e_s=distribution(s.e2e_s for s in latency),
        buffered_sessions=sum(1 for s in ok if s.buffered),
        wall_s=wall_s,
    )


def situations(arms: Sequence[ArmResult], kv_not_run: str | None = None) -> Situations:
    """What the run's concurrent arms made happen (aborts, retries, capacity checks, the
    wave past the KV pool, or why there was none)."""
    made = Situations(kv_not_run=kv_not_run)
    for arm in arms:
        if arm.pressure is not None:
            made.kv_pressure, made.kv_not_run = arm.pressure, None
        if arm.spec.concurrency > 1 and arm.spec.role != "reference":
            sits = [s.situation for s in arm.sessions if s.situation is not None]
            made.constrained += sum(1 for sit in sits if sit.constraint is not None)
            made.choice_rows += sum(1 for sit in sits if sit.choices is not None)
        dropped = {s.session for s in arm.sessions if s.hung_up}
        made.aborts += len(dropped)
        made.aborts_while_waiting += sum(
            1 for s in arm.sessions
            if s.hung_up and s.situation is not None and s.situation.waiting_at_hang_up
        )
        made.retries += sum(1 for s in arm.sessions if s.session in dropped and not s.hung_up
                            and s.situation is not None and s.situation.copy_index)
        if arm.capacity is not None:
            made.capacity_checked += 1
        elif dropped:
            why = ("capacity is read in sweep steps only" if arm.spec.role != "step" else
                   "requests of the step errored: the server's running count cannot tell "
                   "them from the dropped ones" if any(s.error for s in arm.sessions) else
                   "the server states no running count (/metrics, /slots)")
            made.not_checked.append(
                f"{arm.spec.name}: whether dropped requests stopped is not known ({why})"
            )
    return made
