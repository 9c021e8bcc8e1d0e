"""Helpers for engine tests: the stand-in server's argv, loopback HTTP, process checks."""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

MINI_SERVER = Path(__file__).with_name("mini_server.py")
DATA = Path(__file__).with_name("data")
# Loopback requests must never go through a proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def mini_cmd(mode: str, tag: str = "") -> list[str]:
    """serve-cmd argv for the stand-in server."""
    return [sys.executable, str(MINI_SERVER), "--port", "{port}", "--mode", mode, "--tag", tag]


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


def post_json(url: str, body: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with _OPENER.open(request, timeout=timeout) as reply:
        data: dict[str, Any] = json.loads(reply.read())
        return data


def get_text(url: str, timeout: float = 30.0) -> tuple[int, str]:
    with _OPENER.open(url, timeout=timeout) as reply:
        return int(reply.status), reply.read().decode()


def pid_alive(pid: int) -> bool:
    """True if ``pid`` runs (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
