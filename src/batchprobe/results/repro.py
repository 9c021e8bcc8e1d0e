"""A failure as data (``repro.json``): the wave that held it, request by request, and what
the judge reads to call the same failure again. ``batchprobe repro`` writes it,
``batchprobe run --replay`` sends it as an arm."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.findings import FindingKind
from batchprobe.results.items import Planted, Sending, WorkItem
from batchprobe.results.sessions import SessionResult
from batchprobe.results.shapes import SentAfter
from batchprobe.results.thresholds import Thresholds

REPRO_SCHEMA_VERSION: Literal["1.0"] = "1.0"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class ReproRequest(_Model):
    """One request of the wave, as it was sent."""

    session: int
    copy_index: int = 0
    item: WorkItem = Field(description="The request as sent: prompt or messages, parameters.")
    planned: WorkItem | None = Field(
        default=None, description="A later conversation turn as planned: a replay builds it "
        "from the turn before as the replay sent and answered it, when that turn is sent too.",
    )
    offset_s: float = Field(ge=0.0, description="When it went out, after the wave's start.")
    phase: int = Field(default=0, ge=0, description="Its phase in its shape's wave.")
    after: SentAfter | None = Field(
        default=None, description="The join trigger it waited for (a replay waits for it "
        "again while the sessions it names are sent; else it goes at its offset)."
    )
    delay_s: float = Field(default=0.0, ge=0.0, description="How long after its trigger.")
    prefix_cache: bool = Field(
        default=False, description="Sent with the server's prefix cache as users run it."
    )


class Target(_Model):
    """Where the failure was seen."""

    base_url: str | None = None
    engine: str | None = Field(default=None, description="The engine batchprobe launched, as given.")
    engine_version: str | None = None
    model: str | None = Field(default=None, description="The model the server served.")
    model_arg: str | None = Field(default=None, description="--model as given (a path or alias).")
    patches: list[str] = Field(default_factory=list)
    engine_args: list[str] = Field(default_factory=list)
    environment: str = Field(default="", description="batchprobe, Python and platform of the run.")
    diagnoses: list[Diagnosis] = Field(
        default_factory=list, description="The run's failures explained from the server log."
    )


class Kept(_Model):
    """The failure a replay must show again: its kind, on its session."""

    kind: FindingKind
    session: int
    sources: list[int] = Field(default_factory=list)
    arm: str
    message: str


class ReproCase(_Model):
    """A failing wave as data: ``batchprobe repro`` shrinks it, ``repro.py`` sends it."""

    schema_version: Literal["1.0"] = REPRO_SCHEMA_VERSION
    run_id: str
    target: Target
    kept: Kept
    concurrency: int = Field(ge=1, description="Requests the wave kept in flight at most.")
    mode: Literal["simple", "batching"] | None = Field(
        default=None, description="The launch mode of the failing arm (an engine's)."
    )
    prompt_style: Literal["completion", "chat"]
    sending: Sending
    cache_body: dict[str, JsonValue] = Field(
        default_factory=dict, description="The body fields of a request sent with the cache."
    )
    requests: list[ReproRequest]
    planted: Planted
    references: list[SessionResult] = Field(
        default_factory=list, description="The serial references of the wave's items."
    )
    thresholds: Thresholds

    def request(self, session: int) -> ReproRequest:
        return next(r for r in self.requests if r.session == session and not r.copy_index)
