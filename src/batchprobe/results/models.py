"""The verdict file's models. Bump SCHEMA_VERSION on any incompatible change.

The models live by pipeline stage: the run's configuration (``config``), each request
(``sessions``), each arm or sweep step (``arms``), the judgement (``findings``), the sweep's
envelope (``sweep``), every request as sent (``items``); this module holds the verdict file
itself and re-exports the rest. A float that is not finite (a one-pair interval's unbounded
end) is written as the string "Infinity" or "NaN", so every file written reads back.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from batchprobe.results.arms import (
    ArmComparison,
    ArmMetrics,
    ArmResult,
    ArmSpec,
    Distribution,
    Divergence,
)
from batchprobe.results.config import (
    MAX_DEPTH,
    MAX_SEED,
    MIN_TIME_BUDGET_S,
    PromptStyle,
    RunConfig,
    Workload,
)
from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.findings import Finding, Judged
from batchprobe.results.items import Planted, Sending, WorkItem
from batchprobe.results.sessions import SessionOutcome, SessionResult
from batchprobe.results.shapes import ShapeStatus, Situations
from batchprobe.results.sweep import Envelope, SweepRun

SCHEMA_VERSION: Literal["4.0"] = "4.0"

__all__ = [
    "MAX_DEPTH",
    "MAX_SEED",
    "MIN_TIME_BUDGET_S",
    "SCHEMA_VERSION",
    "ArmComparison",
    "ArmMetrics",
    "ArmResult",
    "ArmSpec",
    "Distribution",
    "Divergence",
    "Environment",
    "Outcome",
    "PromptStyle",
    "Report",
    "RunConfig",
    "RunError",
    "SessionOutcome",
    "SessionResult",
    "Status",
    "Verdict",
    "Workload",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


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


class Verdict(_Model):
    outcome: Outcome = Outcome.INCONCLUSIVE
    parallel: bool | None = None
    correct: bool | None = None
    correct_up_to_n: int | None = Field(
        default=None,
        description="A sweep: the deepest step judged correct, when the sweep stopped before its "
        "planned depth (an SLO, the knee, the time budget); correctness is claimed up to it only.",
    )
    judged_answers: int = Field(
        default=0, description="Answers a content check judged (recall, count, bias, stop, ...)."
    )
    parallel_reason: str = Field(
        default="", description="The line that says why ``parallel`` is what it is (one of reasons)."
    )
    speedup: float | None = Field(
        default=None,
        description="The decode speedup ``parallel`` was judged on: a sweep's best correct step "
        "deeper than 1, or the widest arm's over the baseline.",
    )
    speedup_n: int | None = Field(default=None, description="The requests in flight of ``speedup``.")
    speedup_low: float | None = Field(
        default=None,
        description="A sweep: the low end of ``speedup``'s interval over its throughput pairs "
        "(``speedup`` is then their median); parallel is yes when it clears --min-speedup.",
    )
    speedup_high: float | None = Field(
        default=None,
        description="A sweep: the high end of the interval; parallel is no when it stays below "
        "--min-speedup, and INCONCLUSIVE when the interval holds the threshold.",
    )
    reasons: list[str] = Field(default_factory=list)


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

    schema_version: Literal["4.0"] = SCHEMA_VERSION
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
    situations: Situations = Field(
        default_factory=Situations,
        description="What the run made happen beyond plain traffic (client aborts, retries).",
    )
    log_tail: str | None = Field(default=None, description="Engine log tail when it failed.")
    findings: list[Finding] = Field(
        default_factory=list,
        description="Every judgement of the run (the verdict and every report render these).",
    )
    judged: list[Judged] = Field(
        default_factory=list, description="How many answers each check judged, per arm and shape."
    )
    items: dict[str, WorkItem] = Field(
        default_factory=dict,
        description="Every request as it was sent, by key (sessions name theirs): with "
        "``planted`` and ``sweep_run``, all the judge reads besides the answers.",
    )
    planted: Planted = Field(default_factory=Planted)
    sending: Sending = Field(default_factory=Sending)
    sweep_run: SweepRun | None = Field(
        default=None, description="What the sweep did, before judgement (its steps, its stop)."
    )

    def arm(self, name: str) -> ArmResult | None:
        return next((a for a in self.arms if a.spec.name == name), None)

    def comparison(self, arm: str) -> ArmComparison | None:
        """The arm's comparison with the baseline (None for the baseline itself)."""
        return next((c for c in self.comparisons if c.arm == arm), None)
