"""Comparisons of each arm against the baseline arm."""

from __future__ import annotations

from batchprobe.results.models import ArmComparison, ArmResult, Divergence, SessionResult


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def first_divergence(base: SessionResult, other: SessionResult) -> Divergence | None:
    """None when the texts are equal; else where the chunk sequences first differ."""
    if base.text == other.text:
        return None
    base_pieces, other_pieces = base.pieces, other.pieces
    pairs = enumerate(zip(base_pieces, other_pieces))
    shorter = min(len(base_pieces), len(other_pieces))
    index = next((i for i, (a, b) in pairs if a != b), shorter)
    return Divergence(
        workload=base.workload,
        session=base.session,
        index=index,
        baseline=base_pieces[index] if index < len(base_pieces) else None,
        arm=other_pieces[index] if index < len(other_pieces) else None,
    )


def logprob_delta(base: SessionResult, other: SessionResult, agree: int) -> float | None:
    """Largest |difference| over the first ``agree`` tokens, where both arms chose alike."""
    if base.logprobs is None or other.logprobs is None:
        return None
    pairs = list(zip(base.logprobs, other.logprobs))[:agree]
    return max((abs(a - b) for a, b in pairs), default=None)


def _sampled(s: SessionResult) -> bool:
    # A sampled row (the params shape) has no greedy reference to equal.
    return s.situation is not None and s.situation.sampled


def compare(arm: ArmResult, baseline: ArmResult) -> ArmComparison:
    base_m, arm_m = baseline.metrics, arm.metrics
    comparison = ArmComparison(arm=arm.spec.name, baseline=baseline.spec.name)
    if base_m is None or arm_m is None:
        return comparison
    speedup = _ratio(arm_m.decode_tokens_per_s, base_m.decode_tokens_per_s)
    comparison.decode_speedup = speedup
    comparison.scaling_efficiency = None if speedup is None else speedup / arm.spec.concurrency
    comparison.prefill_speedup = _ratio(arm_m.prefill_tokens_per_s, base_m.prefill_tokens_per_s)
    if base_m.recall is not None and arm_m.recall is not None:
        comparison.recall_delta = arm_m.recall - base_m.recall
    # A reference sent with a nonce had another prompt: no greedy equality to read from it.
    base_ok = {
        (s.workload, s.session): s for s in baseline.sessions
        if s.ok and not (s.situation is not None and s.situation.nonce)
    }
    for s in arm.sessions:
        base = base_ok.get((s.workload, s.session))
        # A later conversation turn continues its own arm's answers: only equal prompts compare.
        if (base is None or not s.ok or s.hung_up or _sampled(s)
                or base.prompt_digest != s.prompt_digest):
            continue
        comparison.greedy_compared += 1
        divergence = first_divergence(base, s)
        if divergence is None:
            comparison.greedy_matches += 1
        else:
            comparison.divergences.append(divergence)
        agree = len(s.chunk_ends) if divergence is None else divergence.index
        delta = logprob_delta(base, s, agree)
        if delta is not None:
            comparison.max_logprob_delta = max(comparison.max_logprob_delta or 0.0, delta)
    if comparison.greedy_compared:
        comparison.greedy_match_rate = comparison.greedy_matches / comparison.greedy_compared
    return comparison
