"""Server processes in their own process group, stopped SIGTERM -> wait -> SIGKILL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from batchprobe.engines._types import LOOPBACK

TERM_GRACE_S = 10.0
KILL_GRACE_S = 5.0


def reserve_port(host: str = LOOPBACK) -> int:
    """A port that was free on ``host`` a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def start_group(
    argv: Sequence[str], log_path: Path, env: Mapping[str, str], cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new session/process group, output to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        log.write(f"# argv: {list(argv)}\n".encode())
        log.flush()
        # The child holds its own copy of the descriptor; ours can close at once.
        return subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in group ``pgid``."""
    proc = Path("/proc")
    if not proc.is_dir():
        return _members_by_signal(pgid)
    members = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(entry / "stat")
            if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def _stat_fields(path: Path) -> list[str] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; fields resume after the last ')'.
    return text[text.rfind(")") + 2 :].split()


def _members_by_signal(pgid: int) -> list[int]:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        return [pgid]
    return [pgid]


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _wait_empty(proc: subprocess.Popen[bytes], pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if not group_members(pgid):
            # The leader may be a zombie now (not a member any more): reap it.
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                return False
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def stop_group(proc: subprocess.Popen[bytes], *, grace: float = TERM_GRACE_S) -> None:
    """SIGTERM the whole group, wait up to ``grace``, then SIGKILL what is left."""
    pgid = proc.pid  # start_new_session makes the leader's pid the group id
    try:
        _signal_group(pgid, signal.SIGTERM)
        if _wait_empty(proc, pgid, grace):
            return
    finally:
        # Also reached on a second Ctrl-C while waiting: never leave the group running.
        if group_members(pgid):
            _signal_group(pgid, signal.SIGKILL)
            _wait_empty(proc, pgid, KILL_GRACE_S)
        proc.poll()
