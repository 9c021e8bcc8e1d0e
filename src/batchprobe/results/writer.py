"""Atomic verdict writing: a reader never sees a half-written file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from batchprobe.results.models import Report


def write_report(report: Report, path: Path) -> None:
    """Write ``report`` to ``path`` via a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = report.model_dump_json(indent=2)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        # After the rename this is a no-op; before it, no temp file is left behind.
        Path(tmp).unlink(missing_ok=True)


def read_report(path: Path) -> Report:
    return Report.model_validate_json(path.read_text(encoding="utf-8"))


def json_schema() -> dict[str, object]:
    return Report.model_json_schema()
