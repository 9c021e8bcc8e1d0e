"""The batchprobe exception hierarchy.

Every failure batchprobe reports on purpose is one of these; foreign exceptions
(aiohttp, OSError, pydantic) are translated where they enter, raised ``from`` the
original, and turned into exit codes and one clear line at the CLI boundary only.

    BatchprobeError
    ├── ConfigError            bad user input: names the field and the allowed values
    ├── EngineError            anything about the server under test
    │   ├── EngineUnreachable      nothing answers at the URL
    │   ├── EngineNotInstalled     a managed engine has no environment yet
    │   ├── EngineInstallFailed    building its environment failed
    │   ├── EngineFailedToStart    launched but never became ready
    │   │   └── EngineExitedEarly      ... because the process exited
    │   └── EngineDied             was ready, then stopped answering
    │       └── EngineStalled          ... alive, but generating nothing (a dead worker thread)
    ├── ProbeInterrupted       SIGINT/SIGTERM during a run
    ├── ReportError            a verdict file that cannot be read (corrupt, truncated, newer)
    │   └── NotComparable          verdicts of different plans given to `compare`
    ├── OutputError            a file batchprobe writes cannot be written (a verdict, a report,
    │                          a comparison): names the path and the OS's reason
    └── BridgeError            the git-bus bridge
        └── ManifestError          a request manifest failed validation
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

__all__ = [
    "BatchprobeError",
    "BridgeError",
    "ConfigError",
    "EngineDied",
    "EngineError",
    "EngineExitedEarly",
    "EngineFailedToStart",
    "EngineInstallFailed",
    "EngineNotInstalled",
    "EngineStalled",
    "EngineUnreachable",
    "ManifestError",
    "NotComparable",
    "OutputError",
    "ProbeInterrupted",
    "ReportError",
]


class BatchprobeError(Exception):
    """Base class of every error batchprobe raises on purpose."""


class ConfigError(BatchprobeError):
    """Invalid user input. The message names the field and what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")

    @classmethod
    def from_validation(cls, exc: ValidationError) -> ConfigError:
        """The first problem of a pydantic validation, named by its field (the CLI spells the
        field as its option: ``min_speedup`` is ``--min-speedup``)."""
        first = exc.errors()[0]
        names = [p for p in first["loc"] if isinstance(p, str)]
        message = first["msg"].removeprefix("Value error, ")
        got = first.get("input")
        if not isinstance(got, (dict, list)) and repr(got) not in message:
            message += f" (got {got!r})"
        return cls(names[-1] if names else "config", message)


class EngineError(BatchprobeError):
    """The server under test failed. ``log_tail`` holds its last log lines when known."""

    def __init__(self, message: str, *, log_tail: str | None = None) -> None:
        self.log_tail = log_tail
        super().__init__(message)


class EngineUnreachable(EngineError):
    """Nothing answered at the base URL."""


class EngineNotInstalled(EngineError):
    """A managed engine has no environment; ``install_command`` creates it."""

    def __init__(self, message: str, *, install_command: list[str]) -> None:
        self.install_command = install_command
        super().__init__(message)


class EngineInstallFailed(EngineError):
    """Creating an engine's environment failed."""


class EngineFailedToStart(EngineError):
    """A launched engine never became ready. ``reproduce`` is the exact argv."""

    def __init__(
        self, message: str, *, log_tail: str | None = None, reproduce: list[str] | None = None
    ) -> None:
        self.reproduce = reproduce
        super().__init__(message, log_tail=log_tail)


class EngineExitedEarly(EngineFailedToStart):
    """The engine process exited before it became ready."""


class EngineDied(EngineError):
    """The engine was ready and then stopped answering."""


class EngineStalled(EngineDied):
    """The engine's process is alive and accepts requests, but nothing generates any more: a
    request timed out, a 1-token request got no token and no other stream moved meanwhile."""


class ProbeInterrupted(BatchprobeError):
    """The run was interrupted by a signal; the verdict file says how far it got."""


class BridgeError(BatchprobeError):
    """Failure in the git-bus bridge."""


class ManifestError(BridgeError):
    """A bridge manifest was rejected. ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class ReportError(BatchprobeError):
    """A verdict file given to `report` or `compare` cannot be read. Names the file."""


class NotComparable(ReportError):
    """Verdicts from different plans (items, arms, workloads). ``fields`` are those that differ."""

    def __init__(self, message: str, *, fields: list[str]) -> None:
        self.fields = fields
        super().__init__(message)


class OutputError(BatchprobeError):
    """A file batchprobe writes (a verdict, a report, a comparison) cannot be written: a
    missing or read-only folder, a full disk. ``path`` is the file, ``reason`` the OS's words
    (``No space left on device``). Raised by the callers of the atomic write helper
    (:mod:`batchprobe.files`), from the ``OSError``; the file's old content, if any, is whole."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot write {path}: {reason}")

    @classmethod
    def from_os(cls, path: Path, exc: OSError) -> OutputError:
        return cls(path, exc.strerror or str(exc) or type(exc).__name__)
