"""Explain a failure from the server log and error bodies.

Known-issue signatures of the engine (filtered by version) come first; when no
known bug matches, the last Python traceback (or the last error lines) of the
log becomes an 'unknown' diagnosis, so a verdict always carries the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from batchprobe.engines._known import plugin_known_issues
from batchprobe.engines._registry import EngineRegistry, get_engine
from batchprobe.results.diagnosis import Diagnosis

TRACEBACK_HEAD = "Traceback (most recent call last):"
_ERROR_LINE = re.compile(r"(?i)\b(error|critical|fatal|exception|failed)\b")
MAX_TRACEBACK_LINES = 12
MAX_ERROR_LINES = 5


def diagnose(
    engine_name: str,
    version: str | None,
    log_text: str,
    error_bodies: Sequence[str] = (),
    *,
    registry: EngineRegistry | None = None,
) -> list[Diagnosis]:
    """Diagnoses for one engine run, most specific first; [] when nothing points to a failure."""
    lines = log_text.splitlines()
    bodies = [body for body in error_bodies if body]
    found = _known(engine_name, version, lines, bodies, registry)
    if not any(d.is_bug for d in found):
        unknown = unknown_failure(lines)
        if unknown is not None:
            found.append(unknown)
    return found


def diagnose_findings(
    engine_name: str, version: str | None, findings: Sequence[str], log_text: str = "",
    *, registry: EngineRegistry | None = None,
) -> list[Diagnosis]:
    """The known issues of the engine that its hard findings ('KIND: message') show, with
    the server log for those that also need a line of it."""
    return _known(engine_name, version, list(findings), [], registry,
                  from_findings=True, log=log_text.splitlines())


def _known(
    engine_name: str, version: str | None, lines: list[str], bodies: list[str],
    registry: EngineRegistry | None, *, from_findings: bool = False, log: Sequence[str] = (),
) -> list[Diagnosis]:
    """The known issues ``lines`` and ``bodies`` show: those read from the log and bodies, or
    (``from_findings``) those read from findings, given as ``lines``, and ``log``."""
    engine = get_engine(engine_name, registry)
    found = []
    for issue in (*engine.known_issues, *plugin_known_issues(engine.name)):
        if from_findings != (issue.where == "finding"):
            continue
        evidence = issue.evidence(lines, bodies, log) if issue.affects(version) else []
        if evidence:
            found.append(
                Diagnosis(
                    issue_id=issue.issue_id,
                    title=issue.title,
                    known=True,
                    evidence=evidence,
                    explanation=issue.explanation,
                    remedy=issue.remedy,
                    fixed_in=issue.fixed_in,
                    patch=issue.patch,
                    is_bug=issue.is_bug,
                )
            )
    return found


def last_traceback(lines: Sequence[str]) -> list[str]:
    """The last Python traceback in ``lines``, ending at its exception line ([] if none)."""
    starts = [i for i, line in enumerate(lines) if TRACEBACK_HEAD in line]
    if not starts:
        return []
    block = [lines[starts[-1]]]
    for line in lines[starts[-1] + 1 :]:
        block.append(line)
        # Frames are indented; the first unindented line is the exception itself.
        if line and not line[0].isspace():
            break
    if len(block) > MAX_TRACEBACK_LINES:
        block = [block[0], "  ...", *block[-(MAX_TRACEBACK_LINES - 2) :]]
    return [line.rstrip() for line in block]


def unknown_failure(lines: Sequence[str]) -> Diagnosis | None:
    """An 'unknown' diagnosis from the last traceback or error lines, if the log has any."""
    evidence = last_traceback(lines)
    if not evidence:
        evidence = [line.strip() for line in lines if _ERROR_LINE.search(line)][-MAX_ERROR_LINES:]
    if not evidence:
        return None
    return Diagnosis(
        issue_id="unknown",
        title=f"unrecognised failure: {evidence[-1][:160]}",
        known=False,
        evidence=evidence,
        explanation="No known-issue signature matched; these are the server's own last error lines.",
        remedy="Read the full server log; if it is an engine bug, report it upstream.",
    )
