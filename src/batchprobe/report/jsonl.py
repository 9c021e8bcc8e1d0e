"""JSON Lines: one record per request of the verdict, with its timings, situation, self-check,
its judged status and the findings that name it (``report.findings`` through
``judge.views``, never re-judged here)."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict

from batchprobe.judge.views import RequestStatus, RequestViews
from batchprobe.results.findings import Finding
from batchprobe.results.models import ArmResult, Report, SessionResult
from batchprobe.results.shapes import SelfCheck, Situation

# 2: ``status`` (the judged status, from the findings) replaces ``outcome`` (what the answer
# showed on its own: a refused request read "error", an unjudged miss "miss").
REQUEST_RECORD_VERSION = 2


class FindingRef(BaseModel):
    """A finding as a request's record names it."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    check: str
    severity: str
    sources: list[int]
    message: str


class RequestRecord(BaseModel):
    """One request: where it ran, when, what it answered and what was found about it."""

    model_config = ConfigDict(extra="forbid")

    record_version: int = REQUEST_RECORD_VERSION
    run_id: str
    arm: str
    role: str
    n: int
    request_id: str
    workload: str
    session: int
    shape: str
    status: RequestStatus
    failed: list[str]  # status failed: the kinds of its hard findings
    error_kind: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    start_s: float
    first_token_s: float | None
    last_token_s: float | None
    end_s: float
    ttft_s: float | None
    e2e_s: float
    chunks: int
    situation: Situation | None
    check: SelfCheck | None
    cross_talk_from: list[int]
    findings: list[FindingRef]


def findings_of(report: Report, arm: str, session: int) -> list[Finding]:
    """The findings of ``arm`` that name ``session``."""
    return [f for f in report.findings if f.arm == arm and session in f.sessions]


def request_record(
    report: Report, arm: ArmResult, s: SessionResult, views: RequestViews | None = None
) -> RequestRecord:
    found = findings_of(report, arm.spec.name, s.session)
    view = (views or RequestViews(report)).of(arm.spec.name, s)
    failed = [k.value for k in view.kinds] if view.status is RequestStatus.FAILED else []
    return RequestRecord(
        run_id=report.run_id, arm=arm.spec.name, role=arm.spec.role, n=arm.spec.concurrency,
        request_id=s.request_id, workload=s.workload, session=s.session, shape=s.shape,
        status=view.status, failed=failed, error_kind=s.error.kind.value if s.error else None,
        finish_reason=s.finish_reason, prompt_tokens=s.prompt_tokens,
        completion_tokens=s.completion_tokens, cached_tokens=s.cached_tokens,
        start_s=s.start_s, first_token_s=s.first_token_s, last_token_s=s.last_token_s,
        end_s=s.end_s, ttft_s=s.ttft_s, e2e_s=s.e2e_s, chunks=len(s.chunk_ends),
        situation=s.situation, check=s.check, cross_talk_from=s.cross_talk_from,
        findings=[FindingRef(kind=f.kind.value, check=f.check, severity=f.severity,
                             sources=f.sources, message=f.message) for f in found],
    )  # fmt: skip


def render_jsonl(report: Report) -> str:
    views = RequestViews(report)
    lines = [request_record(report, arm, s, views).model_dump_json()
             for arm in report.arms for s in arm.sessions]
    return "".join(line + "\n" for line in lines)


def read_jsonl(text: str) -> list[RequestRecord]:
    """The records of a ``render_jsonl`` text (each line validated)."""
    return [RequestRecord.model_validate(json.loads(line)) for line in text.splitlines() if line]


class JsonlRenderer:
    name = "jsonl"
    suffix = ".jsonl"

    def render(self, report: Report) -> str:
        return render_jsonl(report)


RENDERER = JsonlRenderer()
