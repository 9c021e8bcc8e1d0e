"""Every bad input is refused before the run starts: exit 2, one line naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.cli._boundary import EXIT_CODES, exit_code_for
from batchprobe.errors import BatchprobeError, ConfigError, EngineExitedEarly, ManifestError

URL = "http://127.0.0.1:9"  # never contacted: validation comes first


def _bad_inputs(tmp_path: Path) -> list[tuple[list[str], str]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    return [
        (["--engine", "serve-cmd", "--model", "m", "--serve-cmd", 'srv --port {port} "x'],
         "--serve-cmd"),
        (["--engine", "serve-cmd", "--model", "m", "--serve-cmd", "srv --model {model}"],
         "--serve-cmd"),
        (["--base-url", "http://127.0.0.1:99999"], "--base-url"),
        (["--base-url", "http://[::1"], "--base-url"),
        (["--base-url", "ftp://example.org"], "--base-url"),
        (["--base-url", URL, "--seed", str(2**63)], "--seed"),
        (["--base-url", URL, "--seed", "-1"], "--seed"),
        (["--base-url", URL, "--request-seed", str(2**63)], "--request-seed"),
        (["--base-url", URL, "--request-timeout", "inf"], "--request-timeout"),
        (["--base-url", URL, "--request-timeout", "nan"], "--request-timeout"),
        (["--engine", "serve-cmd", "--ready-timeout", "nan"], "--ready-timeout"),
        (["--base-url", URL, "--min-speedup", "inf"], "--min-speedup"),
        (["--base-url", URL, "--recall-floor", "1.5"], "--recall-floor"),
        (["--base-url", URL, "--output", str(a_file / "v.json")], "--output"),
        (["--base-url", URL, "--output", str(tmp_path / "missing" / "v.json")], "--output"),
        (["--base-url", URL, "--output", str(tmp_path)], "--output"),
        (["--base-url", URL, "--arms", ""], "--arms"),
        (["--engine", ""], "--engine"),
        (["--base-url", URL, "--workloads", ""], "--workloads"),
        (["--base-url", URL, "--sessions", "4", "--arms", "serial@1,concurrent@8"], "--arms"),
        (["--engine", "mlx-lm", "--model", "m", "--sessions", "2", "--arms", "batching@4"],
         "--arms"),
        # The sweep: depths, SLOs, the budget, and plans that exclude one another.
        (["--base-url", URL, "--sweep", "0,2"], "--sweep"),
        (["--base-url", URL, "--sweep", "8,4"], "--sweep"),
        (["--base-url", URL, "--sweep", "2,2"], "--sweep"),
        (["--base-url", URL, "--sweep", "1,2048"], "--sweep"),
        (["--base-url", URL, "--sweep", "1,x"], "--sweep"),
        (["--base-url", URL, "--sweep", ""], "--sweep"),
        (["--base-url", URL, "--sweep", "1,2", "--quick"], "--sweep"),
        (["--base-url", URL, "--sweep", "1,2", "--arms", "serial@1"], "--sweep"),
        (["--base-url", URL, "--quick", "--arms", "serial@1"], "--quick"),
        (["--base-url", URL, "--max-sessions", "8"], "--max-sessions"),
        (["--base-url", URL, "--sweep", "auto", "--max-sessions", "0"], "--max-sessions"),
        (["--base-url", URL, "--slo-ttft-p99", "0"], "--slo-ttft-p99"),
        (["--base-url", URL, "--slo-ttft-p99", "-1"], "--slo-ttft-p99"),
        (["--base-url", URL, "--slo-itl-p99", "nan"], "--slo-itl-p99"),
        (["--base-url", URL, "--slo-itl-p99", "inf"], "--slo-itl-p99"),
        (["--base-url", URL, "--time-budget", "5"], "--time-budget"),
        (["--base-url", URL, "--time-budget", "inf"], "--time-budget"),
    ]


def test_every_bad_input_is_one_line_naming_the_option(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, option in _bad_inputs(tmp_path):
        out = tmp_path / "v.json"
        extra = [] if "--output" in args else ["--output", str(out)]
        result = runner.invoke(main, ["run", *args, *extra])
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"batchprobe run: {option}: "), (args, lines)
        assert "Traceback" not in result.output, args
        assert result.stdout == "", args
        assert not out.exists(), f"{args}: the run must not start"


def test_sweep_errors_say_what_is_allowed(tmp_path: Path) -> None:
    runner = CliRunner()
    out = ["--output", str(tmp_path / "v.json")]
    cases = {
        ("--sweep", "8,4"): "depths must increase",
        ("--sweep", "0,2"): "1-1024",
        ("--sweep", "1,x"): "auto",
        ("--time-budget", "5"): "30",
        ("--slo-ttft-p99", "0"): "greater than 0",
    }
    for (option, value), allowed in cases.items():
        result = runner.invoke(main, ["run", "--base-url", URL, option, value, *out])
        assert result.exit_code == 2 and allowed in result.stderr, (option, value, result.stderr)


def test_the_unwritable_folder_is_named(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--base-url", URL, "--output", "/proc/v.json"])
    assert result.exit_code == 2
    assert result.stderr.startswith("batchprobe run: --output: cannot write in /proc")


def test_exit_codes_follow_the_mro() -> None:
    class NewEngineTrouble(EngineExitedEarly):
        pass

    assert set(EXIT_CODES) == {BatchprobeError}
    for exc in (ConfigError("x", "y"), NewEngineTrouble("z"), ManifestError("f", "m")):
        assert exit_code_for(exc) == 2


@pytest.mark.parametrize("command", [["models", "resolve", " "], ["engines", "install", "a==b==c"]])
def test_other_commands_share_the_boundary(command: list[str]) -> None:
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"batchprobe {command[0]}: ")
    assert "Traceback" not in result.output
