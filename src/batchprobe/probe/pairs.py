"""Paired, interleaved throughput samples: one request alone, then N at once, in turn, on the
same server and launch, each rated over its steady-state window (see ``results.throughput``).

A throughput control only: the samples' answers are not judged for correctness (the sweep's
own waves and references are), and none of them is stored but its timing figures.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from batchprobe.client import Completer
from batchprobe.probe.metrics import arm_metrics
from batchprobe.probe.stats import ratio_interval
from batchprobe.results.models import ArmResult, ArmSpec, RunConfig, SessionResult
from batchprobe.results.throughput import (
    PairedThroughput,
    RateSample,
    SpeedupInterval,
    ThroughputPair,
    WindowKind,
)
from batchprobe.send.arm import ArmContext
from batchprobe.send.cpu import CpuMeter
from batchprobe.send.waves import run_mixed_wave
from batchprobe.workload.decode import build_decode_items
from batchprobe.workload.shapes import Send, ShapeContext, ShapePlan

MAX_SAMPLE_TOKENS = 2048  # the most max_tokens a sample is sized to
# A window shorter than this is a timing anecdote (a scheduler hiccup of a few ms moves it by
# percents); the samples grow until their windows hold it as well as the tokens.
MIN_WINDOW_S = 0.4
INTERVAL_METHOD = (
    "95% t-interval over the pairs' log speedups, widened to hold their median and never "
    "narrower than the resolution either side of it"
)


@dataclass(frozen=True)
class PairPlan:
    """How many pairs, how long a window, and when the pairs may stop (``extra_s``: pairs
    past the minimum only while the pairs have taken less)."""

    n: int
    min_pairs: int
    max_pairs: int
    window_tokens: int
    threshold: float
    resolution: float
    when: str
    extra_s: float | None = None


def pair_plan(cfg: RunConfig, n: int, when: str) -> PairPlan:
    """The run's pairs at ``n``: at the start up to --max-pairs (within a tenth of a time
    budget) while the interval holds the threshold; after the mixed waves, --pairs of them."""
    budget = cfg.time_budget_s
    return PairPlan(
        n=n, min_pairs=cfg.pairs, max_pairs=cfg.max_pairs if when == "start" else cfg.pairs,
        window_tokens=cfg.pair_window_tokens, threshold=cfg.thresholds.min_speedup,
        resolution=cfg.thresholds.speedup_resolution, when=when,
        extra_s=None if budget is None else budget / 10,
    )


def _arrivals(s: SessionResult) -> list[float]:
    """The times each streamed chunk arrived (seconds since the sample began)."""
    if s.first_token_s is None:
        return []
    times, t = [s.first_token_s], s.first_token_s
    for gap in s.itl_s:
        t += gap
        times.append(t)
    return times


def _weight(s: SessionResult, chunks: int) -> float:
    """Tokens per chunk: a server that sends several tokens in one delta says so in usage."""
    tokens = s.completion_tokens
    return tokens / chunks if tokens is not None and chunks and tokens >= chunks else 1.0


def rate_sample(sessions: Sequence[SessionResult], streams: int) -> RateSample:
    """The tokens that arrived while every stream was decoding, over that window. A server
    that never ran them all together (a stream's first token came after another's last: it
    queued them, serial or capped below ``streams``) is rated over the whole sample instead,
    from its first token to its last: all the while it had the sample's work to do."""
    errors = sum(1 for s in sessions if s.error is not None)
    whole = arm_metrics(list(sessions), 0.0).decode_tokens_per_s if sessions else None
    arrivals = [_arrivals(s) for s in sessions]
    if errors or len(sessions) < streams or any(len(a) < 2 for a in arrivals):
        return RateSample(streams=streams, errors=errors, whole_tokens_per_s=whole)
    end = min(a[-1] for a in arrivals)
    begin = max(a[0] for a in arrivals)
    window: WindowKind = "all_decoding"
    if begin >= end:
        begin, end, window = min(a[0] for a in arrivals), max(a[-1] for a in arrivals), "queued"
    tokens, fewest = 0.0, math.inf
    for s, times in zip(sessions, arrivals):
        inside = sum(1 for t in times if begin < t <= end) * _weight(s, len(times))
        tokens += inside
        fewest = min(fewest, inside)
    if window == "queued":
        fewest = tokens  # the streams decoding in turn share the window
    return RateSample(
        streams=streams,
        tokens_per_s=tokens / (end - begin) if end > begin else None,
        window=window,
        window_s=end - begin,
        window_tokens=int(fewest),
        whole_tokens_per_s=whole,
    )


def _resized(max_tokens: int, sample: RateSample, plan: PairPlan) -> int:
    """``max_tokens`` for a sample like ``sample`` whose window holds the minimum: the window
    it had, its ramps (the tokens outside the window: prefill stagger, ramp-down) as they
    were, and the window scaled up to ``plan.window_tokens`` per stream and MIN_WINDOW_S
    at the rate it showed, 20% over."""
    have = max(sample.window_tokens, 1)
    rate = have / sample.window_s if sample.window_s > 0 else 0.0
    wanted = max(plan.window_tokens, math.ceil(rate * MIN_WINDOW_S), have)
    ramps = max(max_tokens - have, 1)
    return min(max(math.ceil((wanted + ramps) * 1.2), max_tokens + 1), MAX_SAMPLE_TOKENS)


def _long_enough(sample: RateSample, plan: PairPlan) -> bool:
    return (sample.tokens_per_s is not None and sample.window_tokens >= plan.window_tokens
            and sample.window_s >= MIN_WINDOW_S)


def interval(pairs: Sequence[ThroughputPair], resolution: float) -> SpeedupInterval | None:
    speedups = [p.speedup for p in pairs if p.counted and p.speedup is not None]
    if not speedups:
        return None
    median, low, high = ratio_interval(speedups, resolution)
    return SpeedupInterval(median=median, low=low, high=high, pairs=len(speedups),
                           confidence=0.95, method=INTERVAL_METHOD)


def decided(found: SpeedupInterval | None, threshold: float) -> bool:
    """The interval clears the threshold or stays below it."""
    return found is not None and (found.low >= threshold or found.high < threshold)


class PairRunner:
    """Sends the samples: fresh counting prompts each time (their own sessions), cold."""

    def __init__(self, sender: Completer, ctx: ArmContext, shapes: ShapeContext,
                 meter: CpuMeter) -> None:
        self.sender = sender
        self.ctx = ctx
        self.shapes = shapes
        self.meter = meter

    async def sample(self, streams: int, max_tokens: int, label: str) -> list[SessionResult]:
        items = build_decode_items(
            run_id=self.ctx.run_id, sessions=streams, max_tokens=max_tokens,
            prompt_style=self.ctx.prompt_style, seed=self.shapes.seed,
            first_session=self.shapes.take_sessions(streams)[0], shape="throughput",
        )
        plan = ShapePlan("throughput", items, [Send(i) for i in items])
        arm = ArmResult(spec=ArmSpec(name=label, concurrency=streams, role="step"),
                        state="running", started_at="")
        ctx = dataclasses.replace(self.ctx, plans=[plan], on_session=lambda a, s: None)
        self.meter.start()
        try:
            await run_mixed_wave(self.sender, arm, ctx)
        finally:
            self.meter.stop()
        return arm.sessions

    async def run(self, plan: PairPlan, sized: PairedThroughput | None = None) -> PairedThroughput:
        """At least ``plan.min_pairs`` counted pairs; more, up to ``plan.max_pairs``, while the
        interval holds the threshold (and within ``plan.extra_s``). ``sized``: earlier pairs
        at the same depth, whose samples' sizes are reused."""
        started = time.monotonic()
        one_tokens = sized.one_max_tokens if sized else 2 * plan.window_tokens + 2
        many_tokens = sized.max_tokens if sized else plan.window_tokens * 3 // 2 + 4
        result = PairedThroughput(n=plan.n, when=plan.when,  # type: ignore[arg-type]
                                  max_tokens=many_tokens, one_max_tokens=one_tokens,
                                  window_tokens=plan.window_tokens)
        attempts = buffered = 0
        while attempts < plan.max_pairs + 2:
            counted = sum(1 for p in result.pairs if p.counted)
            late = plan.extra_s is not None and time.monotonic() - started > plan.extra_s
            if counted >= plan.min_pairs and (
                late or counted >= plan.max_pairs or decided(result.interval, plan.threshold)
            ):
                break
            attempts += 1
            alone = await self.sample(1, one_tokens, f"pairs@{plan.n}/1")
            sessions = await self.sample(plan.n, many_tokens, f"pairs@{plan.n}/{plan.n}")
            one, many = rate_sample(alone, 1), rate_sample(sessions, plan.n)
            if any(s.buffered for s in (*alone, *sessions)):
                # A client stalled a few ms (a busy machine) reads a short stream in one go
                # too: only a pair of twice the tokens, buffered again, is the server's doing.
                buffered += 1
                if buffered >= 2 or one_tokens >= MAX_SAMPLE_TOKENS:
                    result.note = ("the server sends each reply at once (buffered): no "
                                   "window to rate")
                    break
                one_tokens = min(2 * one_tokens, MAX_SAMPLE_TOKENS)
                many_tokens = min(2 * many_tokens, MAX_SAMPLE_TOKENS)
                continue
            buffered = 0
            ok = _long_enough(one, plan) and _long_enough(many, plan)
            speedup = (many.tokens_per_s / one.tokens_per_s
                       if many.tokens_per_s and one.tokens_per_s else None)
            result.pairs.append(ThroughputPair(one=one, many=many, counted=ok, speedup=speedup))
            result.max_tokens, result.one_max_tokens = many_tokens, one_tokens
            if one.errors or many.errors:
                result.note = f"a sample errored ({one.errors + many.errors} request(s))"
                if attempts >= 2 and not any(p.counted for p in result.pairs):
                    break
                continue
            # A window short of the minimum: that sample, longer, from the next pair on.
            if not _long_enough(one, plan):
                one_tokens = _resized(one_tokens, one, plan)
            if not _long_enough(many, plan):
                many_tokens = _resized(many_tokens, many, plan)
            result.interval = interval(result.pairs, plan.resolution)
        result.interval = interval(result.pairs, plan.resolution)
        if result.interval is not None:
            result.note = None
        elif result.note is None:
            result.note = "no pair had a window where every stream decoded together"
        result.load = self.meter.load()
        result.wall_s = round(time.monotonic() - started, 3)
        return result
