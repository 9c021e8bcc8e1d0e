"""Paired throughput samples: the figure ``parallel`` is decided on, with its interval.

At the depth that decides the verdict, one request alone and N at once are measured in turn
on the same server (A B A B ...), each over a steady-state window: the tokens that arrive while
every stream of the sample is decoding, over that window's length. Each pair's speedup is its
N-at-once rate over its one-at-a-time rate; the pairs give a median and an interval, and the
machine's load during the samples says why an interval may be wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class CpuLoad(_Model):
    """Where the machine's cores went during the samples (from ``/proc``), in cores."""

    cores: int
    busy: float = Field(description="Cores busy on average, every process included.")
    client: float = Field(description="batchprobe's own process (and its client workers).")
    engine: float | None = Field(
        default=None, description="The managed engine's process group; None for a URL."
    )
    other: float = Field(
        description="Busy cores neither batchprobe nor the managed engine used (on a URL run "
        "this includes the server, when it runs on this machine)."
    )
    steal: float = Field(description="Fraction of the machine's time the hypervisor took.")

    def describe(self) -> str:
        engine = f", the engine {self.engine:.2f}" if self.engine is not None else ""
        return (
            f"the machine was {self.busy:.2f} of {self.cores} cores busy (this client "
            f"{self.client:.2f}{engine}, other processes {self.other:.2f}), steal "
            f"{self.steal:.1%}"
        )


WindowKind = Literal["all_decoding", "queued"]


class RateSample(_Model):
    """One sample's steady-state rate: tokens while all its streams decoded, over that time."""

    streams: int
    window: WindowKind = Field(
        default="all_decoding",
        description="all_decoding: from the last stream's first token to the first stream's "
        "last; queued: the server never ran every stream together (one queued behind "
        "another), so the whole sample, from its first token to its last.",
    )
    tokens_per_s: float | None = Field(
        default=None, description="None: an error, or no window where all streams decoded."
    )
    window_s: float = 0.0
    window_tokens: int = Field(
        default=0, description="The fewest tokens any stream streamed inside the window."
    )
    whole_tokens_per_s: float | None = Field(
        default=None,
        description="Today's figure beside it: every token after each stream's first over the "
        "union of the streams' decode windows (ramp-up and ramp-down included).",
    )
    errors: int = 0


class ThroughputPair(_Model):
    one: RateSample = Field(description="One request alone.")
    many: RateSample = Field(description="N requests at once.")
    counted: bool = Field(
        description="False: a sample errored, or its window was shorter than the minimum "
        "(the first pair sizes the windows of the rest)."
    )
    speedup: float | None = None


class SpeedupInterval(_Model):
    """A speedup as a median over the counted pairs, with its confidence interval."""

    median: float
    low: float
    high: float
    pairs: int
    confidence: float
    method: str = Field(
        description="How the interval was made: a t-interval over the pairs' log speedups "
        "around their median, never narrower than the stated resolution."
    )

    def describe(self) -> str:
        return (
            f"{self.median:.2f}x (CI {self.low:.2f}-{self.high:.2f}x over {self.pairs} pairs)"
        )


class PairedThroughput(_Model):
    """The pairs at one depth, taken at one point of the run."""

    n: int = Field(description="Requests at once in the N-at-once samples.")
    when: Literal["start", "after"] = Field(
        description="start: before any correctness traffic, on the engine as it starts; "
        "after: again after the sweep's mixed waves (the server's history)."
    )
    max_tokens: int = Field(description="max_tokens of the N-at-once samples, sized for the window.")
    one_max_tokens: int = Field(description="max_tokens of the one-at-a-time samples.")
    window_tokens: int = Field(description="The minimum window: tokens per stream while all decode.")
    pairs: list[ThroughputPair] = Field(default_factory=list)
    interval: SpeedupInterval | None = None
    load: CpuLoad | None = None
    wall_s: float = 0.0
    note: str | None = Field(default=None, description="Why the measurement stopped short.")


def paired(throughput: Sequence[PairedThroughput], when: str) -> PairedThroughput | None:
    """The pairs taken at ``when`` (start, after), if any were."""
    return next((p for p in throughput if p.when == when), None)
