"""The one atomic-write helper and the one stop-a-process-group helper."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchprobe import processes
from batchprobe.files import atomic_path, write_atomic
from batchprobe.processes import LAUNCH_ENV, launch_processes, stop_group, stop_launch
from proctools import pid_alive, procs_with, wait_escaped


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_write_atomic_replaces_with_the_umask_mode_and_leaves_no_temp(
    tmp_path: Path, umask_022: None
) -> None:
    path = tmp_path / "sub" / "verdict.json"
    write_atomic(path, "first")
    write_atomic(path, b"second")
    assert path.read_text() == "second"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's 0600
    assert sorted(p.name for p in path.parent.iterdir()) == ["verdict.json"]


def test_a_failed_atomic_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(path) as staging:
        staging.write_text("half")
        raise RuntimeError("checksum mismatch")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.gguf"]


def _sleeper(tag: str, *, setsid: bool = False, ignore_term: bool = False) -> str:
    code = "import os, signal, time\n"
    code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else ""
    code += "os.setsid()\n" if setsid else ""
    return code + "time.sleep(3600)\n"


def _group(tag: str, token: str | None = None) -> subprocess.Popen[bytes]:
    """A leader, a child in its group and a child that left it with setsid."""
    parent = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {_sleeper(tag)!r}, {tag!r}])\n"
        f"subprocess.Popen([sys.executable, '-c', {_sleeper(tag, setsid=True)!r}, {tag!r}])\n"
        "time.sleep(3600)\n"
    )
    env = dict(os.environ, **({LAUNCH_ENV: token} if token else {}))
    proc = subprocess.Popen([sys.executable, "-c", parent, tag], env=env, start_new_session=True)
    assert len(wait_escaped(tag, proc.pid)) == 1 and len(procs_with(tag)) == 3
    return proc


def test_stop_launch_reaches_the_setsid_escapee_through_the_token() -> None:
    tag, token = f"t-{uuid.uuid4()}", f"test-{uuid.uuid4().hex}"
    proc = _group(tag, token)
    assert len(launch_processes(None, token)) == 3
    assert stop_launch(proc.pid, token, proc=proc, grace=2.0)
    assert procs_with(tag) == [] and proc.returncode is not None


def test_stop_group_alone_stops_the_group_but_not_the_escapee() -> None:
    tag = f"g-{uuid.uuid4()}"
    proc = _group(tag)
    pids = procs_with(tag)
    try:
        assert stop_group(proc, grace=2.0)
        left = procs_with(tag)
        assert len(left) == 1 and os.getsid(left[0]) == left[0]  # why launches carry a token
    finally:
        for pid in pids:
            if pid_alive(pid):
                os.kill(pid, 9)


def test_a_process_ignoring_sigterm_is_killed_after_the_grace() -> None:
    tag = f"s-{uuid.uuid4()}"
    proc = subprocess.Popen(
        [sys.executable, "-c", _sleeper(tag, ignore_term=True), tag], start_new_session=True
    )
    time.sleep(0.5)  # let it install the handler
    started = time.monotonic()
    assert stop_group(proc, grace=0.5)
    assert proc.returncode == -9 and 0.5 <= time.monotonic() - started < 5


def test_without_proc_the_launch_is_found_through_ps(monkeypatch: pytest.MonkeyPatch) -> None:
    # macOS has no /proc: `ps -E` appends each (own) process's environment to its command.
    listing = "\n".join([
        f"  101   101 Ss   server --port 1 {LAUNCH_ENV}=tok PATH=/bin",
        "  102   101 S    worker",
        f"  103   103 Ss   daemon {LAUNCH_ENV}=tok",
        f"  104   104 Z    zombie {LAUNCH_ENV}=tok",
        f"  105   105 S    other {LAUNCH_ENV}=tok2",
    ])  # fmt: skip

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        assert argv[:3] == ["ps", "-A", "-E"]
        return subprocess.CompletedProcess(argv, 0, stdout=listing, stderr="")

    monkeypatch.setattr(processes, "_PROC", Path("/nonexistent-proc"))
    monkeypatch.setattr(processes.subprocess, "run", fake_run)
    assert launch_processes(101, "tok") == [101, 102, 103]
    assert launch_processes(None, "tok") == [101, 103]
    assert launch_processes(101) == [101, 102]
