"""The throughput pairs' figures and decisions, on hand-made samples: the steady-state window,
the interval, yes / no / undecided, the server's history and the gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.judge.steps import envelope
from batchprobe.judge.throughput import history, paired_parallel
from batchprobe.probe.pairs import interval, rate_sample
from batchprobe.probe.stats import ratio_interval
from batchprobe.report.compare import _pairs_findings
from batchprobe.results import Report, RunConfig, SessionResult
from batchprobe.results.findings import FindingKind
from batchprobe.results.models import Environment, Verdict
from batchprobe.results.thresholds import Thresholds
from batchprobe.results.throughput import (
    CpuLoad,
    PairedThroughput,
    RateSample,
    SpeedupInterval,
    ThroughputPair,
)


def stream(session: int, first: float, gap: float, tokens: int) -> SessionResult:
    return SessionResult(
        arm="pairs", workload="decode", session=session, request_id=f"r{session}",
        start_s=0.0, first_token_s=first, last_token_s=first + gap * (tokens - 1),
        end_s=first + gap * (tokens - 1), itl_s=[gap] * (tokens - 1), completion_tokens=tokens,
        text="x" * tokens, chunk_ends=list(range(1, tokens + 1)),
    )


def test_the_window_is_where_every_stream_decodes() -> None:
    # Four streams, 0.1 s apart at their start, 20 ms a token: the window opens at the last
    # first token (0.3 s) and closes at the first last token (0.0 + 0.02 * 39 = 0.78 s).
    sample = rate_sample([stream(i, 0.1 * i, 0.02, 40) for i in range(4)], 4)
    assert sample.window == "all_decoding"
    assert sample.window_s == pytest.approx(0.48)
    assert sample.tokens_per_s == pytest.approx(4 / 0.02, rel=0.05)
    assert sample.window_tokens == 23  # the last starter's tokens after its first, in the window
    # Today's figure, the union of the decode windows, includes the ramps: lower.
    assert sample.whole_tokens_per_s is not None and sample.whole_tokens_per_s < 180


def test_a_queued_sample_is_rated_over_the_whole_sample() -> None:
    # A serial server: each stream starts when the one before ends.
    streams = [stream(i, 0.01 + i * 0.4, 0.01, 40) for i in range(4)]
    sample = rate_sample(streams, 4)
    assert sample.window == "queued"
    assert sample.tokens_per_s == pytest.approx(100, rel=0.03)  # one stream's rate


def test_an_errored_or_short_sample_has_no_rate() -> None:
    assert rate_sample([stream(0, 0.1, 0.01, 10)], 2).tokens_per_s is None


@pytest.mark.parametrize("ratios", [[2.0, 2.0, 2.0], [1.9, 2.0, 2.1], [1.0, 3.0, 2.0, 2.2]])
def test_the_interval_holds_the_median_and_is_never_narrower_than_the_resolution(
    ratios: list[float],
) -> None:
    median, low, high = ratio_interval(ratios, 0.05)
    assert low <= median / 1.05 + 1e-9 and high >= median * 1.05 - 1e-9
    assert low <= min(median, high) and high >= median


def test_a_wider_spread_gives_a_wider_interval() -> None:
    _, low_a, high_a = ratio_interval([1.95, 2.0, 2.05], 0.0)
    _, low_b, high_b = ratio_interval([1.5, 2.0, 2.6], 0.0)
    assert high_b - low_b > high_a - low_a


def _pairs(speedups: list[float], when: str = "start", n: int = 16) -> PairedThroughput:
    one = RateSample(streams=1, tokens_per_s=40.0, window_s=1.0, window_tokens=20)
    pairs = [ThroughputPair(one=one, many=RateSample(streams=n, tokens_per_s=40.0 * s,
                                                     window_s=2.0, window_tokens=20),
                            counted=True, speedup=s) for s in speedups]
    return PairedThroughput(
        n=n, when=when, max_tokens=30, one_max_tokens=34, window_tokens=16, pairs=pairs,  # type: ignore[arg-type]
        interval=interval(pairs, 0.05),
        load=CpuLoad(cores=2, busy=1.9, client=0.2, engine=1.6, other=0.1, steal=0.0),
    )


@pytest.mark.parametrize(
    ("speedups", "decision"),
    [([2.1, 2.2, 2.0], True), ([1.0, 1.02, 0.98], False), ([1.45, 1.55, 1.5], None),
     ([1.2, 2.4, 1.7], None)],
)
def test_yes_no_or_undecided_from_the_interval(speedups: list[float], decision: bool | None) -> None:
    pairs = _pairs(speedups)
    env = envelope(None, [], [], [pairs])
    found = paired_parallel(pairs, env, Thresholds())
    assert found.parallel is decision, found.why
    if decision is None:
        assert "parallel not decided" in found.why and "1.90 of 2 cores busy" in found.why
        assert "steal" in found.why and "this client 0.20" in found.why


def test_a_drop_beyond_the_interval_is_a_soft_finding_and_noise_is_not() -> None:
    t = Thresholds()
    start = _pairs([2.1, 2.2, 2.0])
    dropped = envelope(None, [], [], [start, _pairs([1.1, 1.0, 1.05], "after")])
    (finding,) = history(dropped, t)
    assert finding.kind is FindingKind.THROUGHPUT_DROP and finding.severity == "soft"
    assert "2.10x" in finding.message and "1.05x" in finding.message
    same = envelope(None, [], [], [start, _pairs([2.0, 2.15, 2.05], "after")])
    assert history(same, t) == []


def _verdict_report(speedup: float, low: float, high: float) -> Report:
    return Report(
        run_id="r", started_at="", config=RunConfig(base_url="http://127.0.0.1:1"),
        environment=Environment(batchprobe_version="0", python="3", platform="p"),
        verdict=Verdict(speedup=speedup, speedup_low=low, speedup_high=high, speedup_n=16),
    )


def test_the_gate_compares_intervals(tmp_path: Path) -> None:
    ref = _verdict_report(2.1, 1.9, 2.3)
    assert _pairs_findings(ref, _verdict_report(1.8, 1.6, 2.0), "b") == []  # they overlap
    (reg,) = _pairs_findings(ref, _verdict_report(1.1, 1.0, 1.2), "b")
    assert reg.check == "run.speedup" and "do not overlap" in reg.message


def test_the_interval_is_a_t_interval_over_the_log_speedups() -> None:
    # logs of 2.0, 2.1, 2.2: mean ln 2.0976, sd 0.0476; t(2) = 4.303: half-width 0.118.
    pairs = _pairs([2.1, 2.2, 2.0])
    assert isinstance(pairs.interval, SpeedupInterval)
    assert pairs.interval.describe() == "2.10x (CI 1.86-2.36x over 3 pairs)"
