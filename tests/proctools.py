"""Process checks for tests: which processes still run (read from /proc)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True if ``pid`` runs (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def procs_with(tag: str) -> list[int]:
    """Live processes whose command line contains ``tag``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if tag in cmdline and pid_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def escaped(tag: str, session: int, exclude: tuple[int, ...] = ()) -> list[int]:
    """Live processes with ``tag`` in their command line that have left ``session``."""
    found = []
    for pid in procs_with(tag):
        if pid in exclude:
            continue
        try:
            if os.getsid(pid) != session:
                found.append(pid)
        except ProcessLookupError:
            continue
    return found


def wait_escaped(
    tag: str, session: int, exclude: tuple[int, ...] = (), timeout: float = 30.0
) -> list[int]:
    """:func:`escaped`, once at least one has left (a child calls setsid after starting)."""
    deadline = time.monotonic() + timeout
    while not escaped(tag, session, exclude) and time.monotonic() < deadline:
        time.sleep(0.05)
    return escaped(tag, session, exclude)
