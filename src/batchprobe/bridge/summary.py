"""``summary.json``: what a bridge execution did, written always (also on rejection)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from batchprobe.errors import BridgeError
from batchprobe.files import write_atomic

__all__ = ["SUMMARY_NAME", "CommandResult", "Status", "Summary", "read_summary", "write_summary"]

SUMMARY_NAME = "summary.json"

Status = Literal["ok", "failed", "timed_out", "rejected", "interrupted", "not_run"]
"""ok: every command exited 0. failed: one exited non-zero (or could not start).
timed_out: the preset's time budget ran out. rejected: validation failed, nothing ran.
interrupted: the executor got SIGINT/SIGTERM. not_run: the executor never ran (the
workflow's publish step writes this when an earlier step, e.g. the install, failed)."""


class CommandResult(BaseModel):
    """One command of the preset and how it ended."""

    model_config = ConfigDict(extra="forbid")
    index: int
    argv: list[str]
    """As templated: ``${ENV:NAME}`` stays unresolved so machine-local facts stay local."""
    exit_code: int | None = None
    """None when it timed out, could not start, or was skipped."""
    duration_s: float = 0.0
    timed_out: bool = False
    skipped: bool = False
    """Not run because an earlier command failed or the time budget was spent."""
    log: str | None = None
    """Log file, relative to the results directory."""


class Summary(BaseModel):
    """The record of one request's execution."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    status: Status
    preset: str | None = None
    params: dict[str, str] = {}
    """Effective parameters, defaults included."""
    nonce: str | None = None
    ref: str | None = None
    error: str | None = None
    """Why validation failed or the run stopped, in one line."""
    error_field: str | None = None
    """The manifest field a rejection names."""
    timeout_s: int | None = None
    commands: list[CommandResult] = []
    result_paths: list[str] = []
    """Result files (verdicts, reports) relative to the results directory."""
    started_at: datetime
    finished_at: datetime

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def write_summary(results_dir: Path, summary: Summary) -> Path:
    """Write ``summary.json`` atomically (temp file + rename) and return its path."""
    target = results_dir / SUMMARY_NAME
    write_atomic(target, summary.model_dump_json(indent=2) + "\n")
    return target


def read_summary(raw: bytes | str, origin: str) -> Summary:
    """Parse a summary; BridgeError (naming ``origin``) when it is not one."""
    try:
        return Summary.model_validate_json(raw)
    except ValidationError as exc:
        raise BridgeError(
            f"{origin} is not a valid bridge summary: {exc.errors()[0]['msg']}"
        ) from exc
