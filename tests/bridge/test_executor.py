"""The executor runs real processes: exit codes, timeouts, process groups, rejections."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batchprobe.bridge.executor import ExecutorSettings, execute
from batchprobe.bridge.manifest import new_manifest
from batchprobe.bridge.summary import SUMMARY_NAME, Summary

SLEEPER = """\
import os, subprocess, sys, time
from pathlib import Path

def test_sleeps():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(os.environ["PID_FILE"]).write_text(str(child.pid))
    time.sleep(120)
"""


def _write_manifest(path: Path, preset: str, params: dict[str, str]) -> Path:
    manifest = new_manifest(preset, params, ref="abc", requested_by="tester")
    path.write_text(manifest.model_dump_json())
    return path


def _settings(checkout: Path, **env: str) -> ExecutorSettings:
    return ExecutorSettings(
        python=sys.executable, env={**os.environ, **env}, cwd=checkout, grace_s=2.0
    )


def _checkout(tmp_path: Path, name: str, body: str) -> Path:
    checkout = tmp_path / "checkout"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / name).write_text(body)
    return checkout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _wait_for(path: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_env_probe_runs_and_collects_its_result(tmp_path: Path) -> None:
    manifest = _write_manifest(tmp_path / "request.json", "env-probe", {})
    results = tmp_path / "results"
    summary = execute(manifest, results, _settings(tmp_path))
    assert summary.status == "ok", (results / "logs" / "01.log").read_text()
    assert [c.exit_code for c in summary.commands] == [0, 0]
    assert summary.commands[1].argv == ["batchprobe", "bridge", "env-probe", "--output",
                                        "${RESULTS}/env.json"]  # fmt: skip
    assert summary.result_paths == ["env.json"]
    env = json.loads((results / "env.json").read_text())
    assert env["cpu_count"] == os.cpu_count()
    assert "batchprobe" in env["packages"]
    assert "batchprobe" in (results / "logs" / "00.log").read_text()
    on_disk = Summary.model_validate_json((results / SUMMARY_NAME).read_text())
    assert on_disk == summary


def test_a_failing_command_fails_the_run(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path, "test_bad.py", "def test_bad():\n    assert False\n")
    manifest = _write_manifest(tmp_path / "request.json", "pytest-path", {"path": "tests"})
    summary = execute(manifest, tmp_path / "results", _settings(checkout))
    assert summary.status == "failed"
    assert summary.commands[0].exit_code == 1
    assert summary.result_paths == ["junit.xml"]
    assert "exited 1" in (summary.error or "")


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path, "test_sleep.py", SLEEPER)
    pid_file = tmp_path / "pid"
    manifest = _write_manifest(tmp_path / "request.json", "pytest-path", {"path": "tests"})
    settings = _settings(checkout, PID_FILE=str(pid_file)).model_copy(update={"max_seconds": 6.0})
    started = time.monotonic()
    summary = execute(manifest, tmp_path / "results", settings)
    assert time.monotonic() - started < 30
    assert summary.status == "timed_out"
    assert summary.commands[0].timed_out and summary.commands[0].exit_code is None
    assert not _alive(int(pid_file.read_text())), "the grandchild survived the timeout"
    assert "timed out" in (tmp_path / "results" / "logs" / "00.log").read_text()


def test_a_spent_budget_skips_the_remaining_commands(tmp_path: Path) -> None:
    manifest = _write_manifest(tmp_path / "request.json", "env-probe", {})
    settings = _settings(tmp_path).model_copy(update={"max_seconds": 0.0})
    summary = execute(manifest, tmp_path / "results", settings)
    assert summary.status == "timed_out"
    assert all(command.skipped for command in summary.commands)


def test_a_program_that_cannot_start_fails_and_skips_the_rest(tmp_path: Path) -> None:
    manifest = _write_manifest(tmp_path / "request.json", "env-probe", {})
    settings = _settings(tmp_path).model_copy(update={"python": str(tmp_path / "no-python")})
    summary = execute(manifest, tmp_path / "results", settings)
    assert summary.status == "failed"
    assert "could not start" in (summary.error or "")
    assert summary.commands[1].skipped


@pytest.mark.parametrize(
    ("text", "field"),
    [('{"schema_version": 1, "preset": "bash"}', "preset"), ("not json", "manifest")],
)
def test_a_rejected_manifest_runs_nothing_and_says_why(
    tmp_path: Path, text: str, field: str
) -> None:
    (tmp_path / "request.json").write_text(text)
    summary = execute(tmp_path / "request.json", tmp_path / "results", _settings(tmp_path))
    assert summary.status == "rejected"
    assert summary.error_field == field
    assert summary.commands == []
    assert not (tmp_path / "results" / "logs").exists()
    assert (tmp_path / "results" / SUMMARY_NAME).is_file()


def test_a_missing_environment_variable_is_a_rejection(tmp_path: Path) -> None:
    manifest = _write_manifest(tmp_path / "request.json", "url-niah", {})
    env = {k: v for k, v in os.environ.items() if k != "BATCHPROBE_BASE_URL"}
    settings = ExecutorSettings(python=sys.executable, env=env, cwd=tmp_path)
    summary = execute(manifest, tmp_path / "results", settings)
    assert summary.status == "rejected"
    assert "BATCHPROBE_BASE_URL" in (summary.error or "")
    assert summary.error_field is None


def test_sigterm_interrupts_the_run_and_kills_its_children(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path, "test_sleep.py", SLEEPER)
    pid_file = tmp_path / "pid"
    manifest = _write_manifest(tmp_path / "request.json", "pytest-path", {"path": "tests"})
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "batchprobe", "bridge", "execute", "--manifest", str(manifest),
            "--results", str(results)]  # fmt: skip
    executor = subprocess.Popen(
        argv, cwd=checkout, env={**os.environ, "PID_FILE": str(pid_file)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for(pid_file)
        executor.send_signal(signal.SIGTERM)
        output, _ = executor.communicate(timeout=60)
    finally:
        if executor.poll() is None:
            os.killpg(executor.pid, signal.SIGKILL)
            executor.wait()
    assert executor.returncode == 1, output
    summary = Summary.model_validate_json((results / SUMMARY_NAME).read_text())
    assert summary.status == "interrupted"
    assert not _alive(int(pid_file.read_text()))
