"""The one place where errors become a run status."""

from __future__ import annotations

from batchprobe.errors import (
    BatchprobeError,
    ConfigError,
    EngineDied,
    EngineExitedEarly,
    EngineFailedToStart,
    EngineInstallFailed,
    EngineNotInstalled,
    EngineUnreachable,
    ProbeInterrupted,
)
from batchprobe.results.models import Status

# Most specific first: EngineExitedEarly is an EngineFailedToStart.
_STATUS: tuple[tuple[type[BatchprobeError], Status], ...] = (
    (ConfigError, Status.CONFIG_ERROR),
    (EngineUnreachable, Status.ENGINE_UNREACHABLE),
    (EngineNotInstalled, Status.ENGINE_NOT_INSTALLED),
    (EngineInstallFailed, Status.ENGINE_INSTALL_FAILED),
    (EngineExitedEarly, Status.ENGINE_EXITED_EARLY),
    (EngineFailedToStart, Status.ENGINE_FAILED_TO_START),
    (EngineDied, Status.ENGINE_DIED),
    (ProbeInterrupted, Status.INTERRUPTED),
)


def status_for(exc: BatchprobeError) -> Status:
    return next((status for kind, status in _STATUS if isinstance(exc, kind)), Status.ERROR)
