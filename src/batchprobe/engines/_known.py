"""Known-issue signatures: regexes over server logs and error bodies, with what they mean.

An engine module lists its own (``Engine.known_issues``); another package adds more with an
entry point in the ``batchprobe.known_issues`` group, named after the engine, whose object is
a :class:`KnownIssue`, a list of them, or a callable returning either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from importlib.metadata import entry_points
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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
    log_patterns: tuple[str, ...] = Field(
        default=(),
        description="For a 'finding' issue: regexes of which one must also match a line of "
        "the server log (the situation the symptom needs, e.g. a prompt-cache hit the log "
        "reports); the first such line joins the evidence. A pattern with a group named "
        "'prompt_tokens' takes only a line whose count a matched finding's request had "
        "('N prompt tokens'). Empty: the findings alone suffice.",
    )
    affected: str = Field(default="", description="PEP 440 specifier of affected versions.")
    explanation: str
    remedy: str
    fixed_in: str | None = None
    patch: str | None = None
    is_bug: bool = True

    @field_validator("patterns", "log_patterns")
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

    @model_validator(mode="after")
    def _log_patterns_corroborate_findings(self) -> KnownIssue:
        if self.log_patterns and self.where != "finding":
            raise ValueError("log_patterns corroborate findings: only with where='finding'")
        return self

    def affects(self, version: str | None) -> bool:
        """True when ``version`` is affected; an unknown or unparsable version may be."""
        if not self.affected or version is None:
            return True
        try:
            return Version(version) in SpecifierSet(self.affected, prereleases=True)
        except InvalidVersion:
            return True

    def evidence(
        self, lines: list[str], bodies: list[str], log: Sequence[str] = (), limit: int = 5
    ) -> list[str]:
        """The lines (of the log; of the findings for a ``finding`` issue) and bodies that
        match, oldest first, without repeats; for a ``finding`` issue with ``log_patterns``,
        none unless a line of ``log`` matches too, and then that line after them."""
        sources: list[str] = []
        if self.where in ("log", "any", "finding"):
            sources.extend(lines)
        if self.where in ("body", "any"):
            sources.extend(bodies)
        found = _matching(sources, self.patterns, limit)
        if found and self.log_patterns:
            line = _corroborating(log, self.log_patterns, found)
            return [*found[: limit - 1], line] if line is not None else []
        return found


_PROMPT_TOKENS = re.compile(r"\b(\d+) prompt tokens\b")


def _corroborating(log: Sequence[str], patterns: tuple[str, ...], findings: list[str]) -> str | None:
    """The first line of ``log`` a pattern matches, its ``prompt_tokens`` group (where it has
    one) a request size of ``findings``."""
    sizes = {m.group(1) for f in findings for m in _PROMPT_TOKENS.finditer(f)}
    regexes = [re.compile(p) for p in patterns]
    for text in log:
        for regex in regexes:
            match = regex.search(text)
            if match and ("prompt_tokens" not in regex.groupindex
                          or match.group("prompt_tokens") in sizes):
                return text.strip()[:500]
    return None


def _matching(texts: Iterable[str], patterns: tuple[str, ...], limit: int) -> list[str]:
    """The first ``limit`` distinct stripped texts any of ``patterns`` matches, in order."""
    regexes = [re.compile(p) for p in patterns]
    found: list[str] = []
    for text in texts:
        line = text.strip()
        if line and line not in found and any(r.search(line) for r in regexes):
            found.append(line[:500])
            if len(found) == limit:
                break
    return found


KNOWN_ISSUES_GROUP = "batchprobe.known_issues"


def plugin_known_issues(engine_name: str) -> list[KnownIssue]:
    """Known issues other packages register for ``engine_name``."""
    return [
        issue
        for entry in entry_points(group=KNOWN_ISSUES_GROUP)
        if entry.name == engine_name
        for issue in entry_items(entry, KnownIssue)
    ]
