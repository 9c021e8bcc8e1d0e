"""The concurrency sweep against the fake server: the correctness threshold found and pinned,
a serial server's flat envelope, a batch cap as the knee, SLOs, server-reported load.

Every step runs every shape in one wave; the fake's ``--fault-when above --fault-above K``
corrupts requests that arrive while more than K are in flight, so a correct sweep must fail
first at K+1 and the bisection must pin it there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe import plan_run, run_plan
from batchprobe.results import Outcome, Report, Status, read_report
from batchprobe.results.sweep import StopRule

TIMING: dict[str, object] = {"ttft_ms": 30.0, "itl_ms": 3.0}


def sweep(tmp_path: Path, fake: dict[str, object], **settings: object) -> Report:
    output = tmp_path / "verdict.json"
    with FakeServerThread(FakeServerConfig(**{**TIMING, **fake})) as server:  # type: ignore[arg-type]
        plan = plan_run(
            base_url=server.base_url, output=output,
            **{"sessions": 4, "haystack_tokens": 200, "max_tokens": 24, **settings},  # type: ignore[arg-type]
        )  # fmt: skip
        report = run_plan(plan)
    assert read_report(output) == report, "the file on disk is the final report"
    return report


@pytest.mark.parametrize("k", [3, 5])
def test_a_fault_above_k_in_flight_is_pinned_to_k_plus_one(tmp_path: Path, k: int) -> None:
    report = sweep(
        tmp_path, {"fault": "corrupt", "fault_when": "above", "fault_above": k}, sweep="1,2,4,8"
    )
    env = report.envelope
    assert env is not None and env.stop is not None
    assert (env.largest_correct_n, env.first_failing_n, env.threshold_pinned) == (k, k + 1, True)
    assert env.stop.rule is StopRule.INCORRECT and env.stop.at_n == k + 1
    # A corrupt answer is wrong only by its reference, sent after the sweep: every planned
    # step runs, and the bisection between the last correct and the first failing depth
    # follows on a launch of its own.
    planned = [s.n for s in env.steps if s.kind == "sweep"]
    assert planned == [1, 2, 4, 8]
    low, high = max(n for n in planned if n <= k), min(n for n in planned if n > k)
    bisected = [s.n for s in env.steps if s.kind == "bisect"]
    assert bisected and all(low < n < high for n in bisected)
    for step in env.steps:
        assert step.correct is (step.n <= k), (step.n, step.reasons)
        if step.kind == "bisect":
            assert step.references.startswith(f"references@{step.n}")
            assert report.arm(f"references@{step.n}") is not None
    assert env.failing_evidence and all(f"sweep@{k + 1}" in r for r in env.failing_evidence)
    assert report.verdict.outcome is Outcome.FAIL and report.verdict.correct is False


@pytest.mark.serial  # its speedups compare steps with a baseline sent a minute later
def test_a_serial_server_gives_a_flat_envelope_and_is_not_parallel(tmp_path: Path) -> None:
    report = sweep(tmp_path, {"batching": "serial"}, sweep="1,2,4,8")
    env = report.envelope
    assert env is not None and env.stop is not None and env.stop.rule is StopRule.PLAN_END
    assert env.largest_correct_n == 8 and env.first_failing_n is None
    speedups = [s.speedup for s in env.steps]
    assert all(x is not None and 0.7 < x < 1.3 for x in speedups), speedups
    assert env.knee_n == 1
    assert report.verdict.parallel is False and report.verdict.correct is True
    assert report.verdict.outcome is Outcome.FAIL
    # Judged on the throughput pairs at the deepest depth, never on N=1.
    assert "not parallel" in report.verdict.parallel_reason
    assert "at 8 in flight" in report.verdict.parallel_reason
    deepest = env.steps[-1]
    assert deepest.server_load is not None and deepest.server_load.running_max == 1
    assert (deepest.server_load.waiting_max or 0) >= 1 and env.engine_cap == 1


def test_a_batch_cap_is_the_knee_and_the_engine_cap(tmp_path: Path) -> None:
    # Tokens 10 ms apart: the client's own cost per token is small beside them, so four
    # streams under a cap of four show the whole 4x even on a loaded machine.
    report = sweep(tmp_path, {"batch_cap": 4, "itl_ms": 10.0}, sweep="1,2,4,8,16", max_tokens=16)
    env = report.envelope
    assert env is not None
    assert env.knee_n == 4 and env.engine_cap == 4, [(s.n, s.decode_tokens_per_s) for s in env.steps]
    for step in env.steps:
        assert step.server_load is not None and step.server_load.source == "vLLM /metrics"
        # And, for a moment, a stream its client dropped (the server notices at its next write).
        arm = next(a for a in report.arms if a.spec.name == step.arm)
        dropped = sum(s.hung_up for s in arm.sessions)
        assert min(step.n, 4) <= step.server_load.running_max <= min(step.n + dropped, 4), step
        assert step.client_overlap_max <= step.n
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    # The pairs at 16: the server runs 4 and queues the rest, so they are rated over the whole
    # sample, and show the cap's 4x.
    assert "at 16 in flight" in report.verdict.parallel_reason
    assert report.verdict.speedup is not None and 3.0 < report.verdict.speedup < 4.6
    assert all(p.many.window == "queued" for p in env.throughput[0].pairs)


def test_every_step_keeps_the_depth_it_says(tmp_path: Path) -> None:
    # Tokens 10 ms apart: each step lasts long enough for the server's load to be sampled.
    report = sweep(tmp_path, {"itl_ms": 6.0}, sweep="1,2,4,8")
    env = report.envelope
    assert env is not None and report.status is Status.OK
    assert [s.n for s in env.steps] == [1, 2, 4, 8]
    for step in env.steps:
        arm = report.arm(step.arm)
        assert arm is not None and arm.spec.role == "step" and arm.metrics is not None
        assert arm.metrics.timed_shapes == "all"
        assert step.requests >= step.n, "a step sends at least as many requests as its depth"
        # The client saw the depth reached, and the server said it ran that many (and, for a
        # moment, a stream its client dropped: the server notices at its next write, after
        # the retry 5 ms later may have arrived).
        assert step.client_overlap_max == step.n
        dropped = sum(s.hung_up for s in arm.sessions)
        load = step.server_load
        assert load is not None and step.n <= load.running_max <= step.n + dropped, (step, dropped)
        assert step.speedup is not None and step.speedup > 0.6 * step.n, (step.n, step.speedup)
    assert {s.shape for s in report.arm("sweep@1").sessions} == {"burst"}  # type: ignore[union-attr]
    # The serial baseline, sent after the sweep, answered only what the judge asked for: its
    # seeded sample (named in the envelope), each item once, alone.
    baseline = report.arms[0]
    assert baseline.spec.role == "reference" and baseline.spec.concurrency == 1
    sent = [s.session for s in baseline.sessions]
    assert len(sent) == len(set(sent)) == env.references_asked
    assert env.reference_sample and set(env.reference_sample) <= set(sent)
    stepped = {s.session for a in report.arms if a.spec.role == "step" for s in a.sessions}
    assert set(sent) <= stepped and len(sent) < len(stepped) // 4
    assert {s.shape for s in report.arm("sweep@4").sessions} == {  # type: ignore[union-attr]
        "burst", "join", "ragged", "early", "repeat", "params", "conversation", "aborts"
    }


def test_an_slo_breach_stops_the_sweep_and_bounds_the_envelope(tmp_path: Path) -> None:
    # TTFT 30 ms alone; queued behind a cap of 2, a request's TTFT grows past 0.1 s.
    report = sweep(tmp_path, {"batch_cap": 2}, sweep="1,2,4,8", slo_ttft_p99_s=0.1)
    env = report.envelope
    assert env is not None and env.stop is not None and env.stop.rule is StopRule.SLO
    breached = env.step(env.stop.at_n or 0)
    assert breached is not None and breached.within_slo is False and breached.slo_breaches
    assert "TTFT p99" in breached.slo_breaches[0]
    assert env.largest_within_slo_n is not None and env.largest_within_slo_n < breached.n
    assert [s.n for s in env.steps][-1] == breached.n, "no step after the breach"
