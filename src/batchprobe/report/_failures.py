"""The failures view: one row per wrong session, from ``report.findings``, linked by anchor to
the session's cell in the grid and to its source session's.

A finding names its arm and its sessions by index; the request it is about is the arm's
session of that index (and shape, where the finding names one). Rows are the hard findings;
the soft ones are listed apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchprobe.results.findings import Finding
from batchprobe.results.models import Report, SessionResult


def cell_id(s: SessionResult) -> str:
    """The grid cell's anchor of one request."""
    copy = s.situation.copy_index if s.situation else 0
    return f"cell-{s.arm}-{s.workload}-s{s.session}-{copy}"


def session_of(report: Report, arm: str, session: int, shape: str | None = None
               ) -> SessionResult | None:
    """The request a finding's (arm, session) names: its first send, of its shape if given."""
    found = report.arm(arm)
    if found is None:
        return None
    matches = [s for s in found.sessions if s.session == session]
    return next((s for s in matches if shape is None or s.shape == shape),
                matches[0] if matches else None)


@dataclass(frozen=True)
class Link:
    text: str
    anchor: str | None  # None: no cell to link to (the session is not in the report)


@dataclass(frozen=True)
class FailureRow:
    anchor: str  # this row's own id
    n: int | None
    arm: str
    shape: str | None
    session: Link
    sources: list[Link]
    first_bad_chunk: int | None
    evidence: str
    check: str
    kind: str
    message: str


def _link(report: Report, arm: str, session: int, shape: str | None) -> Link:
    s = session_of(report, arm, session, shape)
    return Link(f"s{session}", cell_id(s) if s is not None else None)


def _rows(report: Report, finding: Finding, index: int) -> list[FailureRow]:
    arm = report.arm(finding.arm)
    n = finding.step if finding.step is not None else (arm.spec.concurrency if arm else None)
    sessions = finding.sessions or [-1]
    rows = []
    for session in sessions:
        s = session_of(report, finding.arm, session, finding.shape) if session >= 0 else None
        check = s.check if s is not None else None
        rows.append(FailureRow(
            anchor=f"failure-{index}-{session}",
            n=n, arm=finding.arm, shape=finding.shape,
            session=_link(report, finding.arm, session, finding.shape) if session >= 0
            else Link("-", None),
            sources=[_link(report, finding.arm, src, None) for src in finding.sources],
            first_bad_chunk=check.token if check is not None and not check.passed else None,
            evidence=finding.evidence or (check.detail or "" if check is not None else ""),
            check=finding.check, kind=finding.kind.value, message=finding.message,
        ))  # fmt: skip
    return rows


def failure_rows(report: Report) -> list[FailureRow]:
    """One row per wrong session of every hard finding, ordered by N, arm and shape (within
    those, in the order the judge found them)."""
    rows = [row for i, f in enumerate(report.findings) if f.hard for row in _rows(report, f, i)]
    return sorted(rows, key=lambda r: (r.n or 0, r.arm, r.shape or ""))


def soft_findings(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.severity == "soft"]
