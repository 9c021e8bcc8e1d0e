"""The one place the report stage reads why a run stopped early."""

from __future__ import annotations

from batchprobe.results.models import Report


def run_error(report: Report) -> tuple[str | None, str | None]:
    """(one-line message, traceback) of the run's error; (None, None) when there is none."""
    if report.error is None:
        return None, None
    return report.error.message, report.error.traceback
