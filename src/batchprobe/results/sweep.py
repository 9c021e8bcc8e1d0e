"""Verdict models for a concurrency sweep: each step's evidence and the capacity envelope.

A step is also an arm of the report (``sweep@N``, its sessions and metrics); what is here is
what only a step has: its judgement, its speedup over the serial baseline, what the server
said it was running, the engine's memory, and why the sweep stopped.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from batchprobe.results.throughput import PairedThroughput, SpeedupInterval


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class StopRule(str, Enum):
    """Why a sweep stopped."""

    PLAN_END = "plan_end"  # every planned step ran
    INCORRECT = "incorrect"  # a step gave wrong answers (bisected)
    ERRORS = "errors"  # a step's requests errored or timed out (bisected)
    KNEE = "knee"  # throughput stopped growing (an auto sweep past its floor)
    SLO = "slo"  # a step broke --slo-ttft-p99 or --slo-itl-p99
    TIME_BUDGET = "time_budget"  # the next step would not fit in --time-budget
    STOPPED_EARLY = "stopped_early"  # the run itself stopped (interrupt, engine died)


class SweepStop(_Model):
    rule: StopRule
    at_n: int | None = Field(default=None, description="The depth that set the rule off.")
    detail: str = ""


class ServerLoad(_Model):
    """Requests the server reported running and waiting while a step ran, sampled."""

    source: str = Field(description="e.g. 'llama.cpp /metrics', 'vLLM /metrics', 'llama.cpp /slots'")
    samples: int
    running_max: int
    running_mean: float
    waiting_max: int | None = Field(default=None, description="None: the server does not say.")


class SweepStep(_Model):
    n: int = Field(description="Requests kept in flight at once.")
    arm: str = Field(description="The arm holding this step's sessions and metrics.")
    kind: Literal["sweep", "bisect"] = "sweep"
    references: str = Field(
        description="Where the serial references of this step's items came from."
    )
    correct: bool | None = None
    reasons: list[str] = Field(default_factory=list, description="Failures, or why not judged.")
    hard_kinds: list[str] = Field(
        default_factory=list, description="The kinds of the step's hard findings."
    )
    requests: int = 0
    errors: int = 0
    decode_tokens_per_s: float | None = Field(
        default=None,
        description="Aggregate decode tok/s of the throughput phase (n counting prompts at once): "
        "tokens after each first / union of their decode windows.",
    )
    output_tokens_per_s: float | None = Field(
        default=None, description="Every token of the step (both phases) over the step's wall time."
    )
    per_session_decode_tokens_per_s: float | None = Field(
        default=None, description="Median of each session's own decode rate."
    )
    prefill_tokens_per_s: float | None = None
    speedup: float | None = Field(
        default=None,
        description="The burst figure: decode_tokens_per_s of the step's throughput phase (one "
        "burst) over the serial baseline's (its counting prompts alone, on its own launch).",
    )
    paired_speedup: SpeedupInterval | None = Field(
        default=None,
        description="At the depth whose throughput pairs were taken: their median speedup with "
        "its interval (one request alone and n at once in turn, on the sweep's launch, before "
        "any correctness traffic). Parallel is decided on this.",
    )
    mixed_speedup: float | None = Field(
        default=None,
        description="How much sooner the mixed wave's requests finished than the same requests "
        "sent one at a time (their serial references' end-to-end times over the wave's wall); "
        "below 1 when the mix is prefill-bound on this hardware.",
    )
    scaling_efficiency: float | None = Field(default=None, description="speedup / n")
    within_slo: bool | None = Field(
        default=None,
        description="None: no SLO was given, or the client's own timings could not be trusted.",
    )
    client_limited: str | None = Field(
        default=None,
        description="Why this step's TTFT/ITL are not the server's: a client loop lagged past "
        "the threshold (the arm's client.loop_lag); the SLOs were not judged on them.",
    )
    slo_breaches: list[str] = Field(default_factory=list)
    server_load: ServerLoad | None = Field(
        default=None, description="None: the server reports no running-request gauge."
    )
    client_overlap_max: int = Field(
        default=0, description="Most sessions decoding at once, as the client saw their streams."
    )
    engine_rss_peak_mb: float | None = Field(
        default=None, description="Peak RSS of the managed engine's process group, sampled."
    )
    wall_s: float = 0.0


class Envelope(_Model):
    """What the sweep found: how deep it stays correct, fast, and within the SLOs."""

    baseline: str = Field(description="The serial arm every speedup is over.")
    baseline_decode_tokens_per_s: float | None = None
    steps: list[SweepStep] = Field(default_factory=list, description="In order of n.")
    largest_correct_n: int | None = None
    first_failing_n: int | None = None
    threshold_pinned: bool = Field(
        default=False,
        description="first_failing_n is largest_correct_n + 1: the bisection pinned it.",
    )
    failing_evidence: list[str] = Field(default_factory=list)
    largest_within_slo_n: int | None = None
    peak_decode_tokens_per_s: float | None = None
    peak_n: int | None = None
    knee_n: int | None = Field(
        default=None,
        description="The last n whose throughput grew 10% or more over the step before, when "
        "the next two steps grew less than that each.",
    )
    engine_cap: int | None = Field(
        default=None,
        description="Most requests the server ran at once while it said others waited: its own "
        "batch cap (slots, max-num-seqs).",
    )
    notes: list[str] = Field(default_factory=list)
    throughput: list[PairedThroughput] = Field(
        default_factory=list,
        description="The throughput pairs: at the deepest depth before any correctness traffic "
        "(start), and again after the sweep's mixed waves (after: the server's history).",
    )
    stop: SweepStop | None = None
    reference_sample: list[int] = Field(
        default_factory=list,
        description="The seeded sample of items the judge asked to be sent alone whatever "
        "their answers (greedy equality, usage, the serial throughput baseline), by session.",
    )
    references_asked: int = Field(
        default=0,
        description="Items sent alone for reference after the sweep: the sample, the wrong or "
        "short answers, the compared greedy rows without logprobs.",
    )

    def step(self, n: int) -> SweepStep | None:
        return next((s for s in self.steps if s.n == n), None)


class StepRun(_Model):
    """What a sweep step did, before any judgement: the final pass makes its ``SweepStep``."""

    n: int
    arm: str
    kind: Literal["sweep", "bisect"] = "sweep"
    references: str = Field(description="Where the serial references of its items came from.")
    mixed_wall_s: float = Field(description="Wall time of its mixed wave (after the throughput phase).")
    mixed_from: int = Field(description="Index of the mixed wave's first session in the arm's sessions.")
    server_load: ServerLoad | None = None
    engine_rss_peak_mb: float | None = None


class SweepRun(_Model):
    """What the sweep did, as the run left it: the final pass judges the envelope from it."""

    steps: list[StepRun] = Field(default_factory=list, description="In the order they ran.")
    stop: SweepStop | None = Field(default=None, description="Why the sweep stopped, as it ran.")
    notes: list[str] = Field(default_factory=list)
    throughput: list[PairedThroughput] = Field(default_factory=list)
    reference_sample: list[int] = Field(default_factory=list)
    references_asked: int = 0
    pressure_not_run: str | None = Field(
        default=None, description="Why no wave went past the KV pool (None: one did, or no sweep)."
    )
