"""A managed engine never outlives `batchprobe run`: SIGKILL, hang-up, Ctrl-C bursts, setsid.

The engine is the fake server launched through ``--engine serve-cmd`` by a wrapper that
first starts a child calling ``setsid`` (it leaves the engine's process group), so every
test also shows that escapee being stopped. Processes are checked through /proc.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.engines import doctor, launch_processes, stale_launches
from proctools import pid_alive, procs_with, wait_escaped

SETSID_SERVER = Path(__file__).with_name("setsid_server.py")
GONE_WITHIN_S = 8.0


def _serve_cmd(tag: str) -> str:
    return shlex.join(
        [sys.executable, str(SETSID_SERVER), tag, "--host", "127.0.0.1", "--port", "{port}",
         "--ttft-ms", "10", "--itl-ms", "40", "--batching", "serial"]
    )  # fmt: skip


def _start_run(tmp_path: Path, tag: str) -> tuple[subprocess.Popen[str], Path]:
    out = tmp_path / "v.json"
    probe = subprocess.Popen(
        [sys.executable, "-m", "batchprobe", "run", "--engine", "serve-cmd",
         "--serve-cmd", _serve_cmd(tag), "--model", "fake", "--workloads", "decode",
         "--sessions", "2", "--max-tokens", "64", "--arms", "batching@1,batching@2",
         "--cache-dir", str(tmp_path / "cache"), "--output", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # a signal to its group must not reach pytest
    )  # fmt: skip
    return probe, out


def _running_arm(probe: subprocess.Popen[str], out: Path, tag: str) -> dict[str, Any]:
    """The first arm once its engine (and the setsid'd child) are up and recorded."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert probe.poll() is None, probe.communicate()[1]
        if out.exists():
            arms = json.loads(out.read_text())["arms"]
            # The engine and its setsid'd child (batchprobe's own argv holds the tag too).
            tagged = [p for p in procs_with(tag) if p != probe.pid]
            if arms and arms[0].get("engine_pid") and len(tagged) == 2:
                arm: dict[str, Any] = arms[0]
                return arm
        time.sleep(0.1)
    pytest.fail("the engine never came up")


def _escapee(probe: subprocess.Popen[str], tag: str, engine_pid: int) -> int:
    # batchprobe's own argv holds the tag, and it has a session of its own too.
    (child,) = wait_escaped(tag, engine_pid, exclude=(probe.pid,))
    assert child != engine_pid
    return child


def _wait_all_gone(pids: list[int], tag: str, token: str) -> None:
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids) and not procs_with(tag):
            break
        time.sleep(0.1)
    assert [p for p in pids if pid_alive(p)] == []
    assert procs_with(tag) == []
    assert launch_processes(None, token) == []


def test_sigkill_of_batchprobe_leaves_no_engine_and_no_setsid_child(tmp_path: Path) -> None:
    tag = f"sigkill-{uuid.uuid4()}"
    probe, out = _start_run(tmp_path, tag)
    arm = _running_arm(probe, out, tag)
    engine, child = arm["engine_pid"], _escapee(probe, tag, arm["engine_pid"])
    assert arm["engine_pgid"] == engine and os.getpgid(child) != engine  # it did escape
    probe.kill()
    probe.communicate(timeout=10)
    _wait_all_gone([engine, child], tag, arm["engine_launch"])


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM])
def test_hangup_quit_and_term_end_the_run_as_interrupted(
    tmp_path: Path, sig: signal.Signals
) -> None:
    tag = f"{sig.name}-{uuid.uuid4()}"
    probe, out = _start_run(tmp_path, tag)
    arm = _running_arm(probe, out, tag)
    engine, child = arm["engine_pid"], _escapee(probe, tag, arm["engine_pid"])
    probe.send_signal(sig)
    _, stderr = probe.communicate(timeout=30)
    assert probe.returncode == 2, stderr
    data = json.loads(out.read_text())
    assert data["status"] == "interrupted" and data["verdict"]["outcome"] == "INCONCLUSIVE"
    assert data["arms"][0]["state"] == "interrupted" and data["finished_at"] is not None
    _wait_all_gone([engine, child], tag, arm["engine_launch"])
    assert list((tmp_path / "cache" / "launches").glob("*.json")) == []  # a clean stop


def test_a_burst_of_sigints_is_one_interrupt(tmp_path: Path) -> None:
    tag = f"burst-{uuid.uuid4()}"
    probe, out = _start_run(tmp_path, tag)
    arm = _running_arm(probe, out, tag)
    engine, child = arm["engine_pid"], _escapee(probe, tag, arm["engine_pid"])
    while probe.poll() is None:  # Ctrl-C held down, through teardown and summary
        probe.send_signal(signal.SIGINT)
        time.sleep(0.02)
    _, stderr = probe.communicate(timeout=30)
    assert probe.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert json.loads(out.read_text())["status"] == "interrupted"
    _wait_all_gone([engine, child], tag, arm["engine_launch"])


def test_doctor_lists_and_reaps_a_launch_whose_batchprobe_and_watchdog_died(
    tmp_path: Path,
) -> None:
    tag = f"stale-{uuid.uuid4()}"
    probe, out = _start_run(tmp_path, tag)
    arm = _running_arm(probe, out, tag)
    token = arm["engine_launch"]
    engine, child = arm["engine_pid"], _escapee(probe, tag, arm["engine_pid"])
    (watchdog,) = procs_with(token)  # only its argv holds the token; the rest, their env
    os.kill(watchdog, signal.SIGKILL)  # both killers of the escapee are gone ...
    probe.kill()
    probe.communicate(timeout=10)
    deadline = time.monotonic() + GONE_WITHIN_S
    while pid_alive(engine) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(engine)  # PR_SET_PDEATHSIG took the leader with batchprobe
    assert pid_alive(child)  # ... so the setsid'd child is left: a stale launch
    cache = tmp_path / "cache"
    (stale,) = stale_launches(cache)
    assert stale.record.token == token and stale.pids == [child]
    listed = CliRunner().invoke(main, ["engines", "doctor", "--cache-dir", str(cache)])
    assert listed.exit_code == 1 and "stale launch" in listed.output
    assert pid_alive(child)  # listing alone stops nothing
    checks = doctor(cache, reap=True)
    (reaped,) = [c for c in checks if c.subject == "stale launch"]
    assert reaped.ok and f"reaped pids {child}" in reaped.detail
    _wait_all_gone([child], tag, token)
    assert stale_launches(cache) == []
    assert list((cache / "launches").glob("*.json")) == []
