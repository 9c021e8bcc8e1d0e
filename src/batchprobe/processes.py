"""Stopping what batchprobe started: a process group plus the processes that escaped it.

A managed engine runs as the leader of its own process group, and every process of one
launch carries ``BATCHPROBE_LAUNCH=<token>`` in its environment. A child that calls
``setsid`` (or double-forks) leaves the group but keeps the variable, so a stop that
signals the group *and* every process marked with the token reaches all of them.

Stdlib only: the watchdog (``batchprobe._watchdog``) imports this in a fresh interpreter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "KILL_GRACE_S",
    "LAUNCH_ENV",
    "TERM_GRACE_S",
    "group_members",
    "launch_processes",
    "pid_alive",
    "stop_group",
    "stop_launch",
]

LAUNCH_ENV = "BATCHPROBE_LAUNCH"
TERM_GRACE_S = 10.0
KILL_GRACE_S = 5.0
_POLL_S = 0.05
_PROC = Path("/proc")


def _stat_fields(path: Path) -> list[str] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; fields resume after the last ')'.
    return text[text.rfind(")") + 2 :].split()


def _has_marker(pid_dir: Path, marker: bytes) -> bool:
    try:
        return marker in (pid_dir / "environ").read_bytes().split(b"\0")
    except OSError:  # another user's process, or gone already
        return False


def _scan_proc(pgid: int | None, token: str | None) -> list[int]:
    marker = f"{LAUNCH_ENV}={token}".encode() if token else None
    me = os.getpid()
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        fields = _stat_fields(entry / "stat")
        if fields is None or fields[0] == "Z":
            continue
        if (pgid is not None and int(fields[2]) == pgid) or (
            marker is not None and _has_marker(entry, marker)
        ):
            found.append(int(entry.name))
    return found


def _scan_ps(pgid: int | None, token: str | None) -> list[int]:
    """Without /proc (macOS): ``ps`` lists groups, and ``-E`` the environment of our processes."""
    try:
        out = subprocess.run(
            ["ps", "-A", "-E", "-ww", "-o", "pid=,pgid=,stat=,command="],
            capture_output=True, text=True, check=False, timeout=10,
        ).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    marker = f"{LAUNCH_ENV}={token}" if token else None
    found = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) < 3 or not parts[0].isdigit() or parts[2].startswith("Z"):
            continue
        pid = int(parts[0])
        in_group = pgid is not None and parts[1] == str(pgid)
        marked = marker is not None and len(parts) == 4 and marker in parts[3].split()
        if pid != os.getpid() and (in_group or marked):
            found.append(pid)
    return found


def launch_processes(pgid: int | None, token: str | None = None) -> list[int]:
    """Live (non-zombie) processes in group ``pgid`` or marked with launch ``token``."""
    if pgid is None and token is None:
        return []
    return _scan_proc(pgid, token) if _PROC.is_dir() else _scan_ps(pgid, token)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in group ``pgid``."""
    return launch_processes(pgid)


def _group_sum(pgid: int, name: str, read: Callable[[str], int]) -> int | None:
    """``read`` of ``/proc/PID/name`` summed over every live process in group ``pgid``; None
    without /proc (macOS) or when the group is gone."""
    if not _PROC.is_dir():
        return None
    total, seen = 0, False
    for pid in group_members(pgid):
        try:
            value = read((_PROC / str(pid) / name).read_text())
        except (OSError, IndexError, ValueError):  # gone between the scan and the read
            continue
        total, seen = total + value, True
    return total if seen else None


def group_rss_bytes(pgid: int) -> int | None:
    """Resident memory of every live process in group ``pgid``, summed."""
    page = os.sysconf("SC_PAGE_SIZE")
    return _group_sum(pgid, "statm", lambda text: int(text.split()[1]) * page)


def _cpu_ticks(stat: str) -> int:
    # The fields after the command name (which may hold spaces): utime, stime are 12th, 13th.
    after = stat.rsplit(")", 1)[1].split()
    return int(after[11]) + int(after[12])


def group_cpu_s(pgid: int) -> float | None:
    """CPU seconds (user and system) every live process in group ``pgid`` has used."""
    ticks = _group_sum(pgid, "stat", _cpu_ticks)
    return None if ticks is None else ticks / os.sysconf("SC_CLK_TCK")


def _signal_all(pgid: int | None, pids: list[int], sig: signal.Signals) -> None:
    if pgid is not None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_gone(
    pgid: int | None, token: str | None, proc: subprocess.Popen[Any] | None, timeout: float
) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None:
            proc.poll()  # reap the leader, or it stays a zombie (not counted, but unreaped)
        if not launch_processes(pgid, token):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


def stop_launch(
    pgid: int | None,
    token: str | None,
    *,
    proc: subprocess.Popen[Any] | None = None,
    grace: float = TERM_GRACE_S,
    kill_grace: float = KILL_GRACE_S,
) -> bool:
    """SIGTERM group ``pgid`` and every process marked ``token``; SIGKILL what is left after
    ``grace`` seconds. True when nothing is left. ``proc`` (the leader) is reaped."""
    try:
        _signal_all(pgid, launch_processes(pgid, token), signal.SIGTERM)
        if _wait_gone(pgid, token, proc, grace):
            return True
    finally:
        # Also reached on a second Ctrl-C while waiting: never leave anything running.
        left = launch_processes(pgid, token)
        if left:
            _signal_all(pgid, left, signal.SIGKILL)
        gone = _wait_gone(pgid, token, proc, kill_grace)
        if proc is not None and proc.poll() is None:
            # Every member is gone but the leader is not reaped yet: it is dying, wait a bit.
            try:
                proc.wait(timeout=kill_grace)
            except subprocess.TimeoutExpired:
                gone = False
    return gone


def stop_group(proc: subprocess.Popen[Any], *, grace: float = TERM_GRACE_S) -> bool:
    """Stop the process group ``proc`` leads (started with ``start_new_session=True``)."""
    return stop_launch(proc.pid, None, proc=proc, grace=grace)


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    if _PROC.is_dir():
        fields = _stat_fields(_PROC / str(pid) / "stat")
        return fields is not None and fields[0] != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
