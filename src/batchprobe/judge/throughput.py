"""The throughput pairs' judgements: ``parallel`` from the interval taken as the engine
started, and the server's history (the same depth measured again after the mixed waves)."""

from __future__ import annotations

from dataclasses import dataclass

from batchprobe.results.findings import Finding, FindingKind
from batchprobe.results.sweep import Envelope
from batchprobe.results.thresholds import Thresholds
from batchprobe.results.throughput import PairedThroughput, paired

__all__ = ["PairedParallel", "history", "paired_parallel"]


@dataclass(frozen=True)
class PairedParallel:
    parallel: bool | None
    why: str
    speedup: float | None
    low: float | None
    high: float | None
    n: int


def paired_parallel(pairs: PairedThroughput, env: Envelope, t: Thresholds) -> PairedParallel:
    """Yes when the interval's low end clears the threshold, no when its high end stays below
    it, otherwise undecided: never a "no" from a figure the run cannot tell from noise."""
    n, iv = pairs.n, pairs.interval
    if iv is None:
        return PairedParallel(None, f"parallel not judged: the throughput pairs at {n} in flight "
                              f"gave no figure ({pairs.note})", None, None, None, n)
    step = env.step(n)
    if step is not None and step.correct is False:
        # A throughput bought with wrong answers is no parallelism to claim.
        return PairedParallel(
            None, f"parallel not judged: the throughput pairs ({iv.describe()}) were taken "
            f"at the depth of step sweep@{n}, which answered wrongly", iv.median, iv.low,
            iv.high, n)
    figure = (f"decode speedup {iv.describe()} at {n} in flight: one request alone and {n} at "
              "once in turn on the same server, before any correctness traffic")
    threshold = f"{t.min_speedup:.2f}x threshold"
    if iv.low >= t.min_speedup:
        return PairedParallel(True, f"parallel: {figure} (the interval clears the {threshold})",
                              iv.median, iv.low, iv.high, n)
    if iv.high < t.min_speedup:
        return PairedParallel(False, f"not parallel: {figure}, the whole interval below the "
                              f"{threshold}", iv.median, iv.low, iv.high, n)
    load = f"; {pairs.load.describe()}" if pairs.load is not None else ""
    return PairedParallel(
        None, f"parallel not decided: {figure}; the interval holds the {threshold} after "
        f"{len(pairs.pairs)} pair(s) (spread {iv.low:.2f}-{iv.high:.2f}x){load}",
        iv.median, iv.low, iv.high, n,
    )


def history(env: Envelope | None, t: Thresholds) -> list[Finding]:
    """A soft finding when the deepest depth, measured again after the mixed waves, is
    slower beyond the first interval: the server's history moved its throughput."""
    if env is None:
        return []
    start, after = paired(env.throughput, "start"), paired(env.throughput, "after")
    if start is None or after is None or start.interval is None or after.interval is None:
        return []
    first, later = start.interval, after.interval
    if not (later.high < first.low and later.median <= first.median * (1 - t.throughput_drop)):
        return []
    evidence = f"start {first.describe()}; after the mixed waves {later.describe()}"
    return [Finding(
        arm=f"sweep@{start.n}", step=start.n, kind=FindingKind.THROUGHPUT_DROP, severity="soft",
        evidence=evidence,
        message=f"throughput dropped after the sweep's traffic: the speedup at {start.n} in "
        f"flight was {first.describe()} before any correctness traffic and {later.describe()} "
        "after the mixed waves (the server's history, not the machine, when the load figures "
        "agree)",
    )]
