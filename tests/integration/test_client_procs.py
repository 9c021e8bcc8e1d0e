"""Client worker processes: the same plan gives verdicts of the same shape and outcome with
one client process and with two, in every fault mode; and a client loop that cannot keep up
says so in the verdict, where enough processes do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.fake import FAULT_MODES, FakeServerConfig
from batchprobe.fake._config import ABORT_FAULTS, TURN_FAULTS
from batchprobe.judge.compare import compare
from batchprobe.judge.steps import step_record
from batchprobe.results import ArmSpec, Report, RunConfig
from batchprobe.results.sweep import SweepStep
from batchprobe.results.thresholds import Thresholds

from .fakeprobe import SESSIONS, probe, probe_process

# 256 streams of one token per packet, each due every millisecond, from a fake in its own
# process (an in-process fake shares the client's GIL, and then floods one loop only as fast
# as that loop lets it run: a flaky test). One client loop cannot keep up: measured here a busy
# p99 of 10.4-10.8 ms (the lag judged is the loop's own CPU time, not its waits for a core).
# Over 16 processes each loop carries 16 streams: 0.5-1.7 ms. The threshold here is 5 ms, between.
# (64 streams no longer overload one loop: 1.2 ms measured.)
WIDE = 256
LAG_MS = 5.0
FLOOD_ARGS = ["--ttft-ms", "0", "--itl-ms", "1", "--batch-cap", str(WIDE)]


def _flood(tmp_path: Path, procs: int) -> Report:
    return probe_process(
        tmp_path,
        FLOOD_ARGS,
        arms=[ArmSpec(name="wide", concurrency=WIDE)],
        sessions=WIDE,
        workloads=["decode"],
        shapes=["burst"],
        max_tokens=512,
        client_procs=procs,
        thresholds=Thresholds(client_lag_ms=LAG_MS),
    )


def _step(report: Report) -> SweepStep:
    """The arm judged as a sweep step with an SLO any TTFT here breaches."""
    [arm] = report.arms
    config = RunConfig(base_url="http://127.0.0.1:1", slo_ttft_p99_s=1e-9)
    return step_record(arm, compare(arm, arm), None, ([], []), config, None, None, "sweep", "itself")


def _lag_warnings(report: Report) -> list[str]:
    return [w for w in report.warnings if "event loop lagged" in w]


def test_one_overloaded_client_process_warns_that_its_timings_are_its_own(tmp_path: Path) -> None:
    report = _flood(tmp_path, 1)
    [arm] = report.arms
    assert arm.client is not None and arm.client.procs == 1
    assert not arm.client.trusted, arm.client.loop_lag
    [warning] = _lag_warnings(report)
    assert "arm wide" in warning and "busy p99" in warning
    # A sweep takes none of its latency figures as the server's.
    step = _step(report)
    assert step.client_limited == warning
    assert step.within_slo is None and step.slo_breaches == []


def test_enough_client_processes_keep_up_and_do_not_warn(tmp_path: Path) -> None:
    report = _flood(tmp_path, 16)
    [arm] = report.arms
    assert arm.client is not None and arm.client.procs == 16
    assert [lag.role for lag in arm.client.loop_lag].count("worker") == 16
    assert arm.client.trusted, arm.client.loop_lag
    assert _lag_warnings(report) == []
    assert len(arm.sessions) == WIDE and all(s.ok for s in arm.sessions)
    step = _step(report)
    assert step.client_limited is None and step.within_slo is False


def _mode(fault: str) -> tuple[FakeServerConfig, dict[str, object]]:
    """The fake in fault mode ``fault`` (hitting concurrent requests, so the serial references
    stay clean), and the run settings that mode needs."""
    base: dict[str, object] = {"ttft_ms": 5.0, "itl_ms": 4.0, "fault": fault}
    overrides: dict[str, object] = {}
    if fault in ("exit_after", "stall"):
        base["exit_after"] = 4 + 2 * SESSIONS + 2
        overrides["shapes"] = ["burst"]
    if fault == "stall":
        overrides.update(request_timeout_s=1.0, liveness_timeout_s=1.0)
    elif fault != "none":
        base["fault_when"] = "concurrent"
    if fault in TURN_FAULTS:
        base["prefix_cache"] = True  # a conversation bug lives in a prefix cache
    if fault == "hang":
        overrides.update(request_timeout_s=1.0, shapes=["burst"])
    if fault in ABORT_FAULTS:
        # Set off by a hang-up alone: the aborts wave, its long prompt still in prefill
        # (100 ms) when the drop comes; a wedged server is found within a second or two.
        base["ttft_ms"] = 100.0
        overrides["shapes"] = ["aborts"]
        if fault == "abort_wedge":
            overrides.update(request_timeout_s=2.0, liveness_timeout_s=1.0)
    return FakeServerConfig(**base), overrides  # type: ignore[arg-type]


def _form(report: Report) -> tuple[object, ...]:
    """The verdict's form: its arms and their waves, the shapes that ran, the comparisons."""
    arms = [
        (a.spec.name, a.spec.role, a.state, [(w.shape, w.sessions, w.requests) for w in a.waves])
        for a in report.arms
    ]
    shapes = [(s.shape, s.ran) for s in report.shapes]
    return (arms, shapes, [c.arm for c in report.comparisons], report.envelope is None)


# A server that exits mid-arm drops the requests it holds (disconnected) and refuses the ones
# that come after (connect_error): where the line falls depends on how far each client process
# got, so both read as the server gone.
_GONE = {"disconnected": "server gone", "connect_error": "server gone"}


def _outcome(report: Report) -> tuple[object, ...]:
    errored = [
        (arm.spec.name,
         sorted({_GONE.get(s.error.kind.value, s.error.kind.value) for s in arm.sessions if s.error}))
        for arm in report.arms
    ]
    sessions = [
        sorted((s.shape, s.session, s.situation.copy_index if s.situation else 0) for s in arm.sessions)
        for arm in report.arms
    ]
    return (report.status, report.verdict.correct, errored, sessions)


@pytest.mark.parametrize("fault", FAULT_MODES)
def test_one_and_two_client_processes_give_the_same_verdict(tmp_path: Path, fault: str) -> None:
    fake, overrides = _mode(fault)
    one = probe(tmp_path / "one", fake, client_procs=1, **overrides)
    two = probe(tmp_path / "two", fake, client_procs=2, **overrides)
    assert _outcome(one) == _outcome(two)
    # Every arm that ran to its end says how many client processes sent it (an arm a stalled
    # server ended has no health record: hang stalls the fake).
    done = [a for a in two.arms if a.state == "done"]
    assert done and [a.client.procs for a in done if a.client] == [2] * len(done)
    assert _form(one) == _form(two)
