"""Each request as the judge left it: its status read from ``report.findings``, never re-judged.

One function for every view that marks a request (the HTML grid's cells, the JSONL records,
the request timeline): a hard finding fails it (and names its kinds), a soft one is tolerated
(a numerics flip, greedy divergence), an info one says it was not judged (a path or parameter
the server does not serve, a serial reference that failed its own check, a wrong answer that
never got its reference), and a request no finding names was judged and held.

A finding names its arm and sessions; a request of another arm is also named by the baseline's
info findings about its item (its serial reference failed its own check: the item is not judged
in any arm).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from enum import Enum

from batchprobe.results.findings import Finding, FindingKind
from batchprobe.results.models import Report, SessionResult


class RequestStatus(str, Enum):
    FAILED = "failed"  # a hard finding names it
    SOFT = "soft"  # only soft findings: tolerated, named
    NOT_JUDGED = "not_judged"  # an info finding: not served, no reference, or not run
    OK = "ok"  # no finding names it


@dataclass(frozen=True)
class RequestView:
    """One request's status and the findings that set it (the hard ones when it failed)."""

    status: RequestStatus
    findings: tuple[Finding, ...] = ()

    @property
    def kinds(self) -> tuple[FindingKind, ...]:
        return tuple(dict.fromkeys(f.kind for f in self.findings))

    @property
    def label(self) -> str:
        """``recall miss · stream``, ``flip``, ``not served``, ``not judged``, ``ok``."""
        if self.status is RequestStatus.OK:
            return "ok"
        if self.status is RequestStatus.NOT_JUDGED:
            return "not served" if FindingKind.UNSUPPORTED in self.kinds else "not judged"
        return " · ".join(k.value.replace("_", " ") for k in self.kinds)


def _copy(s: SessionResult) -> int:
    return s.situation.copy_index if s.situation is not None else 0


def _names(f: Finding, s: SessionResult) -> bool:
    """``f`` is about request ``s`` (its session, shape and, for one request, its copy)."""
    if s.session not in f.sessions or (f.shape is not None and f.shape != s.shape):
        return False
    return len(f.sessions) > 1 or f.copy_index == _copy(s)


def view_of(found: list[Finding], s: SessionResult) -> RequestView:
    """The status of ``s`` from the findings that name it."""
    mine = [f for f in found if _names(f, s)]
    for severity, status in (("hard", RequestStatus.FAILED), ("soft", RequestStatus.SOFT),
                             ("info", RequestStatus.NOT_JUDGED)):
        chosen = tuple(f for f in mine if f.severity == severity)
        if chosen:
            return RequestView(status, chosen)
    return RequestView(RequestStatus.OK)


class RequestViews:
    """Every request's view of one report, its findings indexed once."""

    def __init__(self, report: Report) -> None:
        self._by_arm: dict[str, list[Finding]] = defaultdict(list)
        for f in report.findings:
            if f.sessions:
                self._by_arm[f.arm].append(f)
        base = report.arms[0].spec.name if report.arms else None
        # The baseline's items not judged (their serial reference failed its own check).
        self._items = [f for f in self._by_arm.get(base or "", [])
                       if f.kind is FindingKind.NOT_JUDGED and f.shape is not None]
        self._base = base

    def of(self, arm: str, s: SessionResult) -> RequestView:
        found = self._by_arm.get(arm, [])
        if arm != self._base:
            found = found + self._items
        return view_of(found, s)


def request_view(report: Report, arm: str, s: SessionResult) -> RequestView:
    """The status of request ``s`` of ``arm`` (``RequestViews`` for many)."""
    return RequestViews(report).of(arm, s)
