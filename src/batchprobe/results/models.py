"""The verdict file's models. Bump SCHEMA_VERSION on any incompatible change."""

from __future__ import annotations

import itertools
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator
from yarl import URL

from batchprobe.client.types import ErrorKind, RequestError, chunk_texts
from batchprobe.results.client import ClientHealth
from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.shapes import SelfCheck, ShapeStatus, Situation, WaveResult
from batchprobe.results.sweep import Envelope
from batchprobe.results.thresholds import Thresholds

SCHEMA_VERSION: Literal["2.3"] = "2.3"
MAX_DEPTH = 1024
MIN_TIME_BUDGET_S = 30.0
# Seeds travel in JSON request bodies and engines read them as signed 64-bit integers.
MAX_SEED = 2**63 - 1

Workload = Literal["recall", "decode"]
_ALL_WORKLOADS: tuple[Workload, ...] = ("recall", "decode")
PromptStyle = Literal["completion", "chat"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Status(str, Enum):
    """Where the run stands. Everything but ``running`` and ``ok`` means it stopped early."""

    RUNNING = "running"
    OK = "ok"
    CONFIG_ERROR = "config_error"
    ENGINE_UNREACHABLE = "engine_unreachable"
    ENGINE_NOT_INSTALLED = "engine_not_installed"
    ENGINE_INSTALL_FAILED = "engine_install_failed"
    ENGINE_FAILED_TO_START = "engine_failed_to_start"
    ENGINE_EXITED_EARLY = "engine_exited_early"
    ENGINE_DIED = "engine_died"
    INTERRUPTED = "interrupted"
    ERROR = "error"


class Outcome(str, Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"


class SessionOutcome(str, Enum):
    """One session's outcome on its own: the session grid's colours."""

    HIT = "hit"
    MISS = "miss"
    CROSS_TALK = "cross_talk"
    ERROR = "error"
    ANSWERED = "answered"  # decode: an answer, judged only against the baseline's


class ArmSpec(_Model):
    """One arm: a server configuration (``mode``, None for a plain URL) and a concurrency."""

    name: str
    concurrency: int = Field(ge=1)
    mode: Literal["simple", "batching"] | None = None
    prefix_cache: bool = Field(
        default=False,
        description="A managed engine launched with its default prefix cache (for the repeat wave).",
    )
    role: Literal["arm", "step", "reference"] = Field(
        default="arm",
        description="arm: a planned arm; step: a sweep step (all its shapes in one wave); "
        "reference: a serial pass whose sessions are references, like the baseline's.",
    )


class SessionResult(_Model):
    """One request of one arm, scored."""

    arm: str
    workload: Workload
    session: int = Field(description="Index of the item; the same item has the same index in every arm.")
    request_id: str
    error: RequestError | None = None
    reconnect: str | None = Field(
        default=None,
        description="Why the request went out twice: its first send provably never reached the server.",
    )
    prompt_head: str = Field(default="", description="The first characters of the prompt.")
    expected_code: str | None = Field(default=None, description="recall: this session's needle")
    hit: bool | None = Field(default=None, description="recall: own code found in the answer")
    cross_talk_from: list[int] = Field(
        default_factory=list, description="sessions whose codes (or count numbers) appear here"
    )
    shape: str = Field(default="burst", description="The traffic shape whose item this is.")
    situation: Situation | None = Field(
        default=None, description="Where it stood in its wave: arrival, in flight, parameters."
    )
    check: SelfCheck | None = Field(
        default=None, description="The item's own checker on this answer (None: not determined)."
    )
    answer_excerpt: str = ""
    text: str = Field(default="", description="The whole generated text (for greedy comparison).")
    chunk_ends: list[int] = Field(
        default_factory=list,
        description="End offset in text of each streamed chunk (the output is stored once).",
    )
    logprobs: list[float] | None = Field(
        default=None, description="Chosen-token logprobs (with --logprobs, where supported)."
    )
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    start_s: float = Field(description="Request start, seconds since the arm began.")
    first_token_s: float | None = Field(default=None, description="Seconds since the arm began.")
    last_token_s: float | None = Field(default=None, description="Seconds since the arm began.")
    end_s: float = Field(description="Seconds since the arm began.")
    itl_s: list[float] = Field(default_factory=list, description="Gaps between streamed chunks.")
    streamed: bool = True
    buffered: bool = Field(
        default=False, description="Every token arrived at once: timed end to end instead."
    )

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def pieces(self) -> list[str]:
        """The generated text chunk by chunk, derived from ``text`` and ``chunk_ends``."""
        return chunk_texts(self.text, self.chunk_ends)

    @property
    def outcome(self) -> SessionOutcome:
        """What the session shows on its own (greedy divergence is a comparison, not here)."""
        if self.error is not None:
            return SessionOutcome.ERROR
        if self.cross_talk_from:
            return SessionOutcome.CROSS_TALK
        if self.hit is None:
            return SessionOutcome.ANSWERED
        return SessionOutcome.HIT if self.hit else SessionOutcome.MISS

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.start_s

    @property
    def e2e_s(self) -> float:
        return self.end_s - self.start_s


class Distribution(_Model):
    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float


class ArmMetrics(_Model):
    sessions: int
    ok_sessions: int
    errors_by_kind: dict[ErrorKind, int] = Field(default_factory=dict)
    recall: float | None = Field(default=None, description="hits / recall sessions that answered")
    recall_hits: int = 0
    recall_sessions: int = 0
    cross_talk_sessions: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int | None = Field(
        default=None, description="Sum of usage.prompt_tokens_details.cached_tokens when reported."
    )
    decode_tokens_per_s: float | None = Field(
        default=None,
        description="decode workload: tokens after each first token / union of decode windows",
    )
    recall_decode_tokens_per_s: float | None = None
    aggregate_decode_tokens_per_s: float | None = Field(
        default=None,
        description="every session of every shape: tokens after each first / union of windows",
    )
    per_session_decode_tokens_per_s: float | None = Field(
        default=None, description="median of each session's own decode rate (every shape)"
    )
    output_tokens_per_s: float | None = Field(
        default=None, description="completion tokens / wall_s: everything the arm generated, all in"
    )
    timed_shapes: Literal["burst", "all"] = Field(
        default="burst",
        description="Which sessions the TTFT/ITL/e2e distributions cover: the burst wave "
        "(arms), or every shape (sweep steps, whose mixed wave shares the server). Decode and "
        "prefill rates always come from the burst.",
    )
    prefill_tokens_per_s: float | None = Field(
        default=None, description="recall workload: prompt tokens / union of prefill windows"
    )
    ttft_s: Distribution | None = None
    itl_s: Distribution | None = None
    e2e_s: Distribution | None = None
    buffered_sessions: int = 0
    wall_s: float = 0.0


class ArmResult(_Model):
    spec: ArmSpec
    state: Literal["pending", "running", "done", "failed", "interrupted"] = "pending"
    started_at: str | None = None
    sessions: list[SessionResult] = Field(default_factory=list)
    metrics: ArmMetrics | None = None
    server_alive_after: bool | None = None
    engine_version: str | None = None
    served_model: str | None = None
    log_path: str | None = Field(default=None, description="The engine's log for this arm.")
    waves: list[WaveResult] = Field(
        default_factory=list, description="One per shape, in order (serial arms: one per shape too)."
    )
    engine_pid: int | None = Field(default=None, description="The managed engine's pid.")
    engine_pgid: int | None = Field(default=None, description="The managed engine's process group.")
    engine_launch: str | None = Field(
        default=None,
        description="The launch token: every process of the launch has BATCHPROBE_LAUNCH=<it> "
        "in its environment (see `batchprobe engines doctor`).",
    )
    engine_exit_code: int | None = Field(
        default=None,
        description="The managed engine's exit status if it exited during the arm "
        "(negative: killed by that signal).",
    )
    request_body: dict[str, JsonValue] | None = Field(
        default=None,
        description="The exact JSON body of one measured request of this arm (what the server saw).",
    )
    error: str | None = Field(
        default=None, description="An error of the arm itself (e.g. its warm-up request failed)."
    )
    warnings: list[str] = Field(default_factory=list)
    client: ClientHealth | None = Field(
        default=None, description="The client's processes, connections and loop lag in this arm."
    )


class Divergence(_Model):
    workload: Workload
    session: int
    index: int = Field(description="Index of the first differing chunk.")
    baseline: str | None
    arm: str | None


class ArmComparison(_Model):
    arm: str
    baseline: str
    decode_speedup: float | None = None
    scaling_efficiency: float | None = Field(default=None, description="speedup / concurrency")
    prefill_speedup: float | None = None
    recall_delta: float | None = Field(default=None, description="arm recall - baseline recall")
    greedy_compared: int = 0
    greedy_matches: int = 0
    greedy_match_rate: float | None = None
    divergences: list[Divergence] = Field(default_factory=list)
    max_logprob_delta: float | None = Field(
        default=None,
        description="Largest |logprob difference| over the tokens both arms generated alike.",
    )

    def divergence(self, workload: Workload, session: int) -> Divergence | None:
        """The first difference of this session's greedy output from the baseline's, if any."""
        return next(
            (d for d in self.divergences if d.workload == workload and d.session == session), None
        )


class Verdict(_Model):
    outcome: Outcome = Outcome.INCONCLUSIVE
    parallel: bool | None = None
    correct: bool | None = None
    reasons: list[str] = Field(default_factory=list)


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
        default=1200, ge=64, le=200_000, description="Recall prompt length target, in tokens."
    )
    max_tokens: int = Field(default=128, ge=8, le=4096, description="Decode workload output length.")
    recall_max_tokens: int = Field(default=16, ge=1, le=512)
    prompt_style: PromptStyle = "completion"
    workloads: list[Workload] = Field(default_factory=lambda: list(_ALL_WORKLOADS), min_length=1)
    shapes: list[str] | None = Field(
        default=None, description="Traffic shapes asked for; None: every shape the server supports."
    )
    seed: int = Field(
        default=0, ge=0, le=MAX_SEED, description="Seeds item generation only (never sent)."
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
    client_procs: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Client processes an arm's sessions are sharded over [default: 1, or one per "
        "256 sessions of the deepest arm up to the machine's cores].",
    )
    time_budget_s: float | None = Field(
        default=None,
        ge=MIN_TIME_BUDGET_S,
        allow_inf_nan=False,
        description="Seconds the sweep may take; a step that would not fit is not started. One "
        f"step needs a warm-up, its wave and its liveness check: under {MIN_TIME_BUDGET_S:.0f} s "
        "none fits.",
    )
    thresholds: Thresholds = Field(default_factory=Thresholds)
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


class Environment(_Model):
    batchprobe_version: str
    python: str
    platform: str
    served_model: str | None = None
    engine_version: str | None = None
    server_kind: str | None = Field(default=None, description="e.g. llama.cpp, when detected")


class RunError(_Model):
    """Why a run stopped early."""

    message: str = Field(description="One line.")
    traceback: str | None = Field(
        default=None, description="The traceback of an unexpected (internal) error."
    )


class Report(_Model):
    """The verdict file."""

    schema_version: Literal["2.3"] = SCHEMA_VERSION
    run_id: str = Field(description="The run nonce planted in every prompt.")
    status: Status = Status.RUNNING
    started_at: str
    finished_at: str | None = None
    config: RunConfig
    environment: Environment
    arms: list[ArmResult] = Field(default_factory=list)
    comparisons: list[ArmComparison] = Field(default_factory=list)
    verdict: Verdict = Field(default_factory=Verdict)
    diagnoses: list[Diagnosis] = Field(default_factory=list)
    patches_applied: list[str] = Field(default_factory=list)
    shapes: list[ShapeStatus] = Field(
        default_factory=list, description="Each shape: ran or skipped (and why), its sessions."
    )
    warnings: list[str] = Field(default_factory=list)
    error: RunError | None = Field(default=None, description="Why the run stopped early.")
    envelope: Envelope | None = Field(default=None, description="The sweep's findings, if it ran.")
    log_tail: str | None = Field(default=None, description="Engine log tail when it failed.")

    def arm(self, name: str) -> ArmResult | None:
        return next((a for a in self.arms if a.spec.name == name), None)

    def comparison(self, arm: str) -> ArmComparison | None:
        """The arm's comparison with the baseline (None for the baseline itself)."""
        return next((c for c in self.comparisons if c.arm == arm), None)
