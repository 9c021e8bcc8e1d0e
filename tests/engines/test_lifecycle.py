"""Lifecycle with a stand-in server: readiness, failures, teardown of the whole group."""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import pytest

from batchprobe.engines import group_members, launch, launch_processes, reserve_port
from batchprobe.engines._process import start_launch
from batchprobe.errors import (
    ConfigError,
    EngineExitedEarly,
    EngineFailedToStart,
    EngineNotInstalled,
)
from proctools import pid_alive, procs_with, wait_escaped

from .helpers import get_text, mini_cmd


def test_ready_engine_answers_and_leaves_nothing_behind(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with launch("serve-cmd", "/m", "batching", 4, log_path=log, serve_cmd=mini_cmd("ready")) as eng:
        assert eng.base_url.startswith("http://127.0.0.1:")
        assert eng.model_id == "mini-model"
        assert eng.is_alive()
        assert get_text(eng.base_url + "/health")[0] == 200
        members = group_members(eng.pid)
        assert eng.pid in members and len(members) >= 2  # the server and its grandchild
        pgid = eng.pid
    assert group_members(pgid) == []
    assert not any(pid_alive(p) for p in members)
    assert "mini server starting" in log.read_text()


def test_keyboard_interrupt_inside_the_block_stops_the_group(tmp_path: Path) -> None:
    tag = f"ctrl-c-{uuid.uuid4()}"
    with (
        pytest.raises(KeyboardInterrupt),
        launch(
            "serve-cmd",
            "/m",
            "simple",
            1,
            log_path=tmp_path / "l.log",
            serve_cmd=mini_cmd("ready", tag),
        ),
    ):
        assert len(procs_with(tag)) == 2
        raise KeyboardInterrupt
    assert procs_with(tag) == []


def test_sigterm_ignored_means_sigkill(tmp_path: Path) -> None:
    tag = f"stubborn-{uuid.uuid4()}"
    with launch(
        "serve-cmd",
        "/m",
        "simple",
        1,
        log_path=tmp_path / "l.log",
        serve_cmd=mini_cmd("stubborn", tag),
        stop_grace=1.0,
    ) as eng:
        members = group_members(eng.pid)
        assert len(procs_with(tag)) == 2
    assert members and not any(pid_alive(p) for p in members)
    assert procs_with(tag) == []


def test_early_exit_fails_fast_with_log_tail(tmp_path: Path) -> None:
    argv = mini_cmd("exit")
    with (
        pytest.raises(EngineExitedEarly) as info,
        launch(
            "serve-cmd",
            "/m",
            "simple",
            1,
            log_path=tmp_path / "l.log",
            serve_cmd=argv,
            ready_timeout=60,
        ),
    ):
        pytest.fail("must not become ready")
    assert "exited with code 3" in str(info.value)
    assert info.value.log_tail is not None and "no model at /does/not/exist" in info.value.log_tail
    assert info.value.reproduce is not None and info.value.reproduce[1] == argv[1]


def test_timeout_names_the_command_to_reproduce(tmp_path: Path) -> None:
    tag = f"never-{uuid.uuid4()}"
    with (
        pytest.raises(EngineFailedToStart) as info,
        launch(
            "serve-cmd",
            "/m",
            "simple",
            1,
            log_path=tmp_path / "l.log",
            serve_cmd=mini_cmd("never", tag),
            ready_timeout=1.5,
        ),
    ):
        pytest.fail("must not become ready")
    assert not isinstance(info.value, EngineExitedEarly)
    assert "not ready after 2s" in str(info.value) and "reproduce with:" in str(info.value)
    assert info.value.reproduce is not None and "never" in info.value.reproduce
    assert procs_with(tag) == []


def test_not_installed_engine_is_refused_before_anything_starts(
    no_cache: Path, tmp_path: Path
) -> None:
    with (
        pytest.raises(EngineNotInstalled) as info,
        launch(
            "mlx-lm==0.32.2", "/m", "simple", 1, log_path=tmp_path / "l.log", cache_dir=no_cache
        ),
    ):
        pytest.fail("must not start")
    assert info.value.install_command == ["batchprobe", "engines", "install", "mlx-lm==0.32.2"]
    assert not (tmp_path / "l.log").exists()


@pytest.mark.parametrize(
    ("mode", "n", "field"), [("turbo", 1, "mode"), ("simple", 0, "concurrency")]
)
def test_bad_configuration_is_a_config_error(tmp_path: Path, mode: str, n: int, field: str) -> None:
    with (
        pytest.raises(ConfigError) as info,
        launch(
            "serve-cmd", "/m", mode, n, log_path=tmp_path / "l.log", serve_cmd=mini_cmd("ready")
        ),
    ):
        pytest.fail("must not start")
    assert info.value.field == field


def test_serve_cmd_only_with_its_engine(tmp_path: Path) -> None:
    with (
        pytest.raises(ConfigError, match="only for engine serve-cmd"),
        launch(
            "mlx-lm", "/m", "simple", 1, log_path=tmp_path / "l.log", serve_cmd=mini_cmd("ready")
        ),
    ):
        pytest.fail("must not start")


def test_extra_env_and_pythonpath_reach_the_engine(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    # sitecustomize runs at interpreter start-up: the patch helper's injection point.
    (shim / "sitecustomize.py").write_text(
        "import os\nprint('shim loaded', os.environ.get('BATCHPROBE_PATCHES'), flush=True)\n"
    )
    log = tmp_path / "l.log"
    with launch(
        "serve-cmd",
        "/m",
        "simple",
        1,
        log_path=log,
        serve_cmd=mini_cmd("ready"),
        extra_env={"BATCHPROBE_PATCHES": "gemma4-attention"},
        pythonpath_prepend=[shim],
    ):
        pass
    assert "shim loaded gemma4-attention" in log.read_text()


def test_launch_leaves_the_signal_handlers_alone(tmp_path: Path) -> None:
    # The probe owns SIGINT/SIGTERM/SIGHUP: launch() must not install handlers of its own.
    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    before = [signal.getsignal(s) for s in watched]
    with launch(
        "serve-cmd", "/m", "simple", 1, log_path=tmp_path / "l.log", serve_cmd=mini_cmd("ready")
    ) as eng:
        assert eng.is_alive()
        assert [signal.getsignal(s) for s in watched] == before
    assert [signal.getsignal(s) for s in watched] == before


def test_a_setsid_child_is_stopped_with_the_group(tmp_path: Path) -> None:
    tag = f"setsid-{uuid.uuid4()}"
    with launch(
        "serve-cmd", "/m", "simple", 1, log_path=tmp_path / "l.log", cache_dir=tmp_path,
        serve_cmd=mini_cmd("ready", tag, "--setsid-child"),
    ) as eng:  # fmt: skip
        escapees = wait_escaped(tag, eng.pid)
        members = set(group_members(eng.pgid))
        assert len(escapees) == 1 and escapees[0] not in members and len(members) == 2
        # Every process of the launch carries its token, the escapee included.
        assert set(launch_processes(None, eng.launch_token)) == members | set(escapees)
        record = json.loads((tmp_path / "launches" / f"{eng.launch_token}.json").read_text())
        assert record["engine_pid"] == eng.pid and record["owner_pid"] == os.getpid()
    assert procs_with(tag) == []
    assert not (tmp_path / "launches" / f"{eng.launch_token}.json").exists()


def test_the_watchdog_stops_the_launch_when_its_pipe_closes(tmp_path: Path) -> None:
    tag = f"watched-{uuid.uuid4()}"
    log = tmp_path / "l.log"
    port = str(reserve_port())
    argv = [a.replace("{port}", port) for a in mini_cmd("ready", tag, "--setsid-child")]
    started = start_launch(argv, log, dict(os.environ))
    try:
        assert len(wait_escaped(tag, started.pid)) == 1 and len(procs_with(tag)) == 3
        # What batchprobe's death does: the only writer of the watchdog's pipe goes away.
        started._watchdog.close()
        assert procs_with(tag) == []
        assert started.proc.poll() is not None
    finally:
        started.stop(grace=1.0)


def test_extra_args_are_appended_to_the_engine_argv(tmp_path: Path) -> None:
    tag = f"extra-{uuid.uuid4().hex[:8]}"
    with launch(
        "serve-cmd", "/m", "simple", 1, log_path=tmp_path / "l.log", serve_cmd=mini_cmd("ready"),
        extra_args=["--tag", tag],
    ) as eng:  # fmt: skip
        assert eng.argv[-2:] == ["--tag", tag]
        assert procs_with(tag), "the server runs with the extra arguments"
    assert not procs_with(tag)
