"""Reading a verdict file for `report` and `compare`: every way it can be unreadable, named."""

from __future__ import annotations

import json
from pathlib import Path

from packaging.version import InvalidVersion, Version
from pydantic import ValidationError

from batchprobe.errors import ReportError
from batchprobe.results.models import SCHEMA_VERSION, Report


def _schema_problem(found: object) -> str | None:
    if found is None:
        return "has no schema_version: not a batchprobe verdict file"
    try:
        theirs, ours = Version(str(found)), Version(SCHEMA_VERSION)
    except InvalidVersion:
        return f"has schema_version {found!r}, which is not a version"
    if theirs > ours:
        return (f"was written with verdict schema {found}, newer than the {SCHEMA_VERSION} this "
                "batchprobe reads: upgrade batchprobe")
    if theirs < ours:
        return (f"was written with verdict schema {found}, older than the {SCHEMA_VERSION} this "
                "batchprobe reads: rerun the probe or use the batchprobe that wrote it")
    return None


def _too_deep(path: Path) -> str:
    # A verdict nests a few levels; thousands of '[' or '{' are not one, whatever follows.
    return (f"{path}: not a valid verdict file: its JSON is nested too deeply to read "
            "(a verdict nests only a few levels)")


def load_verdict(path: Path) -> Report:
    """The verdict at ``path``; :class:`ReportError` naming the file and what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read the verdict file ({exc})") from exc
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise ReportError(_too_deep(path)) from exc
    except json.JSONDecodeError as exc:
        hint = "truncated" if exc.pos >= len(text.rstrip()) else "corrupt"
        raise ReportError(
            f"{path}: not valid JSON, the file looks {hint} ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno})"
        ) from exc
    if not isinstance(data, dict):
        raise ReportError(f"{path}: a verdict file holds a JSON object, found {type(data).__name__}")
    problem = _schema_problem(data.get("schema_version"))
    if problem:
        raise ReportError(f"{path}: {problem}")
    try:
        return Report.model_validate(data)
    except RecursionError as exc:
        raise ReportError(_too_deep(path)) from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ReportError(
            f"{path}: does not match the verdict schema {SCHEMA_VERSION}: {where}: "
            f"{first['msg']}{more}"
        ) from exc
