"""`batchprobe fake-server`: the port line, stopping, exit_after's status, usage errors."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.errors import EngineFailedToStart
from batchprobe.fake import FakeServerProcess

LINE = re.compile(r"^listening on http://127\.0\.0\.1:(\d+)$")


def _read_line(proc: subprocess.Popen[str], timeout: float = 30.0) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise AssertionError(f"no output from fake-server within {timeout} s")
    return proc.stdout.readline().rstrip("\n")


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the process group, then SIGKILL it if it lingers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def launch() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        _stop(proc)


def _start(started: list[subprocess.Popen[str]], *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "batchprobe", "fake-server", *args]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so teardown reaches everything
    )
    started.append(proc)
    return proc


def _post(url: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def test_first_line_names_the_port_and_sigterm_stops_it(
    launch: list[subprocess.Popen[str]],
) -> None:
    proc = _start(launch, "--port", "0", "--ttft-ms", "1", "--itl-ms", "1", "--model-id", "m1")
    match = LINE.match(_read_line(proc))
    assert match is not None
    url = f"http://127.0.0.1:{match.group(1)}"
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as response:
        assert json.loads(response.read())["data"][0]["id"] == "m1"
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


def test_exit_after_exits_non_zero(launch: list[subprocess.Popen[str]]) -> None:
    proc = _start(
        launch, "--ttft-ms", "0", "--itl-ms", "0", "--fault", "exit_after", "--exit-after", "2"
    )
    match = LINE.match(_read_line(proc))
    assert match is not None
    url = f"http://127.0.0.1:{match.group(1)}/v1/completions"
    for _ in range(2):
        reply = _post(url, {"prompt": "hello", "max_tokens": 2})
        assert reply["usage"]["completion_tokens"] == 2  # type: ignore[index]
    assert proc.wait(timeout=10) == 3
    assert proc.stderr is not None
    assert "stopped after 2 requests" in proc.stderr.read()


def test_port_in_use_is_a_usage_error_naming_port(launch: list[subprocess.Popen[str]]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _start(launch, "--port", str(port))
        assert proc.wait(timeout=30) == 2
    assert proc.stderr is not None
    assert "--port" in proc.stderr.read()


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--batching", "dynamic"], "--batching"),
        (["--fault", "explode"], "--fault"),
        (["--fault-when", "sometimes"], "--fault-when"),
        (["--batch-cap", "0"], "--batch-cap"),
        (["--ttft-ms", "-5"], "--ttft-ms"),
        (["--port", "70000"], "--port"),
        (["--fault", "exit_after"], "--exit-after"),
        (["--exit-after", "3"], "--exit-after"),
        (["--fault-when", "early", "--fault", "http_500"], "--fault-when"),
        (["--no-such-flag"], "--no-such-flag"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_option(args: list[str], option: str) -> None:
    result = CliRunner().invoke(main, ["fake-server", *args])
    assert result.exit_code == 2
    assert option in result.output


def test_help_lists_every_option() -> None:
    result = CliRunner().invoke(main, ["fake-server", "--help"])
    assert result.exit_code == 0
    for option in (
        "--ttft-ms",
        "--itl-ms",
        "--jitter-ms",
        "--slowdown",
        "--prefix-cache",
        "--seed",
    ):
        assert option in result.output


def test_stops_quickly(launch: list[subprocess.Popen[str]]) -> None:
    proc = _start(launch)
    assert LINE.match(_read_line(proc))
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - started < 5


def test_fake_server_process_reports_a_failed_start_and_leaves_nothing() -> None:
    server = FakeServerProcess("--fault", "nope")
    with pytest.raises(EngineFailedToStart, match="did not start"), server:
        pass
    assert server._proc is not None and server._proc.poll() is not None


def test_fake_server_process_serves_then_stops_its_group() -> None:
    with FakeServerProcess("--ttft-ms", "0") as server:
        assert re.match(r"^http://127\.0\.0\.1:\d+$", server.base_url)
        pid = server.pid
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
