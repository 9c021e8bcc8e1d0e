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

# Looked up along the error's MRO, so the nearest class wins (EngineExitedEarly is an
# EngineFailedToStart) whatever the order here, and a new subclass inherits its parent's status.
_STATUS: dict[type, Status] = {
    BatchprobeError: Status.ERROR,
    ConfigError: Status.CONFIG_ERROR,
    EngineUnreachable: Status.ENGINE_UNREACHABLE,
    EngineNotInstalled: Status.ENGINE_NOT_INSTALLED,
    EngineInstallFailed: Status.ENGINE_INSTALL_FAILED,
    EngineExitedEarly: Status.ENGINE_EXITED_EARLY,
    EngineFailedToStart: Status.ENGINE_FAILED_TO_START,
    EngineDied: Status.ENGINE_DIED,
    ProbeInterrupted: Status.INTERRUPTED,
}


def status_for(exc: BatchprobeError) -> Status:
    return next(_STATUS[k] for k in type(exc).__mro__ if k in _STATUS)
