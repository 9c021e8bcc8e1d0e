"""Helpers for engine tests: the stand-in server's argv and loopback HTTP."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

MINI_SERVER = Path(__file__).with_name("mini_server.py")
DATA = Path(__file__).with_name("data")
# Loopback requests must never go through a proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def mini_cmd(mode: str, tag: str = "", *extra: str) -> list[str]:
    """serve-cmd argv for the stand-in server."""
    return [
        sys.executable, str(MINI_SERVER), "--port", "{port}", "--mode", mode, "--tag", tag, *extra
    ]  # fmt: skip


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
