"""The run's configuration: everything that shaped the run (what a rerun needs)."""

from __future__ import annotations

import itertools
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from yarl import URL

from batchprobe.results.arms import ArmSpec
from batchprobe.results.thresholds import Thresholds

MAX_DEPTH = 1024
MIN_TIME_BUDGET_S = 30.0
# Seeds travel in JSON request bodies and engines read them as signed 64-bit integers.
MAX_SEED = 2**63 - 1

Workload = Literal["recall", "decode"]
_ALL_WORKLOADS: tuple[Workload, ...] = ("recall", "decode")
PromptStyle = Literal["completion", "chat"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class RunConfig(_Model):
    """Everything that shaped the run (what a rerun needs).

    The one place where run options are bounded and defaulted: the CLI declares none of its own,
    and a violation is reported under the option's name.
    """

    base_url: str | None = Field(default=None, description="OpenAI-compatible server to probe.")
    engine: str | None = None
    model: str | None = None
    sessions: int = Field(
        default=8, ge=1, le=1024, description="Concurrent sessions (and items per workload)."
    )
    haystack_tokens: int = Field(
        default=1000, ge=64, le=200_000, description="Recall prompt length target, in tokens."
    )
    max_tokens: int = Field(default=96, ge=8, le=4096, description="Decode workload output length.")
    recall_max_tokens: int = Field(default=16, ge=1, le=512)
    prompt_style: PromptStyle = "completion"
    workloads: list[Workload] = Field(default_factory=lambda: list(_ALL_WORKLOADS), min_length=1)
    shapes: list[str] | None = Field(
        default=None, description="Traffic shapes asked for; None: every shape the server supports."
    )
    seed: int = Field(
        default=0, ge=0, le=MAX_SEED, description="Seeds item generation only (never sent)."
    )
    references: Literal["needed", "every"] = Field(
        default="needed",
        description=(
            "A sweep's serial references, sent alone after it: `needed`, only what the judge "
            "asks for (wrong or short answers, a seeded sample, compared greedy rows without "
            "logprobs); `every`, every item (twice the requests; every answer compared with "
            "its serial run)."
        ),
    )
    request_seed: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SEED,
        description=(
            "A `seed` sent in every measured request. Off by default: an ordinary client sends "
            "none, and some servers (mlx-lm) serve seeded requests one at a time."
        ),
    )
    arms: list[ArmSpec] = Field(default_factory=list)
    sweep: list[int] | None = Field(
        default=None,
        description="The sweep's depths, in order (None: no sweep). Each step runs every shape "
        "in one wave at that many requests in flight, on one engine launch.",
    )
    sweep_auto: bool = Field(
        default=False,
        description="--sweep auto: the knee may stop the sweep once it is past 2 x --sessions.",
    )
    max_sessions: int | None = Field(
        default=None, ge=1, le=1024, description="--sweep auto doubles up to this (default 4 x --sessions)."
    )
    slo_ttft_p99_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="A step whose TTFT p99 exceeds this breaks the SLO."
    )
    slo_itl_p99_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="A step whose ITL p99 exceeds this breaks the SLO."
    )
    time_budget_s: float | None = Field(
        default=None,
        ge=MIN_TIME_BUDGET_S,
        allow_inf_nan=False,
        description="Seconds the sweep may take; a step that would not fit is not started. One "
        f"step needs a warm-up, its wave and its liveness check: under {MIN_TIME_BUDGET_S:.0f} s "
        "none fits.",
    )
    pairs: int = Field(
        default=3,
        ge=3,
        le=64,
        description="Throughput pairs (one request alone, then the deepest depth at once, in "
        "turn) taken before any correctness traffic; parallel is decided on their interval.",
    )
    max_pairs: int = Field(
        default=8,
        ge=3,
        le=64,
        description="The most pairs taken to settle an interval that straddles --min-speedup.",
    )
    pair_window_tokens: int = Field(
        default=16,
        ge=4,
        le=512,
        description="The steady-state window of a throughput sample: tokens each stream streams "
        "while every stream of the sample decodes; max_tokens is sized for it.",
    )
    kv_tokens: int | None = Field(
        default=None,
        ge=16,
        le=10**9,
        description="The server's KV pool in tokens, given by hand (a URL whose server does not "
        "state it): the pressure wave after the sweep fills it past 125%.",
    )
    thresholds: Thresholds = Field(default_factory=Thresholds)
    replay: str | None = Field(
        default=None,
        description="run --replay: the repro.json whose minimal case this run sent as an arm "
        "(then the serial references of its requests), judged for correctness only.",
    )
    client_procs: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Client processes an arm's sessions are sharded over [default: 1, or one per "
        "256 sessions of the deepest arm up to the machine's cores].",
    )
    patches: list[str] = Field(default_factory=list)
    engine_args: list[str] = Field(
        default_factory=list,
        description="Extra arguments appended to a managed engine's server command line.",
    )
    logprobs: bool = Field(default=False, description="Ask for chosen-token logprobs.")
    request_timeout_s: float = Field(
        default=300.0, gt=0, allow_inf_nan=False, description="Seconds one request may take in all."
    )
    ready_timeout_s: float = Field(
        default=300.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds a launched engine may take to become ready.",
    )
    liveness_timeout_s: float = Field(
        default=20.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Seconds the 1-token generation after each arm may take: a server whose generation "
            "died often still answers its model list, so liveness is a generation."
        ),
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            url = URL(value.strip())
            port = url.port
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a valid URL ({exc})") from exc
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"{value!r} is not an http:// or https:// URL with a host")
        if port is not None and not 1 <= port <= 65535:
            raise ValueError(f"{value!r}: the port must be 1-65535")
        return value.strip()

    @field_validator("sweep")
    @classmethod
    def _increasing_depths(cls, sweep: list[int] | None) -> list[int] | None:
        if sweep is None:
            return None
        if not sweep:
            raise ValueError("give at least one depth, e.g. 1,2,4,8,16, or auto")
        for n in sweep:
            if not 1 <= n <= MAX_DEPTH:
                raise ValueError(f"{n} is not a depth: each must be 1-{MAX_DEPTH}")
        for low, high in itertools.pairwise(sweep):
            if high <= low:
                raise ValueError(f"depths must increase: {high} comes after {low}")
        return sweep

    @field_validator("max_pairs")
    @classmethod
    def _max_pairs_at_least_pairs(cls, value: int, info: ValidationInfo) -> int:
        pairs = info.data.get("pairs")
        if pairs is not None and value < pairs:
            raise ValueError(f"{value} is fewer than --pairs {pairs}")
        return value

    @field_validator("arms")
    @classmethod
    def _arms_fit_sessions(cls, arms: list[ArmSpec], info: ValidationInfo) -> list[ArmSpec]:
        # An arm wider than the items per workload never has that many requests in flight.
        sessions = info.data.get("sessions")
        wide = [a.name for a in arms if sessions is not None and a.concurrency > sessions]
        if wide:
            raise ValueError(
                f"{', '.join(wide)} would run more sessions at once than --sessions {sessions} "
                "ever sends; raise --sessions or narrow the arm"
            )
        return arms
