"""``parallel`` from paired, interleaved throughput samples, through the default plan.

The fake runs in its own process (its token schedule is absolute: a late token does not make
the next one late), so the client's and the workers' load moves timestamps, not rates. Each
decision is asked for five times: a figure that flips between runs fails one of them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchprobe.fake import FakeServerProcess
from batchprobe.probe import plan_run, run_plan
from batchprobe.results import Outcome, Report, read_report
from batchprobe.results.findings import FindingKind

RUNS = range(5)
# Quick tokens: the default plan's five depths in about half a minute. A serial server
# decodes every token of the plan one after another, so it gets quicker ones.
CONTINUOUS = ["--ttft-ms", "20", "--itl-ms", "4"]
SERIAL = ["--batching", "serial", "--ttft-ms", "10", "--itl-ms", "2"]
# At N=4 each token takes itl * (1 + 3 * 5/9) = itl * 8/3: 4 streams give 1.5x, the default
# threshold, exactly; 2 ms of jitter on 10 ms tokens.
AT_THRESHOLD = ["--slowdown", "0.5555556", "--itl-ms", "10", "--ttft-ms", "20", "--jitter-ms", "2"]


def run(tmp_path: Path, fake_args: list[str], **settings: object) -> Report:
    output = tmp_path / "verdict.json"
    with FakeServerProcess(*fake_args) as server:
        plan = plan_run(base_url=server.base_url, output=output, **settings)  # type: ignore[arg-type]
        report = run_plan(plan)
    assert read_report(output) == report, "the file on disk is the final report"
    return report


def _start(report: Report) -> tuple[float, float, float]:
    env = report.envelope
    assert env is not None
    pairs = next(p for p in env.throughput if p.when == "start")
    assert pairs.interval is not None, pairs.note
    assert len([p for p in pairs.pairs if p.counted]) >= 3
    return pairs.interval.median, pairs.interval.low, pairs.interval.high


@pytest.mark.parametrize("attempt", RUNS)
def test_a_serial_server_is_not_parallel_in_every_run(tmp_path: Path, attempt: int) -> None:
    report = run(tmp_path, SERIAL)
    median, low, high = _start(report)
    assert 0.85 < median < 1.15 and high < 1.5, (median, low, high)
    v = report.verdict
    assert v.parallel is False and v.outcome is Outcome.FAIL, v.reasons
    assert (v.speedup, v.speedup_low, v.speedup_high, v.speedup_n) == (median, low, high, 16)
    assert "the whole interval below the 1.50x threshold" in v.parallel_reason
    # Queued one behind another: rated over the whole sample.
    env = report.envelope
    assert env is not None
    assert all(p.many.window == "queued" for p in env.throughput[0].pairs)


@pytest.mark.parametrize("attempt", RUNS)
def test_continuous_batching_is_parallel_in_every_run(tmp_path: Path, attempt: int) -> None:
    report = run(tmp_path, CONTINUOUS)
    median, low, high = _start(report)
    assert low >= 1.5 and median > 8, (median, low, high)
    v = report.verdict
    assert v.parallel is True and v.outcome is Outcome.PASS, v.reasons
    assert "the interval clears the 1.50x threshold" in v.parallel_reason
    env = report.envelope
    assert env is not None and env.step(16) is not None
    assert env.step(16).paired_speedup == env.throughput[0].interval  # type: ignore[union-attr]
    # Measured again after the mixed waves: the same server, no drop, no finding.
    assert [p.when for p in env.throughput] == ["start", "after"]
    assert not [f for f in report.findings if f.kind is FindingKind.THROUGHPUT_DROP]


def _at_threshold(tmp_path: Path) -> Report:
    report = run(tmp_path, AT_THRESHOLD, sweep="1,4")
    median, low, high = _start(report)
    assert low < 1.5 <= high, (median, low, high)
    v = report.verdict
    assert v.parallel is None and v.outcome is Outcome.INCONCLUSIVE, v.reasons
    assert v.correct is True
    assert "parallel not decided" in v.parallel_reason
    assert "holds the 1.50x threshold" in v.parallel_reason
    assert "cores busy" in v.parallel_reason and "steal" in v.parallel_reason
    env = report.envelope
    assert env is not None
    # It straddled the threshold, so the run took pairs past the minimum, up to --max-pairs.
    assert sum(p.counted for p in env.throughput[0].pairs) == 8
    return report


@pytest.mark.parametrize("attempt", RUNS)
def test_a_gain_at_the_threshold_is_inconclusive_in_every_run(
    tmp_path: Path, attempt: int
) -> None:
    _at_threshold(tmp_path)


@pytest.fixture
def cpu_hog() -> Iterator[None]:
    """Two processes that spin for the test's length: the machine's cores, taken."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.serial  # the hog takes the cores: alone, so that it is the load the verdict names
@pytest.mark.parametrize("attempt", range(2))
def test_a_gain_at_the_threshold_beside_a_cpu_hog_is_inconclusive_and_names_the_load(
    tmp_path: Path, cpu_hog: None, attempt: int
) -> None:
    report = _at_threshold(tmp_path)
    env = report.envelope
    assert env is not None and env.throughput[0].load is not None
    load = env.throughput[0].load
    assert load.other >= 1.0, load  # the hogs, named as other processes' cores
    assert f"other processes {load.other:.2f}" in report.verdict.parallel_reason


def test_a_server_slowed_by_its_history_gives_the_history_finding(tmp_path: Path) -> None:
    # About 60 requests (warm-up, discovery and the first pairs) come before the sweep's
    # steps; after 120 the fake gains nothing from batching any more.
    report = run(tmp_path, [*CONTINUOUS, "--degrade-after", "120"])
    env = report.envelope
    assert env is not None
    start, after = env.throughput
    assert start.interval is not None and after.interval is not None
    assert after.interval.high < start.interval.low, (start.interval, after.interval)
    drops = [f for f in report.findings if f.kind is FindingKind.THROUGHPUT_DROP]
    assert len(drops) == 1 and drops[0].severity == "soft"
    assert start.interval.describe() in drops[0].message
    assert after.interval.describe() in drops[0].message
    v = report.verdict
    # Parallel rests on the engine as it started; the drop is named beside the verdict.
    assert v.parallel is True and v.outcome is Outcome.PASS, v.reasons
    assert any(r.startswith("soft: ") and "throughput dropped" in r for r in v.reasons)


def test_a_buffering_server_gives_no_window_and_no_parallel_decision(tmp_path: Path) -> None:
    # Every reply in one write: two pairs, the second of twice the tokens, both buffered.
    report = run(tmp_path, [*CONTINUOUS, "--fault", "buffered"], sweep="1,4")
    env = report.envelope
    assert env is not None
    start = env.throughput[0]
    assert start.interval is None and start.pairs == []
    assert start.note is not None and "buffered" in start.note
    v = report.verdict
    assert v.parallel is None and v.outcome is Outcome.INCONCLUSIVE, v.reasons
    assert "buffered" in v.parallel_reason
