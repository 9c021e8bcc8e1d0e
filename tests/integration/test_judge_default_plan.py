"""The judge through the default plan (no run options): each class of bug a faulty fake server
injects gives ``correct: false`` with the right sessions named, and every output says so;
every healthy mode of the fake is PASS."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.results import Outcome, Report
from batchprobe.results.findings import FindingKind

from .judgeprobe import assert_every_output_fails, default_run


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("judge")


@pytest.fixture(scope="module")
def clean(folder: Path) -> Path:
    report, path = default_run(folder, "clean")
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    return path


def _hard(report: Report) -> set[tuple[str | None, FindingKind]]:
    return {(f.shape, f.kind) for f in report.findings if f.hard}


@pytest.mark.parametrize("mode", [
    {},
    {"prefix_cache": True},
    {"jitter_ms": 1.0, "seed": 3},
    {"batch_cap": 4},
], ids=["continuous", "prefix-cache", "jitter", "batch-cap"])
def test_every_healthy_mode_of_the_fake_passes(folder: Path, mode: dict[str, object]) -> None:
    report, _ = default_run(folder, "healthy-" + "-".join(map(str, mode)) or "plain", **mode)
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    assert report.verdict.correct is True and report.verdict.parallel is True
    assert not [f for f in report.findings if f.severity != "info"], report.findings
    assert "every self-check held" in report.verdict.reasons[0]
    # Every step is judged, on every shape it carries.
    assert report.envelope is not None
    assert all(s.correct is True for s in report.envelope.steps)
    judged_shapes = {j.shape for j in report.judged if j.judged and j.step and j.step > 1}
    assert {"burst", "join", "ragged", "early", "repeat", "params"} <= judged_shapes


def test_a_fault_above_the_slo_depth_is_not_claimed_correct_beyond_it(
    folder: Path, clean: Path
) -> None:
    # Three slots: at N=4 one request waits for a slot (TTFT far above 40 ms), so the SLO
    # stops the sweep at 4; the fault above 4 in flight is never reached.
    report, _ = default_run(folder, "slo", {"slo_ttft_p99_s": 0.04}, batch_cap=3, itl_ms=4.0,
                            fault="corrupt", fault_when="above", fault_above=4)
    env = report.envelope
    assert env is not None and env.stop is not None and env.stop.rule.value == "slo"
    assert env.stop.at_n == 4 and max(s.n for s in env.steps) == 4
    v = report.verdict
    assert v.correct_up_to_n == 4 and v.correct is not False
    assert "correct up to N=4; stopped: slo at 4; not judged beyond it" in v.reasons[0]


def test_a_corrupting_server_fails_in_every_output(folder: Path, clean: Path) -> None:
    report, path = default_run(folder, "corrupt", fault="corrupt", fault_when="concurrent")
    assert report.verdict.correct is False
    assert (("burst", FindingKind.COUNT_BROKE)) in _hard(report)
    assert_every_output_fails(report, path, clean, "burst", "count")
