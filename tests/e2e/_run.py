"""Run `batchprobe run` as a user does (a subprocess) and read its verdict file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def batchprobe_run(
    args: list[str], output: Path, timeout: float = 900
) -> tuple[int, dict[str, Any], str]:
    """(exit code, the verdict file as JSON, stdout + stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "batchprobe", "run", *args, "--output", str(output)],
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "160"},
    )
    return proc.returncode, json.loads(output.read_text()), proc.stdout + proc.stderr


def sessions(verdict: dict[str, Any], arm: str) -> list[dict[str, Any]]:
    return next(a["sessions"] for a in verdict["arms"] if a["spec"]["name"] == arm)


def expected_exit(verdict: dict[str, Any]) -> int:
    """The exit code a verdict implies: a crash (exit 1 with an "error" verdict) fails it."""
    return {"PASS": 0, "FAIL": 1}.get(verdict["verdict"]["outcome"], 2)
