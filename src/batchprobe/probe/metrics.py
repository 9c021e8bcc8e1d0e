"""Per-arm metrics from scored sessions."""

from __future__ import annotations

from collections import Counter

from batchprobe.client.types import ErrorKind
from batchprobe.judge.judged import recall as recall_of
from batchprobe.judge.steps import decode_window
from batchprobe.probe.stats import distribution, percentile, union_length
from batchprobe.results.models import ArmMetrics, SessionResult


def _decode_tokens(s: SessionResult) -> int:
    tokens = s.completion_tokens if s.completion_tokens is not None else len(s.chunk_ends)
    # Tokens after the first: the first one belongs to prefill (TTFT). Buffered: all of them.
    return tokens if s.buffered else max(tokens - 1, 0)


def _rate(sessions: list[SessionResult]) -> float | None:
    windows = [w for s in sessions if (w := decode_window(s)) is not None]
    tokens = sum(_decode_tokens(s) for s in sessions if decode_window(s) is not None)
    span = union_length(windows)
    return tokens / span if span > 0 and tokens > 0 else None


def _prefill_rate(sessions: list[SessionResult]) -> float | None:
    windows = [(s.start_s, s.first_token_s) for s in sessions if s.first_token_s is not None]
    tokens = sum(s.prompt_tokens or 0 for s in sessions if s.first_token_s is not None)
    span = union_length(windows)
    return tokens / span if span > 0 and tokens > 0 else None


def _own_rate(s: SessionResult) -> float | None:
    window = decode_window(s)
    tokens = _decode_tokens(s)
    if window is None or window[1] <= window[0] or tokens <= 0:
        return None
    return tokens / (window[1] - window[0])


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
