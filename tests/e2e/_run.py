"""Run `batchprobe run` as a user does (a subprocess) and read its verdict file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ENGINE_PROCESS_MARKERS = ("llama-server", "mlx_lm", "vllm-mlx", "vllm_mlx", "transformers serve")


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


def engine_processes(tag: str) -> list[str]:
    """Command lines of live processes that mention ``tag`` (a path unique to one test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if tag in cmdline and state != "Z" and "pytest" not in cmdline:
            found.append(cmdline)
    return found


def sessions(verdict: dict[str, Any], arm: str) -> list[dict[str, Any]]:
    return next(a["sessions"] for a in verdict["arms"] if a["spec"]["name"] == arm)
