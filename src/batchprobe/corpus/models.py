"""A corpus case as data: the engine, the versions, the model, the run, and what to expect."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from batchprobe.client.types import ErrorKind
from batchprobe.errors import ConfigError
from batchprobe.results.models import Outcome, Status

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Expectation(_Model):
    """What the verdict of one version must show; a field left out is not checked."""

    status: Status = Field(
        default=Status.OK, description="How the run ends: ok, or engine_died for a bug that kills it."
    )
    outcome: Outcome | None = None
    correct: bool | None = None
    parallel: bool | None = None
    diagnosed: list[str] = Field(default_factory=list, description="Issue ids it must name.")
    not_diagnosed: list[str] = Field(
        default_factory=list, description="Issue ids it must not name (the fixed version)."
    )
    error_kinds: list[ErrorKind] = Field(
        default_factory=list, description="Error kinds that must appear in some arm."
    )
    no_errors: bool = Field(default=False, description="No request of any arm may fail.")
    clean: bool = Field(
        default=False,
        description="Some answer was judged (judged items > 0) and correct is not false: "
        "what a fixed version must show.",
    )

    @model_validator(mode="after")
    def _clean_is_not_incorrect(self) -> Expectation:
        if self.clean and self.correct is False:
            raise ValueError("clean: true (correct is not false) contradicts correct: false")
        return self


class VersionCase(_Model):
    """One version of the engine, how it is launched, and what its verdict must be."""

    version: str
    label: str = Field(description="broken, fixed, patched, workaround, ...")
    engine_args: list[str] = Field(default_factory=list)
    patches: list[str] = Field(default_factory=list)
    expect: Expectation = Field(description="The verdict under the case's run options.")
    expect_default: Expectation | None = Field(
        default=None,
        description="The verdict under the default plan: the same engine, version, model, "
        "patches and engine arguments, and no run options.",
    )
    default_plan_not_checked: str | None = Field(
        default=None,
        description="Instead of expect_default: why this version is not run under the default "
        "plan (its measured cost, and what covers it instead).",
    )

    @model_validator(mode="after")
    def _states_the_default_plan(self) -> VersionCase:
        if (self.expect_default is None) == (self.default_plan_not_checked is None):
            raise ValueError(
                f"{self.version} {self.label}: give expect_default or default_plan_not_checked"
            )
        return self

    @model_validator(mode="after")
    def _fixed_is_clean(self) -> VersionCase:
        if self.label != "fixed":
            return self
        for name in ("expect", "expect_default"):
            wanted: Expectation | None = getattr(self, name)
            if wanted is not None and not wanted.clean:
                raise ValueError(
                    f"{self.version} fixed: {name} must say clean: true "
                    "(a fixed version judges some answer and fails none)"
                )
        return self


class Case(_Model):
    """A real, published batching bug reproduced on the real engine."""

    case_id: str
    title: str
    issue_id: str = Field(description="The known issue (engine module) that explains it.")
    references: list[str] = Field(description="Upstream issues and pull requests.")
    engine: str
    model: str = Field(
        description="A model alias (gemma3-270m, tiny-llama, tiny-gemma3, tiny-gemma4, tiny-gemma4-wide) or a tiny offline random model: tiny:gemma3, tiny:gemma4, tiny:llama."
    )
    run: dict[str, JsonValue] = Field(
        default_factory=dict, description="plan_run options: sessions, workloads, shapes, arms..."
    )
    versions: list[VersionCase] = Field(min_length=1)
    tries: int = Field(
        default=1, ge=1, le=5,
        description="A bug that shows only when requests meet by timing (prompts prefilled "
        "together, say) may not show in every run: a version expected to be wrong "
        "(correct false) is run up to this many times, until its run is wrong; the other "
        "versions run once.",
    )

    @field_validator("case_id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(f"bad case id {value!r}; use [a-z0-9._-]")
        return value

    def version(self, label_or_version: str) -> VersionCase:
        for entry in self.versions:
            if label_or_version in (entry.label, entry.version):
                return entry
        known = ", ".join(f"{v.label} ({v.version})" for v in self.versions)
        raise ConfigError("version", f"{label_or_version!r} is not in {self.case_id}; known: {known}")


class CaseResult(_Model):
    """One version of a case, run: its verdict file and how it differed from the expectation."""

    case_id: str
    version: str
    label: str
    verdict_file: str
    mismatches: list[str] = Field(description="What differed from the expectation; [] = as expected.")
    tries: int = Field(default=1, description="Runs made: more than one where the case's "
                       "bug did not show in the first (Case.tries).")

    @property
    def as_expected(self) -> bool:
        return not self.mismatches
