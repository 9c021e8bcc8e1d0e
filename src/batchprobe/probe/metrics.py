"""Per-arm metrics from scored sessions."""

from __future__ import annotations

from collections import Counter

from batchprobe.client.types import ErrorKind
from batchprobe.probe.stats import distribution, union_length
from batchprobe.results.models import ArmMetrics, SessionResult


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


def arm_metrics(sessions: list[SessionResult], wall_s: float) -> ArmMetrics:
    ok = [s for s in sessions if s.ok]
    recall = [s for s in ok if s.workload == "recall"]
    # Throughput and latency come from today's wave (burst), cold; the other shapes are about
    # correctness.
    timed = [s for s in ok if s.shape == "burst"] or ok
    decode = [s for s in timed if s.workload == "decode"]
    errors: Counter[ErrorKind] = Counter(s.error.kind for s in sessions if s.error is not None)
    cached = [s.cached_tokens for s in sessions if s.cached_tokens is not None]
    hits = sum(1 for s in recall if s.hit)
    return ArmMetrics(
        sessions=len(sessions),
        ok_sessions=len(ok),
        errors_by_kind=dict(errors),
        recall=hits / len(recall) if recall else None,
        recall_hits=hits,
        recall_sessions=len(recall),
        cross_talk_sessions=sum(1 for s in sessions if s.cross_talk_from),
        prompt_tokens=sum(s.prompt_tokens or 0 for s in ok),
        completion_tokens=sum(s.completion_tokens or len(s.chunk_ends) for s in ok),
        cached_prompt_tokens=sum(cached) if cached else None,
        decode_tokens_per_s=_rate(decode),
        recall_decode_tokens_per_s=_rate([s for s in timed if s.workload == "recall"]),
        prefill_tokens_per_s=_prefill_rate([s for s in timed if s.workload == "recall"]),
        ttft_s=distribution(t for s in timed if not s.buffered and (t := s.ttft_s) is not None),
        itl_s=distribution(gap for s in timed if not s.buffered for gap in s.itl_s),
        e2e_s=distribution(s.e2e_s for s in timed),
        buffered_sessions=sum(1 for s in ok if s.buffered),
        wall_s=wall_s,
    )
