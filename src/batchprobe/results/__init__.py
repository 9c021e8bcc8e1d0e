"""Typed results: the verdict file's models, atomic writing, JSON Schema."""

from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.findings import Finding, FindingKind, Judged
from batchprobe.results.models import (
    SCHEMA_VERSION,
    ArmComparison,
    ArmMetrics,
    ArmResult,
    ArmSpec,
    Distribution,
    Divergence,
    Environment,
    Outcome,
    Report,
    RunConfig,
    RunError,
    SessionOutcome,
    SessionResult,
    Status,
    Verdict,
)
from batchprobe.results.thresholds import Thresholds
from batchprobe.results.writer import json_schema, read_report, write_report

__all__ = [
    "SCHEMA_VERSION",
    "ArmComparison",
    "ArmMetrics",
    "ArmResult",
    "ArmSpec",
    "Diagnosis",
    "Distribution",
    "Divergence",
    "Environment",
    "Finding",
    "FindingKind",
    "Judged",
    "Outcome",
    "Report",
    "RunConfig",
    "RunError",
    "SessionOutcome",
    "SessionResult",
    "Status",
    "Thresholds",
    "Verdict",
    "json_schema",
    "read_report",
    "write_report",
]
