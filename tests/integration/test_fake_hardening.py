"""The probe against a hostile fake server: dropped requests, runaway streams, huge events.

Each must end in a FAIL naming the fault, with bounded memory and a small verdict file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from batchprobe.client.types import ErrorKind
from batchprobe.fake import FakeServerProcess
from batchprobe.results import Outcome

from .fakeprobe import SESSIONS, probe
from .test_fake_probe import concurrent_arm, fast

# A run whose client bounds every reply stays near batchprobe's own footprint (~100 MiB
# here); an unbounded one reached 4.2 GB in 10 s on the runaway fault.
MAX_RSS_MIB = 250
MAX_VERDICT_BYTES = 3 * 1024 * 1024


def test_requests_dropped_after_reading_fail_as_disconnected(tmp_path: Path) -> None:
    # A TTFT long enough that every request of a burst arrives before the first is dropped.
    report = probe(
        tmp_path,
        fast(fault="drop_after_read", fault_when="concurrent", ttft_ms=300.0),
        shapes=["burst"],
    )
    serial, conc = report.arms[0], concurrent_arm(report)
    assert serial.metrics is not None and serial.metrics.errors_by_kind == {}
    assert conc.metrics is not None
    # Every error is a drop; under heavy load a request may miss the overlap and be spared.
    assert set(conc.metrics.errors_by_kind) == {ErrorKind.DISCONNECTED}
    assert conc.metrics.errors_by_kind[ErrorKind.DISCONNECTED] >= SESSIONS
    assert report.verdict.correct is False and report.verdict.outcome is Outcome.FAIL
    assert any("disconnected" in reason for reason in report.verdict.reasons)


def test_ignored_max_tokens_is_exceeded_max_tokens_and_a_failure(tmp_path: Path) -> None:
    report = probe(
        tmp_path, fast(fault="ignore_max_tokens", itl_ms=0.0), max_tokens=24, shapes=["burst"]
    )
    for arm in report.arms:
        assert arm.metrics is not None
        assert arm.metrics.errors_by_kind.get(ErrorKind.EXCEEDED_MAX_TOKENS, 0) > 0
        decode = [s for s in arm.sessions if s.workload == "decode"]
        # Read no further than max_tokens plus the slack: 24 + 8 + 24 // 8 events, and one more.
        assert decode and all(len(s.chunk_ends) == 36 for s in decode)
    assert report.verdict.outcome is Outcome.FAIL
    assert any("exceeded_max_tokens" in reason for reason in report.verdict.reasons)
    assert (tmp_path / "verdict.json").stat().st_size < MAX_VERDICT_BYTES


def test_one_huge_event_is_an_oversized_malformed_stream(tmp_path: Path) -> None:
    started = time.monotonic()
    report = probe(tmp_path, fast(fault="huge_event", fault_when="concurrent"))
    elapsed = time.monotonic() - started
    conc = concurrent_arm(report)
    assert conc.metrics is not None
    assert set(conc.metrics.errors_by_kind) == {ErrorKind.MALFORMED_STREAM}
    failed = [s for s in conc.sessions if s.error is not None]
    assert len(failed) >= SESSIONS and all("oversized" in s.error.message for s in failed)
    assert report.verdict.outcome is Outcome.FAIL
    # 8 streams of 50 MB each would take far longer to read, let alone quadratically.
    assert elapsed < 30, elapsed
    assert (tmp_path / "verdict.json").stat().st_size < MAX_VERDICT_BYTES


def _high_water_kib(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next((x for x in status.splitlines() if x.startswith("VmHWM:")), None)
    return None if line is None else int(line.split()[1])


def _probe_subprocess(base_url: str, out: Path) -> tuple[int, int]:
    """Run ``batchprobe run`` as its own process; (exit code, peak RSS in KiB).

    The peak is VmHWM, polled: it starts afresh at exec, where the child's ru_maxrss would
    include the pytest process it was forked from.
    """
    argv = [
        sys.executable, "-m", "batchprobe", "run", "--quick", "--base-url", base_url,
        "--output", str(out), "--sessions", "8", "--haystack-tokens", "200", "--max-tokens", "128", "--shapes", "burst",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _high_water_kib(proc.pid) or 0)
        time.sleep(0.05)
    return proc.returncode, peak


def test_runaway_server_costs_bounded_memory_and_a_small_verdict(tmp_path: Path) -> None:
    out = tmp_path / "verdict.json"
    with FakeServerProcess(
        "--fault", "ignore_max_tokens", "--ttft-ms", "1", "--itl-ms", "0"
    ) as fake:
        code, rss_kib = _probe_subprocess(fake.base_url, out)
    verdict = json.loads(out.read_text())
    assert code == 1 and verdict["verdict"]["outcome"] == "FAIL"
    assert verdict["arms"][1]["metrics"]["errors_by_kind"]["exceeded_max_tokens"] == 16
    assert out.stat().st_size < MAX_VERDICT_BYTES
    assert rss_kib < MAX_RSS_MIB * 1024, f"peak RSS {rss_kib / 1024:.0f} MiB"
