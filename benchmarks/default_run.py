"""What the default run costs: references on demand against a reference for every item.

Runs the default plan (no run options) twice in one sitting, first with ``references="every"``
(every item sent alone after the sweep: the reference run) and then with the default
``references="needed"`` (only what the judge asks for), and prints for each the wall time,
requests, prompt and completion tokens, the time per phase (the sweep's launch and steps, the
references, the replays and the judgement), the verdict, the serial baseline's decode rate,
and the new run's figures as ratios to the reference run's.

By default against the managed llama.cpp + Gemma 3 270M (the README's first command; built on
first use), or ``--fake`` against the healthy fake server. ``--repeat K`` runs the default
plan K more times and prints the spread of the serial throughput baseline and the speedup.

    python benchmarks/default_run.py [--fake] [--repeat 5] [--folder /tmp/bench] [--no-every]

Each run also prints what its throughput pairs took (seconds, as a share of the run) and their
intervals, as the engine started and after the mixed waves; with --repeat, the spread of the
paired medians across runs. ``--no-every`` skips the reference run (no ratios then).

Targets (issues 23 and 28, 2-core machine, quiet, engine built): llama.cpp default run <= 5 min
with the pairs counted; the healthy fake's default plan PASS; the paired medians across runs
within 20% of each other.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe import PlanSummary, plan_run, run_plan
from batchprobe.report._envelope import interval_text
from batchprobe.results import ArmResult, Report, SessionResult
from batchprobe.results.findings import FindingKind


@dataclass
class _Phases:
    """Times when each phase began (a ProbeListener that only watches the clock)."""

    started: float = field(default_factory=time.monotonic)
    marks: list[tuple[str, float]] = field(default_factory=list)

    def _mark(self, name: str) -> None:
        if not self.marks or self.marks[-1][0] != name:
            self.marks.append((name, time.monotonic()))

    def plan_ready(self, summary: PlanSummary) -> None:
        pass

    def phase(self, name: str, requests: int) -> None:
        self._mark("references" if name.startswith("references")
                   else "pairs" if name.startswith("throughput pairs") else "replays")

    def arm_started(self, arm: ArmResult, total: int) -> None:
        self._mark("references" if arm.spec.role == "reference" and arm.spec.depth is None
                   else "sweep")

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        pass

    def arm_finished(self, arm: ArmResult, findings: Any, awaiting: int) -> None:
        pass

    def judged(self, report: Report) -> None:
        self._mark("end")

    def spans(self) -> dict[str, float]:
        out: dict[str, float] = {"launch": self.marks[0][1] - self.started if self.marks else 0.0}
        for (name, at), (_, until) in zip(self.marks, self.marks[1:]):
            out[name] = out.get(name, 0.0) + until - at
        return out


@dataclass
class _Figures:
    wall_s: float
    requests: int
    prompt_tokens: int
    completion_tokens: int
    phases: dict[str, float]
    outcome: str
    baseline_decode: float | None
    speedup: float | None
    references: int
    flips: int
    """Answers that were wrong once, but right when replayed (soft)."""
    greedy_differ: int
    """Greedy answers that differ from the serial reference's (soft numerics)."""
    not_judged: int
    """Answers the judge could not call right or wrong (their references failed alone too)."""
    pairs_s: float
    """What the throughput pairs took, both measurements."""
    pairs: list[str]
    """Each measurement's interval: ``start 2.02x [1.73-2.46]``."""
    paired_median: float | None


def _sessions(report: Report) -> Iterator[SessionResult]:
    for arm in report.arms:
        yield from arm.sessions
        yield from arm.replays
        yield from arm.serial_replays


def _figures(report: Report, wall: float, phases: _Phases) -> _Figures:
    sent = list(_sessions(report))
    base = report.arms[0].metrics if report.arms else None
    env = report.envelope
    return _Figures(
        wall_s=wall,
        requests=len(sent),
        prompt_tokens=sum(s.prompt_tokens or 0 for s in sent),
        completion_tokens=sum(s.completion_tokens or 0 for s in sent),
        phases=phases.spans(),
        outcome=report.verdict.outcome.value,
        baseline_decode=base.decode_tokens_per_s if base else None,
        speedup=report.verdict.speedup,
        references=len(report.arms[0].sessions) if report.arms else 0,
        flips=_count(report, FindingKind.FLIP),
        greedy_differ=_count(report, FindingKind.GREEDY_DIVERGENCE),
        not_judged=_count(report, FindingKind.NOT_JUDGED),
        pairs_s=sum(p.wall_s for p in env.throughput) if env else 0.0,
        pairs=[f"{p.when} {interval_text(p.interval)}" for p in env.throughput] if env else [],
        paired_median=report.verdict.speedup if report.verdict.speedup_low is not None else None,
    )


def _count(report: Report, kind: FindingKind) -> int:
    return sum(len(f.sessions) for f in report.findings if f.kind is kind)


@contextmanager
def _target(fake: bool) -> Iterator[str | None]:
    if not fake:
        yield None
        return
    with FakeServerThread(FakeServerConfig(ttft_ms=20.0, itl_ms=5.0, batch_cap=1024)) as server:
        yield server.base_url


def _one(folder: Path, name: str, base_url: str | None, references: str) -> _Figures:
    phases = _Phases()
    started = time.monotonic()
    report = run_plan(
        plan_run(base_url=base_url, output=folder / f"{name}.json", references=references),
        phases,
    )
    return _figures(report, time.monotonic() - started, phases)


def _line(name: str, f: _Figures, ref: _Figures | None) -> str:
    def ratio(a: float, b: float) -> str:
        return f" ({a / b:.2f}x)" if ref is not None and b else ""

    phases = ", ".join(f"{k} {v:.0f}s" for k, v in f.phases.items())
    return (
        f"{name:>8}: {f.outcome:<12} wall {f.wall_s:6.1f}s{ratio(f.wall_s, ref.wall_s if ref else 0)}"
        f"  requests {f.requests}{ratio(f.requests, ref.requests if ref else 0)}"
        f"  references {f.references}"
        f"  prompt tok {f.prompt_tokens}  completion tok {f.completion_tokens}"
        f"{ratio(f.completion_tokens, ref.completion_tokens if ref else 0)}\n"
        f"{'':>10}phases: {phases}; serial baseline decode "
        f"{f.baseline_decode or 0:.1f} tok/s; speedup {f.speedup or 0:.2f}x; flips {f.flips}, "
        f"greedy differing {f.greedy_differ}, not judged {f.not_judged}\n"
        f"{'':>10}throughput pairs: {f.pairs_s:.0f}s ({f.pairs_s / f.wall_s:.0%} of the run): "
        f"{'; '.join(f.pairs) or 'none'}; verdict {f.outcome}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help="against the healthy fake server")
    parser.add_argument("--repeat", type=int, default=0, help="more default runs for the spread")
    parser.add_argument("--folder", type=Path, default=None)
    parser.add_argument("--no-every", action="store_true", help="skip the reference run")
    args = parser.parse_args()
    folder_ctx = (
        nullcontext(str(args.folder)) if args.folder else tempfile.TemporaryDirectory()
    )
    with folder_ctx as folder_name, _target(args.fake) as base_url:
        folder = Path(folder_name)
        folder.mkdir(parents=True, exist_ok=True)
        every = None if args.no_every else _one(folder, "every", base_url, "every")
        if every is not None:
            print(_line("every", every, None), flush=True)
        needed = _one(folder, "needed", base_url, "needed")
        print(_line("needed", needed, every), flush=True)
        runs = [needed] + [
            _one(folder, f"needed-{k}", base_url, "needed") for k in range(args.repeat)
        ]
        for k, run in enumerate(runs[1:], 1):
            print(_line(f"run {k}", run, every), flush=True)
        rates = [r.baseline_decode for r in runs if r.baseline_decode]
        if len(rates) > 1:
            print(
                f"serial baseline over {len(rates)} runs: decode {statistics.mean(rates):.1f} "
                f"tok/s, spread {min(rates):.1f}-{max(rates):.1f} "
                f"(cv {statistics.stdev(rates) / statistics.mean(rates):.1%})"
            )
        medians = [r.paired_median for r in runs if r.paired_median]
        if len(medians) > 1:
            print(f"paired medians over {len(medians)} runs: {min(medians):.2f}-"
                  f"{max(medians):.2f}x, spread {max(medians) / min(medians) - 1:.0%} of the "
                  "lowest")
        walls = [r.wall_s for r in runs]
        print(f"default runs: {len(runs)}, wall {min(walls):.0f}-{max(walls):.0f}s, outcomes "
              f"{sorted({r.outcome for r in runs})}")


if __name__ == "__main__":
    main()
