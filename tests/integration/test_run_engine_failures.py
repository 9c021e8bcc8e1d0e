"""`batchprobe run --engine serve-cmd` when the engine cannot start or dies mid-run."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DYING_SERVER = Path(__file__).with_name("dying_server.py")


def _run(tmp_path: Path, serve_cmd: str, *extra: str) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / "v.json"
    done = subprocess.run(
        [sys.executable, "-m", "batchprobe", "run", "--engine", "serve-cmd",
         "--serve-cmd", serve_cmd, "--model", "fake", "--workloads", "decode",
         "--sessions", "2", "--max-tokens", "16", "--cache-dir", str(tmp_path / "cache"),
         "--shapes", "burst", "--output", str(out), *extra],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.returncode, done.stderr, json.loads(out.read_text())


def _not_executable(tmp_path: Path) -> str:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    return str(script)


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        (lambda tmp: str(tmp / "no-such-server"), "No such file or directory"),
        (_not_executable, "Permission denied"),
    ],
    ids=["not-found", "not-executable"],
)
def test_a_program_that_cannot_start_is_engine_failed_to_start(
    tmp_path: Path, program: Any, reason: str
) -> None:
    argv = [program(tmp_path), "--port", "{port}"]
    code, stderr, data = _run(tmp_path, shlex.join(argv))
    assert code == 2, stderr
    assert "Traceback" not in stderr
    # One message (the console may wrap it), naming the program and why.
    assert stderr.count("error:") == 1 and stderr.count("cannot start") == 1
    assert reason in " ".join(stderr.split())
    assert data["status"] == "engine_failed_to_start"
    assert reason in data["error"]["message"]
    assert f"argv: {argv[0]} --port " in data["error"]["message"]
    assert data["verdict"]["outcome"] == "INCONCLUSIVE"


def test_an_engine_that_dies_mid_run_leaves_exit_code_and_log_tail(tmp_path: Path) -> None:
    serve = shlex.join(
        [sys.executable, str(DYING_SERVER), "--port", "{port}",
         "--fault", "exit_after", "--exit-after", "3"]
    )  # fmt: skip
    code, stderr, data = _run(tmp_path, serve, "--arms", "batching@2")
    assert code == 1, stderr  # a server dead after an arm is a hard failure
    assert data["status"] == "engine_died" and data["verdict"]["outcome"] == "FAIL"
    arm = data["arms"][0]
    assert arm["engine_exit_code"] == 3 and arm["engine_pid"] and arm["engine_launch"]
    assert "exited with code 3" in data["error"]["message"]
    assert data["log_tail"] and "KV cache block table corrupted" in data["log_tail"]
    (diagnosis,) = data["diagnoses"]
    assert any("KV cache block table corrupted" in line for line in diagnosis["evidence"])
