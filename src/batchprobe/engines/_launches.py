"""The registry of live engine launches: one small file per launch under the cache.

Written (atomically) when an engine starts and removed when it is stopped cleanly, so a
record whose owner (the batchprobe process) is gone names an engine that may have
outlived it. ``engines doctor`` lists such stale launches and, asked to, reaps them; the
next ``launch`` reaps them too. Reaping signals only processes that carry the launch's
token in their environment, so a recycled pid or group id is never hit.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from batchprobe.files import write_atomic
from batchprobe.processes import launch_processes, pid_alive, stop_launch

LAUNCHES = "launches"
_REAP_GRACE_S = 5.0


class LaunchRecord(BaseModel):
    """What is needed to find (and stop) one launch's processes later."""

    model_config = ConfigDict(extra="forbid")

    token: str
    owner_pid: int
    owner_start: str | None = None
    """The owner's start time (Linux ``/proc`` ticks), so a recycled pid is not taken for it."""
    engine: str
    engine_pid: int
    engine_pgid: int
    argv: list[str]
    log_path: str
    started_at: str


class StaleLaunch(BaseModel):
    """A record whose owner is gone, with the processes of it still running."""

    model_config = ConfigDict(extra="forbid")

    record: LaunchRecord
    pids: list[int]


def _start_time(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()[19]


def _folder(cache: Path) -> Path:
    return cache / LAUNCHES


def record_launch(
    cache: Path, *, token: str, engine: str, pid: int, argv: list[str], log_path: Path
) -> LaunchRecord:
    """Write the record of a launch this process owns."""
    record = LaunchRecord(
        token=token, owner_pid=os.getpid(), owner_start=_start_time(os.getpid()), engine=engine,
        engine_pid=pid, engine_pgid=pid, argv=argv, log_path=str(log_path),
        started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )  # fmt: skip
    write_atomic(_folder(cache) / f"{token}.json", record.model_dump_json(indent=2))
    return record


def forget_launch(cache: Path, token: str) -> None:
    (_folder(cache) / f"{token}.json").unlink(missing_ok=True)


def _records(cache: Path) -> list[LaunchRecord]:
    records = []
    for path in sorted(_folder(cache).glob("*.json")):
        try:
            records.append(LaunchRecord.model_validate_json(path.read_text()))
        except (OSError, ValidationError):
            continue  # half a record cannot name anything to stop
    return records


def _owner_alive(record: LaunchRecord) -> bool:
    if not pid_alive(record.owner_pid):
        return False
    return record.owner_start is None or _start_time(record.owner_pid) == record.owner_start


def stale_launches(cache: Path) -> list[StaleLaunch]:
    """Launches whose owner is gone; records with nothing left running are removed."""
    stale = []
    for record in _records(cache):
        if _owner_alive(record):
            continue
        pids = launch_processes(None, record.token)
        if pids:
            stale.append(StaleLaunch(record=record, pids=pids))
        else:
            forget_launch(cache, record.token)
    return stale


def reap_stale(cache: Path) -> list[StaleLaunch]:
    """Stop every stale launch's processes (by token only) and remove its record."""
    stale = stale_launches(cache)
    for item in stale:
        if stop_launch(None, item.record.token, grace=_REAP_GRACE_S):
            forget_launch(cache, item.record.token)
    return stale
