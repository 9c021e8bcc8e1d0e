"""The probe end to end against the fake server, in each of its modes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from batchprobe.client.types import ErrorKind
from batchprobe.fake import FakeServerConfig
from batchprobe.results import ArmSpec, Outcome, Report, Status
from batchprobe.workload.decode import count_owner

from .fakeprobe import SESSIONS, probe, probe_process
from .judgeprobe import default_run


def fast(**kw: object) -> FakeServerConfig:
    base: dict[str, object] = {"ttft_ms": 5.0, "itl_ms": 4.0}
    base.update(kw)
    return FakeServerConfig(**base)  # type: ignore[arg-type]


def concurrent_arm(report: Report):  # type: ignore[no-untyped-def]
    return report.arms[1]


def test_batching_fake_passes_with_measured_speedup(tmp_path: Path) -> None:
    report = probe(tmp_path, fast(batching="continuous", slowdown=0.05))
    assert report.status is Status.OK
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    comp = report.comparisons[0]
    assert comp.decode_speedup is not None and comp.decode_speedup > 2.5
    assert comp.greedy_match_rate == 1.0
    assert report.arms[0].metrics is not None and report.arms[0].metrics.recall == 1.0
    assert report.environment.served_model == "fake-model"


def test_serial_fake_is_not_parallel(tmp_path: Path) -> None:
    report = probe(tmp_path, fast(batching="serial"))
    assert report.verdict.parallel is False
    assert report.verdict.correct is True
    assert report.verdict.outcome is Outcome.FAIL
    assert report.comparisons[0].decode_speedup is not None
    assert report.comparisons[0].decode_speedup < 1.3


def test_cross_talk_names_its_source_session(tmp_path: Path) -> None:
    report = probe(tmp_path, fast(fault="cross_talk", fault_when="concurrent"))
    assert report.verdict.correct is False
    leaked = [s for s in concurrent_arm(report).sessions if s.cross_talk_from]
    assert leaked
    codes = {s.session: s.expected_code for s in report.arms[0].sessions if s.workload == "recall"}
    for s in leaked:
        assert s.session not in s.cross_talk_from
        if s.workload == "recall":
            assert any(codes[src] in s.text for src in s.cross_talk_from)
        else:
            # A decode leak names its source too: the source's count numbers are in it.
            owners = {count_owner(int(n)) for n in re.findall(r"\d{4,}", s.text)}
            assert set(s.cross_talk_from) <= owners
    assert any("cross-talk" in r for r in report.verdict.reasons)


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("finish_error", ErrorKind.FINISH_REASON_ERROR),
        ("http_500", ErrorKind.HTTP_STATUS),
        ("busy_503", ErrorKind.HTTP_STATUS),
    ],
)
def test_errors_only_under_concurrency_fail_correctness(
    tmp_path: Path, fault: str, kind: ErrorKind
) -> None:
    report = probe(tmp_path, fast(fault=fault, fault_when="concurrent"))
    serial, conc = report.arms[0].metrics, concurrent_arm(report).metrics
    assert serial is not None and conc is not None
    assert serial.errors_by_kind == {}
    assert conc.errors_by_kind.get(kind, 0) > 0
    assert report.verdict.correct is False and report.verdict.outcome is Outcome.FAIL
    assert any(kind.value in r for r in report.verdict.reasons)
    # A URL has no log to read, but a known engine's error body is still recognised.
    busy = [d for d in report.diagnoses if d.issue_id == "vllm-mlx-simple-busy-503"]
    assert bool(busy) == (fault == "busy_503")
    assert all(not d.is_bug for d in busy)


def test_token_corruption_under_batching(tmp_path: Path) -> None:
    report = probe(tmp_path, fast(fault="corrupt", fault_when="concurrent"))
    comp = report.comparisons[0]
    assert report.verdict.correct is False
    assert comp.recall_delta is not None and comp.recall_delta < 0
    assert comp.greedy_match_rate is not None and comp.greedy_match_rate < 1.0
    assert comp.divergences and comp.divergences[0].baseline != comp.divergences[0].arm


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("malformed_sse", ErrorKind.MALFORMED_STREAM),
        ("truncated_stream", ErrorKind.DISCONNECTED),
    ],
)
def test_broken_streams_are_classified(tmp_path: Path, fault: str, kind: ErrorKind) -> None:
    report = probe(tmp_path, fast(fault=fault, fault_when="concurrent"))
    conc = concurrent_arm(report).metrics
    assert conc is not None and conc.errors_by_kind.get(kind, 0) > 0
    assert report.verdict.correct is False


def test_hang_times_out_and_is_an_error(tmp_path: Path) -> None:
    report = probe(
        tmp_path, fast(fault="hang", fault_when="concurrent"), request_timeout_s=1.0,
        shapes=["burst"],
    )
    conc = concurrent_arm(report).metrics
    assert conc is not None
    assert conc.errors_by_kind.get(ErrorKind.TOTAL_TIMEOUT, 0) == conc.sessions
    assert report.verdict.correct is False


def test_server_exit_is_reported(tmp_path: Path) -> None:
    # warm-up, calibration, the chat and streaming probes and the serial arm use the first
    # requests; the server dies in arm 2.
    report = probe(
        tmp_path, fast(fault="exit_after", exit_after=4 + 2 * SESSIONS + 2), shapes=["burst"]
    )
    assert report.status is Status.ENGINE_DIED
    assert report.verdict.correct is False and report.verdict.outcome is Outcome.FAIL
    assert concurrent_arm(report).server_alive_after is False


def test_buffered_stream_falls_back_to_end_to_end_timing(tmp_path: Path) -> None:
    report = probe(tmp_path, fast(fault="buffered", itl_ms=10.0))
    decode = [s for s in report.arms[0].sessions if s.workload == "decode" and s.shape == "burst"]
    assert decode and all(s.buffered for s in decode)
    m = report.arms[0].metrics
    assert m is not None and m.buffered_sessions >= len(decode)
    join = next(s for s in report.shapes if s.shape == "join")
    assert not join.ran and join.reason and "stream" in join.reason
    assert m.decode_tokens_per_s is not None and m.decode_tokens_per_s < 200
    assert any("buffered" in w for w in report.warnings)


def test_prefix_cache_is_off_per_request_except_for_the_repeat_wave(tmp_path: Path) -> None:
    report = probe(tmp_path, fast(prefix_cache=True))
    assert report.environment.server_kind == "llama.cpp"
    for arm in report.arms:
        cold = [s for s in arm.sessions if s.situation and not s.situation.prefix_cache]
        assert cold and not any(s.cached_tokens for s in cold), arm.spec.name
    waves = {w.shape: w for w in report.arms[1].waves}
    assert waves["repeat"].prefix_cache.startswith("on (cache_prompt true")
    assert waves["repeat"].cached_prompt_tokens, "the twins were answered from the cache"
    assert all(w.prefix_cache.startswith("off") for w in report.arms[0].waves)
    assert any("wave repeat ran with the prefix cache" in r for r in report.verdict.reasons)
    assert not any("cached prompt tokens" in w for w in report.warnings)


def test_timing_ground_truth_at_eight_streams(tmp_path: Path) -> None:
    # The server in its own process: an in-process one would share the GIL with the client,
    # and the figure would measure the test harness. One arm of eight and the burst alone: the
    # clock is the subject. Delays long against a loaded machine's scheduling (the quick loop
    # runs four workers on two cores), so 10% is the client's error, not the neighbours'.
    ttft, itl = 0.400, 0.100
    report = probe_process(
        tmp_path,
        ["--ttft-ms", str(ttft * 1000), "--itl-ms", str(itl * 1000)],
        sessions=8,
        arms=[ArmSpec(name="eight", concurrency=8)],
        workloads=["decode"],
        shapes=["burst"],
        max_tokens=8,
    )
    m = report.arms[0].metrics
    assert m is not None and m.ttft_s is not None and m.itl_s is not None
    assert m.sessions == 8 and m.ok_sessions == 8
    assert m.ttft_s.p50 == pytest.approx(ttft, rel=0.10)
    assert m.itl_s.p50 == pytest.approx(itl, rel=0.10)


def test_logprobs_are_recorded_and_compared(tmp_path: Path) -> None:
    report = probe(tmp_path, fast(), logprobs=True)
    decode = [s for s in report.arms[1].sessions if s.workload == "decode"]
    assert decode and all(s.logprobs and len(s.logprobs) == len(s.pieces) for s in decode)
    assert report.comparisons[0].max_logprob_delta == 0.0


def test_a_server_that_stops_generating_ends_the_run_at_its_first_timeout(
    tmp_path: Path,
) -> None:
    # It stalls in the serial arm and its HTTP front stays up (a dead worker thread, as
    # mlx-lm's): without the liveness check after the first timeout, each of the arm's later
    # requests, and every later arm's, would wait out its own timeout.
    report = probe(
        tmp_path, fast(fault="stall", exit_after=6), request_timeout_s=2.0,
        liveness_timeout_s=1.0, shapes=["burst"],
    )  # fmt: skip
    assert report.status is Status.ENGINE_DIED
    assert report.error is not None and "stopped generating during arm serial" in (
        report.error.message
    )
    serial = report.arms[0]
    errored = [s for s in serial.sessions if s.error is not None]
    assert [s.error.kind for s in errored if s.error] == [ErrorKind.TOTAL_TIMEOUT]
    assert serial.sessions[-1] is errored[0]  # nothing was sent after it
    assert len(serial.sessions) < 2 * SESSIONS  # the burst's items were not all sent
    assert serial.server_alive_after is False and serial.state == "failed"
    assert len(report.arms) == 1 or report.arms[1].sessions == []
    assert report.verdict.correct is False and report.verdict.outcome is Outcome.FAIL


def test_a_server_that_stops_generating_while_asked_what_it_supports_ends_the_run(
    tmp_path: Path,
) -> None:
    # The default plan; the server stops generating after discovery's second request
    # (mlx-lm 0.31.1 with a sliding-window model dies on discovery's own re-sent prompts).
    # Without the liveness check after a discovery request's timeout, each later question
    # would wait out its own, then the run would go on into a dead server.
    report, _ = default_run(tmp_path, "stall", {"request_timeout_s": 2.0,
                                                "liveness_timeout_s": 1.0},
                            fault="stall", exit_after=2)
    assert report.status is Status.ENGINE_DIED, report.error
    assert report.error is not None
    assert "while batchprobe asked what it supports" in report.error.message
    assert "ended with total_timeout" in report.error.message
    assert not any(a.sessions for a in report.arms)  # no measured request was sent
    assert report.verdict.outcome is not Outcome.PASS
