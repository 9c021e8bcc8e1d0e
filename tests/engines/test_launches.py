"""The registry of live launches: stale ones (owner gone) are listed, reaped by token only."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchprobe.engines import doctor, launch, reap_stale, stale_launches
from batchprobe.engines._launches import LaunchRecord
from batchprobe.files import write_atomic
from batchprobe.processes import LAUNCH_ENV
from proctools import pid_alive, procs_with

from .helpers import mini_cmd


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def stale(tmp_path: Path) -> Iterator[tuple[Path, str, subprocess.Popen[bytes]]]:
    """A left-behind engine process: marked with a token whose recorded owner is dead."""
    token, tag = f"stale-{uuid.uuid4().hex}", f"left-{uuid.uuid4()}"
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)", tag],
        env={**os.environ, LAUNCH_ENV: token}, start_new_session=True,
    )  # fmt: skip
    record = LaunchRecord(
        # A start time no process has: even if the dead owner's pid is reused, it is not it.
        token=token, owner_pid=_dead_pid(), owner_start="0", engine="serve-cmd user",
        engine_pid=orphan.pid,
        engine_pgid=orphan.pid, argv=["my-server"], log_path="l.log", started_at="now",
    )  # fmt: skip
    write_atomic(tmp_path / "launches" / f"{token}.json", record.model_dump_json())
    try:
        yield tmp_path, token, orphan
    finally:
        if orphan.poll() is None:
            orphan.kill()
        orphan.wait()


def test_a_stale_launch_is_listed_then_reaped(
    stale: tuple[Path, str, subprocess.Popen[bytes]],
) -> None:
    cache, token, orphan = stale
    (found,) = stale_launches(cache)
    assert found.record.token == token and found.pids == [orphan.pid]
    (check,) = [c for c in doctor(cache) if c.subject == "stale launch"]
    assert not check.ok and token in check.detail and "--reap" in check.detail
    assert orphan.poll() is None  # listing stops nothing
    assert [s.record.token for s in reap_stale(cache)] == [token]
    assert orphan.wait(timeout=30) == -15  # SIGTERM was enough
    assert stale_launches(cache) == [] and not (cache / "launches" / f"{token}.json").exists()


def test_the_next_launch_reaps_a_stale_one(
    stale: tuple[Path, str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    cache, _, orphan = stale
    with launch(
        "serve-cmd", "/m", "simple", 1, log_path=tmp_path / "l.log", cache_dir=cache,
        serve_cmd=mini_cmd("ready"),
    ) as eng:  # fmt: skip
        assert orphan.poll() is not None
        assert [r.name for r in (cache / "launches").iterdir()] == [f"{eng.launch_token}.json"]


def test_a_live_owner_is_never_reaped(tmp_path: Path) -> None:
    tag = f"mine-{uuid.uuid4()}"
    with launch(
        "serve-cmd", "/m", "simple", 1, log_path=tmp_path / "l.log", cache_dir=tmp_path,
        serve_cmd=mini_cmd("ready", tag),
    ) as eng:  # fmt: skip
        assert stale_launches(tmp_path) == [] and reap_stale(tmp_path) == []
        assert eng.is_alive() and len(procs_with(tag)) == 2
    assert not pid_alive(eng.pid)
