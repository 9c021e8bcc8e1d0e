"""Atomic verdict writing: a reader never sees a half-written file."""

from __future__ import annotations

from pathlib import Path

from batchprobe.files import write_atomic
from batchprobe.results.models import Report


def write_report(report: Report, path: Path) -> None:
    """Write ``report`` to ``path`` via a temporary file in the same folder and a rename."""
    write_atomic(path, report.model_dump_json(indent=2))


def read_report(path: Path) -> Report:
    return Report.model_validate_json(path.read_text(encoding="utf-8"))


def json_schema() -> dict[str, object]:
    return Report.model_json_schema()
