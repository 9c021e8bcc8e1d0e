"""The sweep's pure decisions: its depths, the knee, the time budget's prediction, the envelope."""

from __future__ import annotations

import pytest

from batchprobe.errors import ConfigError
from batchprobe.judge.steps import envelope, knee
from batchprobe.probe.sweep import doubling, parse_sweep, predicted_s
from batchprobe.results import ArmResult, ArmSpec
from batchprobe.results.sweep import ServerLoad, SweepStep


def step(n: int, rate: float | None, correct: bool = True, **kw: object) -> SweepStep:
    return SweepStep(n=n, arm=f"sweep@{n}", references="baseline", decode_tokens_per_s=rate,
                     correct=correct, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_doubling_ends_on_its_limit() -> None:
    assert doubling(16) == [1, 2, 4, 8, 16]
    assert doubling(12) == [1, 2, 4, 8, 12]
    assert doubling(1) == [1]


def test_auto_doubles_to_max_sessions_or_four_times_sessions() -> None:
    assert parse_sweep("auto", 8, None) == ([1, 2, 4, 8, 16, 32], True)
    assert parse_sweep(" AUTO ", 8, 12) == ([1, 2, 4, 8, 12], True)
    assert parse_sweep("1, 3,9", 8, None) == ([1, 3, 9], False)


@pytest.mark.parametrize("text", ["1,two", "1,,2", "-1,2", "1.5"])
def test_a_depth_that_is_not_an_integer_names_sweep(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_sweep(text, 8, None)
    assert info.value.field == "sweep" and "auto" in str(info.value)


def test_knee_is_the_last_growing_step_before_two_flat_ones() -> None:
    assert knee([step(1, 100), step(2, 190), step(4, 370), step(8, 380), step(16, 385)]) == 4
    # One flat step then growth again: no knee.
    assert knee([step(1, 100), step(2, 105), step(4, 300), step(8, 600)]) is None
    # A dip then growth (llama.cpp on 2 cores: 0.91, 0.86, 0.87, 1.09, 2.25x): no knee.
    assert knee([step(1, 0.91), step(2, 0.86), step(4, 0.87), step(8, 1.09), step(16, 2.25)]) is None
    # Flat from the start (a serial server): the knee is 1.
    assert knee([step(1, 100), step(2, 101), step(4, 99)]) == 1
    # Bisection steps do not count: the planned depths define growth.
    assert knee([step(1, 100), step(2, 200), step(3, 10, kind="bisect"), step(4, 400)]) is None


def test_the_next_step_is_predicted_from_the_last_ones_pace() -> None:
    last = step(4, 100, requests=20, wall_s=10.0)
    assert predicted_s(last, 40) == pytest.approx(20.0)
    assert predicted_s(last, 10) == pytest.approx(10.0), "never predicted shorter than the last"


def test_envelope_pins_the_threshold_and_reads_the_engine_cap() -> None:
    baseline = ArmResult(spec=ArmSpec(name="serial", concurrency=1))
    load = ServerLoad(source="vLLM /metrics", samples=3, running_max=4, running_mean=3.5, waiting_max=2)
    env = envelope(
        baseline,
        [step(8, 500, correct=False, reasons=["arm sweep@8, shape burst: x"], server_load=load),
         step(1, 100), step(4, 400), step(5, 450, kind="bisect"),
         step(6, 470, correct=False, kind="bisect", reasons=["arm sweep@6, shape join: y"])],
    )  # fmt: skip
    assert [s.n for s in env.steps] == [1, 4, 5, 6, 8]
    assert (env.largest_correct_n, env.first_failing_n, env.threshold_pinned) == (5, 6, True)
    assert env.failing_evidence == ["arm sweep@6, shape join: y"]
    assert (env.peak_n, env.peak_decode_tokens_per_s) == (8, 500)
    assert env.engine_cap == 4 and any("at most 4 request" in n for n in env.notes)


def test_envelope_without_a_failure_or_an_slo() -> None:
    baseline = ArmResult(spec=ArmSpec(name="serial", concurrency=1))
    env = envelope(
        baseline, [step(1, 100, within_slo=True), step(2, 150, within_slo=False), step(4, 9, within_slo=True)]
    )
    assert env.first_failing_n is None and env.largest_correct_n == 4
    assert not env.threshold_pinned and env.engine_cap is None
    assert env.largest_within_slo_n == 1, "nothing past the first breach counts"
    assert envelope(baseline, [step(1, 100)]).largest_within_slo_n is None, "no SLO given"
