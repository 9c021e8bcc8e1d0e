"""End to end over a local bare remote, with a second clone playing the GitHub runner.

The client pushes a request with the real CLI; the runner clone runs exactly the
generated workflow's own `run:` scripts for the execute and publish steps (bash, as
Actions runs them), which call a real `batchprobe run` against the real fake server;
the client's fetch then returns the summary and the verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from batchprobe.bridge.workflow import write_workflow
from batchprobe.cli import main
from batchprobe.fake import FakeServerProcess

from .gitutil import run_git

# Steps the Actions runner itself provides (checkout, artifact upload) or that only
# install batchprobe, which the test environment has already done.
RUNNER_PROVIDED = {"Check out the request branch", "Install batchprobe", "Upload logs and results"}


@pytest.fixture
def fake_server() -> Iterator[str]:
    with FakeServerProcess() as server:
        assert server.base_url.startswith("http://127.0.0.1:"), server.base_url
        yield server.base_url


def _bridge(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["bridge", *args], catch_exceptions=False)
    return result.exit_code, result.output


def _run_step(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # What Actions does with `run:` on Linux and macOS runners: bash -e with pipefail.
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_request_runner_fetch_with_a_real_probe(
    clone: Path, remote: Path, tmp_path: Path, fake_server: str
) -> None:
    workflow_path = write_workflow(clone, ["self-hosted", "linux", "x64"])
    run_git(clone, "add", str(workflow_path))
    run_git(clone, "commit", "--quiet", "-m", "add the bridge workflow")
    run_git(clone, "push", "--quiet", "origin", "main")
    user_state = run_git(clone, "status", "--porcelain=v1"), run_git(clone, "rev-parse", "HEAD")

    # Client: ask for a small, bounded probe of whatever URL the runner machine knows.
    code, output = _bridge(
        "request", "--preset", "url-niah", "--param", "sessions=2", "--param",
        "haystack_tokens=64", "--param", "max_tokens=8", "--repo", str(clone),
    )  # fmt: skip
    assert code == 0, output
    branch = output.split()[1]
    assert (
        run_git(clone, "status", "--porcelain=v1"),
        run_git(clone, "rev-parse", "HEAD"),
    ) == user_state

    # Runner: the workflow's checkout, then its own execute and publish scripts.
    runner = tmp_path / "runner"
    run_git(tmp_path, "clone", "--quiet", "--branch", branch, str(remote), str(runner))
    steps = yaml.safe_load((runner / workflow_path.relative_to(clone)).read_text())
    steps = steps["jobs"]["execute"]["steps"]
    assert {
        step["name"] for step in steps if step.get("id") not in {"execute", "publish"}
    } == RUNNER_PROVIDED
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    env = {
        **os.environ,
        # The install step's GITHUB_PATH line puts batchprobe's venv first on PATH.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_REF_NAME": branch,
        "BATCHPROBE_BASE_URL": fake_server,
    }
    by_id = {step.get("id"): step for step in steps}
    executed = _run_step(by_id["execute"]["run"], runner, env)
    published = _run_step(by_id["publish"]["run"], runner, env)  # `if: always()`
    assert published.returncode == 0, published.stdout + published.stderr
    assert executed.returncode == 0, executed.stdout + executed.stderr

    # Client: fetch returns the summary, the logs and a real verdict.
    dest = tmp_path / "fetched"
    code, output = _bridge("fetch", branch, "--repo", str(clone), "--dest", str(dest), "--wait", "5",
                           "--interval", "0.2")  # fmt: skip
    assert code == 0, output
    summary = json.loads((dest / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert summary["preset"] == "url-niah"
    assert summary["params"]["sessions"] == "2"
    assert summary["result_paths"] == ["verdict.json"]
    assert summary["commands"][0]["argv"][3] == "${ENV:BATCHPROBE_BASE_URL}"  # stays local
    verdict = json.loads((dest / "verdict.json").read_text())
    assert verdict["config"]["base_url"] == fake_server
    assert verdict["config"]["sessions"] == 2
    assert verdict["verdict"]["outcome"] == "PASS"  # exit 0 of `batchprobe run` agrees
    assert (dest / "logs" / "00.log").read_text().startswith("$ batchprobe run --base-url")
    assert (
        run_git(clone, "status", "--porcelain=v1"),
        run_git(clone, "rev-parse", "HEAD"),
    ) == user_state
