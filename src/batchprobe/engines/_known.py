"""Known-issue signatures: regexes over server logs and error bodies, with what they mean.

An engine module lists its own (``Engine.known_issues``); another package adds more with an
entry point in the ``batchprobe.known_issues`` group, named after the engine, whose object is
a :class:`KnownIssue`, a list of them, or a callable returning either.
"""

from __future__ import annotations

import re
from importlib.metadata import entry_points
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator

from batchprobe._plugins import entry_items


class KnownIssue(BaseModel):
    """One engine bug (or by-design behaviour) recognisable from its evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issue_id: str
    title: str
    patterns: tuple[str, ...] = Field(description="Regexes; any match is evidence.")
    where: Literal["log", "body", "any", "finding"] = Field(
        default="any",
        description="What the patterns are matched against: the server log, error bodies, "
        "both, or the judge's hard findings ('KIND: message'; a bug that leaves no trace but "
        "its wrong answers, known by its symptom on an affected version).",
    )
    affected: str = Field(default="", description="PEP 440 specifier of affected versions.")
    explanation: str
    remedy: str
    fixed_in: str | None = None
    patch: str | None = None
    is_bug: bool = True

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            re.compile(pattern)
        return patterns

    @field_validator("affected")
    @classmethod
    def _specifier(cls, affected: str) -> str:
        try:
            SpecifierSet(affected)
        except InvalidSpecifier as exc:
            raise ValueError(f"bad version specifier {affected!r}") from exc
        return affected

    def affects(self, version: str | None) -> bool:
        """True when ``version`` is affected; an unknown or unparsable version may be."""
        if not self.affected or version is None:
            return True
        try:
            return Version(version) in SpecifierSet(self.affected, prereleases=True)
        except InvalidVersion:
            return True

    def evidence(self, lines: list[str], bodies: list[str], limit: int = 5) -> list[str]:
        """The lines (of the log; of the findings for a ``finding`` issue) and bodies that
        match, oldest first, without repeats."""
        sources: list[str] = []
        if self.where in ("log", "any", "finding"):
            sources.extend(lines)
        if self.where in ("body", "any"):
            sources.extend(bodies)
        regexes = [re.compile(p) for p in self.patterns]
        found: list[str] = []
        for text in sources:
            line = text.strip()
            if line and line not in found and any(r.search(line) for r in regexes):
                found.append(line[:500])
        return found[:limit]


KNOWN_ISSUES_GROUP = "batchprobe.known_issues"


def plugin_known_issues(engine_name: str) -> list[KnownIssue]:
    """Known issues other packages register for ``engine_name``."""
    return [
        issue
        for entry in entry_points(group=KNOWN_ISSUES_GROUP)
        if entry.name == engine_name
        for issue in entry_items(entry, KnownIssue)
    ]
