"""The KV-pressure wave through the default plan: a healthy fake with a pool queues and
passes; each pool bug (every running request failed, a preempted request repeating tokens, an
oversize request hanging) fails in every output; a pool too large or not stated is skipped
with its reason; ``--kv-tokens`` gives it by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.results import Outcome, read_report
from batchprobe.results.findings import FindingKind

from .judgeprobe import assert_every_output_fails, default_run

# Large enough for the default plan's regular steps, within what the wave fills.
POOL = 16384


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kv")


@pytest.fixture(scope="module")
def clean(folder: Path) -> Path:
    report, path = default_run(folder, "clean")
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    return path


def test_a_healthy_pool_queues_the_wave_and_passes(folder: Path) -> None:
    report, _ = default_run(folder, "pool", kv_tokens=POOL)
    v = report.verdict
    assert v.outcome is Outcome.PASS and v.correct is True, v.reasons
    p = report.situations.kv_pressure
    assert p is not None and report.situations.kv_not_run is None
    assert p.pool.tokens == POOL and p.pool.source.startswith("/metrics")
    # The wave asked for more than the pool, each request fitting it alone; the server
    # queued what did not fit, so the replies never held more than the pool.
    assert p.planned_tokens >= 1.25 * POOL and p.tokens_per_request < POOL
    assert p.peak_tokens is not None and 0 < p.peak_tokens <= POOL
    assert p.oversize == "refused" and p.refused == 0 and p.preemptions == 0
    arm = next(a for a in report.arms if a.spec.role == "pressure")
    assert arm.spec.concurrency == 16 and all(s.error is None for s in arm.sessions
                                              if s.situation and s.situation.role == "pressure")
    assert any(j.arm == arm.spec.name and j.check == "count" and j.judged for j in report.judged)
    assert any("KV pool of 16384 tokens" in r for r in v.reasons), v.reasons


@pytest.mark.parametrize(("fault", "check", "kind"), [
    ("pool_error", "kv_pool", FindingKind.KV_POOL),
    ("preempt_repeat", "count", FindingKind.COUNT_BROKE),
    ("oversize_hang", "kv_pool", FindingKind.KV_POOL),
])
def test_each_pool_bug_fails_the_default_run_in_every_output(
    folder: Path, clean: Path, fault: str, check: str, kind: FindingKind
) -> None:
    # An oversize request that hangs is waited for up to the request timeout.
    run = {"request_timeout_s": 10.0} if fault == "oversize_hang" else None
    report, path = default_run(folder, fault, run, fault=fault, kv_tokens=POOL)
    v = report.verdict
    assert v.outcome is Outcome.FAIL and v.correct is False, v.reasons
    mine = [f for f in report.findings if f.hard and f.shape == "pressure" and f.kind is kind]
    assert mine and all(f.sessions for f in mine), [f.message for f in report.findings if f.hard]
    # Only the pressure wave sets it off: the sweep's steps are correct.
    assert report.envelope is not None and all(s.correct for s in report.envelope.steps)
    if fault == "pool_error":
        p = report.situations.kv_pressure
        assert p is not None
        assert f"of {p.requests} running requests failed when the KV pool filled" in mine[0].message
    if fault == "oversize_hang":
        assert "larger than the KV pool" in mine[0].message and "hangs" in mine[0].message
    assert any(str(mine[0].sessions[0]) in r for r in v.reasons), v.reasons
    assert_every_output_fails(report, path, clean, "pressure", check)


def test_a_pool_too_large_to_fill_is_skipped_and_says_why(folder: Path) -> None:
    report, _ = default_run(folder, "big-pool", kv_tokens=10**6)
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    why = report.situations.kv_not_run
    assert report.situations.kv_pressure is None and why is not None
    assert "1000000 tokens" in why and "more tokens in flight than the run spends" in why
    assert not any(a.spec.role == "pressure" for a in report.arms)
    assert any("no wave filled the KV pool" in r for r in report.verdict.reasons)


def test_a_server_that_states_no_pool_is_skipped_unless_kv_tokens_gives_it(
    folder: Path, clean: Path
) -> None:
    plain = read_report(clean)
    why = plain.situations.kv_not_run
    assert plain.situations.kv_pressure is None and why is not None and "--kv-tokens" in why
    report, _ = default_run(folder, "by-hand", {"kv_tokens": 4096})
    p = report.situations.kv_pressure
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    assert p is not None and p.pool.source == "--kv-tokens" and p.pool.tokens == 4096
    assert p.planned_tokens >= 1.25 * 4096


@pytest.mark.parametrize("value", ["0", "15", "1000000001", "lots"])
def test_kv_tokens_out_of_range_is_refused_naming_it(value: str) -> None:
    result = CliRunner().invoke(main, ["run", "--base-url", "http://127.0.0.1:9",
                                       "--kv-tokens", value])
    assert result.exit_code == 2, result.output
    assert "--kv-tokens" in result.output and "Traceback" not in result.output
