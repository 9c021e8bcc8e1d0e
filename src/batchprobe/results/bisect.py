"""The bisect file's models: every version tried, how it was judged, and what was found.

The file is rewritten after each version, so an interrupted bisect resumes from it. Bump
BISECT_SCHEMA_VERSION on any incompatible change.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from batchprobe.results.models import Outcome

BISECT_SCHEMA_VERSION: Literal["1.0"] = "1.0"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class Criterion(str, Enum):
    """What makes a version good."""

    CORRECT = "correct"  # verdict.correct is true (the default: a batching bug is about answers)
    PARALLEL = "parallel"  # verdict.parallel is true
    OUTCOME = "outcome"  # the whole verdict is PASS
    # No check the verdict judged failed (correct is not false) and some answer was judged:
    # for a tiny random model, whose recall cannot be judged, an error, crash or cross-talk
    # still makes a version bad, and a server that answers nothing is skipped, not good.
    NO_FAILURE = "no-failure"


class Judgement(str, Enum):
    """How a version was judged (the rule: ``batchprobe.bisect.run.judge``)."""

    GOOD = "good"  # the run finished, the criterion held, and some answer was judged
    BAD = "bad"  # the criterion failed on what was judged, even if the engine then died
    SKIPPED = "skipped"  # never judged: could not install or start, or nothing was judged


class BisectStatus(str, Enum):
    RUNNING = "running"
    FOUND = "found"  # first_changed is the first version on the far side
    AMBIGUOUS = "ambiguous"  # skipped versions hide where it changed: see candidates
    ENDS_DISAGREE = "ends_disagree"  # --check-ends: good or bad is not what it was said to be
    INTERRUPTED = "interrupted"  # stopped by a signal: run it again to resume


class VersionTry(_Model):
    """One version probed (or that could not be)."""

    version: str
    judgement: Judgement
    reason: str = Field(description="Why it was judged so, in words.")
    verdict_file: str | None = None
    status: str | None = Field(default=None, description="The verdict's status, when it ran.")
    outcome: Outcome | None = None
    correct: bool | None = None
    parallel: bool | None = None
    judged: int | None = Field(
        default=None, description="Answers the run judged (0: nothing was, so it is skipped)."
    )
    diagnoses: list[str] = Field(default_factory=list, description="Known-issue ids diagnosed.")
    seconds: float = Field(description="Install and probe wall time.")


class BisectReport(_Model):
    schema_version: Literal["1.0"] = BISECT_SCHEMA_VERSION
    engine: str
    good: str
    bad: str
    direction: Literal["regression", "fix"] = Field(
        description="regression: good is older, the first bad version is sought; fix: bad is "
        "older, the first good (fixed) version is sought."
    )
    criterion: Criterion
    check_ends: bool
    probe_options: dict[str, JsonValue] = Field(
        description="The run options every version is probed with (a resume must match them)."
    )
    versions: list[str] = Field(description="The released versions from old to new, ends included.")
    tries: list[VersionTry] = Field(default_factory=list)
    status: BisectStatus = BisectStatus.RUNNING
    first_changed: str | None = Field(
        default=None, description="The first bad (regression) or first fixed (fix) version."
    )
    last_unchanged: str | None = Field(
        default=None, description="The version just before it that kept the old judgement."
    )
    candidates: list[str] = Field(
        default_factory=list,
        description="When ambiguous: the versions among which the change lies.",
    )
    message: str = ""

    def tried(self, version: str) -> VersionTry | None:
        return next((t for t in self.tries if t.version == version), None)
