"""Atomic verdict writing: a reader never sees a half-written file."""

from __future__ import annotations

from pathlib import Path

from batchprobe.errors import OutputError
from batchprobe.files import write_atomic
from batchprobe.results.models import Report


def write_report(report: Report, path: Path) -> None:
    """Write ``report`` to ``path`` via a temporary file in the same folder and a rename;
    :class:`OutputError` naming the path and the reason when it cannot (the file already
    there, if any, stays whole)."""
    try:
        write_atomic(path, report.model_dump_json(indent=2))
    except OSError as exc:
        raise OutputError.from_os(path, exc) from exc


def read_report(path: Path) -> Report:
    return Report.model_validate_json(path.read_text(encoding="utf-8"))


def json_schema() -> dict[str, object]:
    return Report.model_json_schema()
