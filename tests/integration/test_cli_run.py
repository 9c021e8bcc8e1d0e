"""`batchprobe run` as a user runs it: exit codes, one-line errors, usage errors, SIGINT."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.engines import reserve_port
from batchprobe.fake import FakeServerConfig, FakeServerProcess, FakeServerThread


def test_unreachable_url_exits_2_with_one_clear_line(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    url = f"http://127.0.0.1:{reserve_port()}"
    result = CliRunner().invoke(main, ["run", "--base-url", url, "--output", str(out)])
    assert result.exit_code == 2
    error_lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and url in error_lines[0]
    assert "Traceback" not in result.output
    data = json.loads(out.read_text())
    assert data["status"] == "engine_unreachable"
    assert data["verdict"]["outcome"] == "INCONCLUSIVE"


def test_unknown_flag_is_a_usage_error_naming_it() -> None:
    result = CliRunner().invoke(main, ["run", "--base-url", "http://x", "--sesions", "4"])
    assert result.exit_code == 2 and "--sesions" in result.output


def test_malformed_values_name_the_option_and_allowed_values() -> None:
    runner = CliRunner()
    bad_style = runner.invoke(main, ["run", "--base-url", "http://x", "--prompt-style", "poem"])
    assert bad_style.exit_code == 2 and "--prompt-style" in bad_style.output
    assert "completion" in bad_style.output and "chat" in bad_style.output
    bad_n = runner.invoke(main, ["run", "--base-url", "http://x", "--sessions", "0"])
    assert bad_n.exit_code == 2 and "--sessions" in bad_n.output
    bad_w = runner.invoke(main, ["run", "--base-url", "http://x", "--workloads", "speed"])
    assert bad_w.exit_code == 2 and "--workloads" in bad_w.output and "recall" in bad_w.output


def test_cli_pass_exit_0_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    with FakeServerThread(FakeServerConfig(ttft_ms=5, itl_ms=4)) as server:
        result = CliRunner().invoke(
            main,
            ["run", "--base-url", server.base_url, "--sessions", "4", "--haystack-tokens", "200",
             "--max-tokens", "24", "--output", str(out)],
        )
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output
    assert json.loads(out.read_text())["verdict"]["outcome"] == "PASS"


def test_schema_command_prints_json_schema() -> None:
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output)["properties"]["schema_version"]


def test_sigint_during_an_arm_leaves_an_interrupted_verdict(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    with FakeServerProcess("--ttft-ms", "10", "--itl-ms", "20", "--batching", "serial") as fake:
        probe = subprocess.Popen(
            [sys.executable, "-m", "batchprobe", "run", "--quick", "--base-url", fake.base_url,
             "--sessions", "4", "--haystack-tokens", "100", "--max-tokens", "32",
             "--shapes", "burst", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists():
                data = json.loads(out.read_text())
                if data["arms"] and data["arms"][0]["state"] == "done":
                    break
            time.sleep(0.1)
        time.sleep(1.0)  # well inside the second (concurrent, serial-engine) arm
        probe.send_signal(signal.SIGINT)
        _, stderr = probe.communicate(timeout=30)
    assert probe.returncode == 2, stderr
    data = json.loads(out.read_text())
    assert data["status"] == "interrupted"
    assert data["arms"][0]["state"] == "done"
    assert data["arms"][1]["state"] == "interrupted"
    assert len(data["arms"][0]["sessions"]) == 8
    assert data["finished_at"] is not None


def test_unknown_shape_is_a_usage_error_naming_it_and_the_allowed_values() -> None:
    result = CliRunner().invoke(main, ["run", "--base-url", "http://x", "--shapes", "burst,nope"])
    assert result.exit_code == 2
    assert "--shapes" in result.output and "'nope'" in result.output
    assert "burst, join, ragged, early, repeat, params" in result.output
    assert "Traceback" not in result.output


def test_a_shape_the_server_cannot_do_is_an_error_naming_it_and_what_it_can(
    tmp_path: Path,
) -> None:
    out = tmp_path / "v.json"
    # A buffering server delivers every token at once: join cannot be set off by progress.
    with FakeServerThread(FakeServerConfig(ttft_ms=5, itl_ms=4, fault="buffered")) as server:
        result = CliRunner().invoke(
            main,
            ["run", "--base-url", server.base_url, "--sessions", "2", "--haystack-tokens", "100",
             "--shapes", "burst,join", "--output", str(out)],
        )
    assert result.exit_code == 2, result.output
    assert "--shapes" in result.output and "join" in result.output
    assert "allowed here: burst, ragged, early, repeat, params" in result.output
    assert "Traceback" not in result.output
    assert json.loads(out.read_text())["status"] == "config_error"
