"""What a sweep costs batchprobe itself, per step up to 1,024 sessions (a benchmark, not a test).

Starts ``batchprobe fake-server`` in zero-latency mode (no TTFT, no ITL, a batch cap of
1,024) in its own process and runs a whole sweep against it through the library entry point
(``plan_run`` + ``run_plan``): the serial baseline, then one mixed wave per depth. A listener
marks each step's start and end; a sampling thread reads this process's RSS. For each step
it prints batchprobe's CPU time per 1,000 streamed tokens (``time.process_time``: the
client, the shapes, the judging and the verdict writes) and the process's peak RSS during
the step, each as a ratio to the 1-session step of the same run.

A zero-latency fake writes each reply at once, so its streams read as buffered and the
join shape (set off by stream progress) sits the run out; every other shape runs.

Targets (issue 10): RSS <= 200 MB at 1,024 sessions; CPU per token flat within 1.5x.

    python benchmarks/sweep_overhead.py [--max-depth 1024] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from batchprobe.fake import FakeServerProcess
from batchprobe.probe import plan_run, run_plan
from batchprobe.probe.sweep import doubling
from batchprobe.results import ArmResult, SessionResult

_PAGE = os.sysconf("SC_PAGE_SIZE")
_MB = 1024 * 1024


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / _MB


@dataclass
class Step:
    name: str
    depth: int
    cpu_s: float = 0.0
    tokens: int = 0
    peak_mb: float = 0.0
    wall_s: float = 0.0


class Meter:
    """A ProbeListener that times each arm (the baseline and every step) in CPU and RSS."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self._cpu0 = self._wall0 = 0.0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            if self.steps:
                self.steps[-1].peak_mb = max(self.steps[-1].peak_mb, rss_mb())

    def arm_started(self, arm: ArmResult, total: int) -> None:
        self.steps.append(Step(arm.spec.name, arm.spec.concurrency, peak_mb=rss_mb()))
        self._cpu0, self._wall0 = time.process_time(), time.perf_counter()

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        pass

    def arm_finished(self, arm: ArmResult) -> None:
        step = self.steps[-1]
        step.cpu_s = time.process_time() - self._cpu0
        step.wall_s = time.perf_counter() - self._wall0
        step.tokens = sum(len(s.chunk_ends) for s in arm.sessions)

    def close(self) -> None:
        self._stop.set()
        self._sampler.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-depth", type=int, default=1024)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--haystack-tokens", type=int, default=200)
    args = parser.parse_args()
    depths = doubling(args.max_depth)
    fake_args = ["--ttft-ms", "0", "--itl-ms", "0", "--batch-cap", str(args.max_depth)]
    meter = Meter()
    with FakeServerProcess(*fake_args) as fake, tempfile.TemporaryDirectory() as tmp:
        plan = plan_run(
            base_url=fake.base_url,
            sweep=depths,
            sessions=8,
            haystack_tokens=args.haystack_tokens,
            max_tokens=args.max_tokens,
            output=Path(tmp) / "verdict.json",
        )
        started = time.perf_counter()
        report = run_plan(plan, meter)
        total = time.perf_counter() - started
    meter.close()
    steps = [s for s in meter.steps if s.name.startswith("sweep@")]
    one = next(s for s in steps if s.depth == 1)
    ref_cpu = one.cpu_s / one.tokens * 1e6
    print(f"sweep 1..{args.max_depth} against a zero-latency fake: {total:.1f}s, "
          f"verdict {report.verdict.outcome.value}, status {report.status.value}")  # fmt: skip
    print(f"reference (1 session): {ref_cpu:.2f} ms CPU per 1k tokens, peak RSS {one.peak_mb:.0f} MB")
    print("| sessions | tokens | CPU ms / 1k tok | ratio | peak RSS MB | ratio | wall s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for s in steps:
        cpu = s.cpu_s / s.tokens * 1e6 if s.tokens else float("nan")
        print(f"| {s.depth} | {s.tokens} | {cpu:.2f} | {cpu / ref_cpu:.2f} | {s.peak_mb:.0f} | "
              f"{s.peak_mb / one.peak_mb:.2f} | {s.wall_s:.2f} |")  # fmt: skip
    deepest = steps[-1]
    cpu_ratio = max(s.cpu_s / s.tokens * 1e6 / ref_cpu for s in steps if s.tokens)
    print(f"targets: RSS at {deepest.depth} <= 200 MB: {deepest.peak_mb:.0f} MB "
          f"({'met' if deepest.peak_mb <= 200 else 'MISSED'}); CPU per token within 1.5x: "
          f"worst {cpu_ratio:.2f}x ({'met' if cpu_ratio <= 1.5 else 'MISSED'})")  # fmt: skip


if __name__ == "__main__":
    main()
