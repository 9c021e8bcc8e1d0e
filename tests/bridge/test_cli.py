"""`batchprobe bridge` through click: exit codes and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from batchprobe.bridge.gitbus import request
from batchprobe.cli import main

from .gitutil import run_git


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["bridge", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_presets_are_listed_with_their_bounds() -> None:
    code, output = _invoke("presets")
    assert code == 0
    assert "vllm-mlx-niah" in output and "sessions: a whole number from 1 to 64" in output
    assert "path: a relative path at or under tests/" in output and "required" in output


def test_a_rejected_request_is_one_line_and_exit_2(clone: Path) -> None:
    code, output = _invoke("request", "--preset", "bash", "--repo", str(clone))
    assert code == 2
    assert output.strip().splitlines() == [output.strip()]
    assert output.startswith("batchprobe bridge: preset: unknown preset 'bash'")


def test_param_syntax_is_checked(clone: Path) -> None:
    code, output = _invoke(
        "request", "--preset", "env-probe", "--param", "novalue", "--repo", str(clone)
    )
    assert code == 2 and "KEY=VALUE" in output
    code, output = _invoke("request", "--preset", "url-niah", "--param", "seed=1", "--param",
                           "seed=2", "--repo", str(clone))  # fmt: skip
    assert code == 2 and "given twice" in output


def test_request_status_and_pending_fetch(clone: Path) -> None:
    code, output = _invoke("request", "--preset", "env-probe", "--repo", str(clone))
    assert code == 0
    branch = output.split()[1]
    code, output = _invoke("status", branch, "--repo", str(clone))
    assert code == 0 and f"{branch}: pending" in output
    code, output = _invoke("fetch", branch, "--repo", str(clone))
    assert code == 2 and "still pending" in output
    code, output = _invoke("request", "--preset", "env-probe", "--repo", str(clone), "--wait",
                           "0.2", "--interval", "0.1")  # fmt: skip
    assert code == 2 and "still pending" in output


def test_bad_branch_names_are_refused(clone: Path) -> None:
    code, output = _invoke("status", "main", "--repo", str(clone))
    assert code == 2 and "not a request branch" in output
    code, output = _invoke("fetch", "--upload-pack=x", "--repo", str(clone))
    assert code == 2


def test_execute_exit_codes(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{}")
    code, output = _invoke("execute", "--manifest", str(tmp_path / "bad.json"), "--results",
                           str(tmp_path / "r"))  # fmt: skip
    assert code == 2 and "status: rejected" in output
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["status"] == "rejected"


def test_publish_status_fetch_round_trip(clone: Path, remote: Path, tmp_path: Path) -> None:
    receipt = request(clone, "env-probe", {})
    runner = tmp_path / "runner"
    run_git(tmp_path, "clone", "--quiet", "--branch", receipt.branch, str(remote), str(runner))
    results = tmp_path / "results"
    code, output = _invoke("publish", "--results", str(results), "--branch", receipt.branch,
                           "--repo", str(runner))  # fmt: skip
    assert code == 0 and "published" in output
    code, output = _invoke("status", receipt.branch, "--repo", str(clone))
    assert code == 0 and "status: not_run" in output
    code, output = _invoke(
        "fetch", receipt.branch, "--repo", str(clone), "--dest", str(tmp_path / "o")
    )
    assert code == 1 and "copied 1 file(s)" in output


def test_init_workflow_and_doctor(clone: Path) -> None:
    code, output = _invoke(
        "init-workflow", "--runs-on", "self-hosted,macOS,ARM64", "--root", str(clone)
    )
    assert code == 0 and "batchprobe-bridge.yml" in output
    code, output = _invoke("init-workflow", "--runs-on", "self-hosted", "--root", str(clone))
    assert code == 2 and "--force" in output
    code, output = _invoke("doctor", "--repo", str(clone))
    assert code == 0, output
    code, output = _invoke("doctor", "--repo", str(clone), "--remote", "nowhere")
    assert code == 1 and "fail  remote" in output


def test_env_probe_writes_json(tmp_path: Path) -> None:
    code, _ = _invoke("env-probe", "--output", str(tmp_path / "sub" / "env.json"))
    assert code == 0
    assert "python" in json.loads((tmp_path / "sub" / "env.json").read_text())
