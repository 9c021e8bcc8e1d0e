"""Real verdicts to render: probe runs against the fake server (and real engines, marked)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe.endpoint import url_provider
from batchprobe.probe.plan import url_arms
from batchprobe.probe.run import run_probe
from batchprobe.results import Report, RunConfig


def artifacts_dir() -> Path:
    """CI keeps this folder: artifacts/ in the checkout, or $BATCHPROBE_ARTIFACTS."""
    root = Path(os.environ.get("BATCHPROBE_ARTIFACTS", Path(__file__).parents[2] / "artifacts"))
    path = root / "report"
    path.mkdir(parents=True, exist_ok=True)
    return path


def fake_verdict(
    folder: Path, name: str, plan: dict[str, object] | None = None, **fake: object
) -> Path:
    """Probe the fake server with a small plan (``plan`` overrides it); the verdict's path."""
    settings: dict[str, object] = {"ttft_ms": 5.0, "itl_ms": 4.0, **fake}
    shape: dict[str, object] = {"sessions": 4, "haystack_tokens": 200, "max_tokens": 24,
                                "request_timeout_s": 20.0, **(plan or {})}
    with FakeServerThread(FakeServerConfig(**settings)) as server:  # type: ignore[arg-type]
        config = RunConfig(base_url=server.base_url, **shape)  # type: ignore[arg-type]
        config.arms = url_arms(config.sessions)
        output = folder / f"{name}.json"
        run_probe(config, output, url_provider(server.base_url))
    return output


@pytest.fixture(scope="session")
def verdicts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verdicts")


@pytest.fixture(scope="session")
def pass_verdict(verdicts_dir: Path) -> Path:
    return fake_verdict(verdicts_dir, "fake-pass", batching="continuous", slowdown=0.05)


@pytest.fixture(scope="session")
def pass_verdict_again(verdicts_dir: Path) -> Path:
    return fake_verdict(verdicts_dir, "fake-pass-again", batching="continuous", slowdown=0.05)


@pytest.fixture(scope="session")
def cross_talk_verdict(verdicts_dir: Path) -> Path:
    return fake_verdict(verdicts_dir, "fake-cross-talk", batching="continuous", slowdown=0.05,
                        fault="cross_talk", fault_when="concurrent")


@pytest.fixture(scope="session")
def other_items_verdict(verdicts_dir: Path) -> Path:
    """A healthy run of a different plan: longer haystacks, so other items."""
    return fake_verdict(verdicts_dir, "fake-other-items", {"haystack_tokens": 300},
                        batching="continuous", slowdown=0.05)


def keep(path: Path) -> Path:
    """Copy a produced verdict or report into the CI artefacts; the copy's path."""
    target = artifacts_dir() / path.name
    shutil.copyfile(path, target)
    return target


def load(path: Path) -> Report:
    return Report.model_validate_json(path.read_text())


def sweep_verdict(folder: Path, name: str, fake: dict[str, object], **plan: object) -> Path:
    """A default-style sweep (1,2,4,8 at --sessions 4) against the fake; the verdict's path."""
    from batchprobe.probe import plan_run, run_plan

    output = folder / f"{name}.json"
    settings: dict[str, object] = {"ttft_ms": 5.0, "itl_ms": 4.0, **fake}
    with FakeServerThread(FakeServerConfig(**settings)) as server:  # type: ignore[arg-type]
        run_plan(plan_run(base_url=server.base_url, output=output, sessions=4,
                          haystack_tokens=200, max_tokens=24, **plan))  # type: ignore[arg-type]
    return output


@pytest.fixture(scope="session")
def healthy_sweep(verdicts_dir: Path) -> Path:
    return sweep_verdict(verdicts_dir, "sweep-healthy", {"batching": "continuous",
                                                         "slowdown": 0.05})


@pytest.fixture(scope="session")
def failing_sweep(verdicts_dir: Path) -> Path:
    """Wrong answers above 3 in flight (corrupted counts and codes): first wrong at N=4."""
    return sweep_verdict(
        verdicts_dir, "sweep-failing", {"fault": "corrupt", "fault_when": "above",
                                        "fault_above": 3})


@pytest.fixture(scope="session")
def leaking_sweep(verdicts_dir: Path) -> Path:
    """Cross-talk above 3 in flight: answers that hold another session's code."""
    return sweep_verdict(
        verdicts_dir, "sweep-leaking", {"fault": "cross_talk", "fault_when": "above",
                                        "fault_above": 3})


@pytest.fixture(scope="session")
def engine_died_verdict(verdicts_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A managed engine (a serve-cmd fake) that exits with code 3 after three generations."""
    import shlex
    import sys

    from batchprobe.probe import plan_run, run_plan

    dying = Path(__file__).parents[1] / "integration" / "dying_server.py"
    serve = shlex.join([sys.executable, str(dying), "--port", "{port}", "--fault", "exit_after",
                        "--exit-after", "3"])
    output = verdicts_dir / "engine-died.json"
    run_plan(plan_run(engine="serve-cmd", serve_cmd=serve, model="fake", workloads="decode",
                      sessions=2, max_tokens=16, shapes="burst", arms="batching@2",
                      cache_dir=tmp_path_factory.mktemp("cache"), output=output))
    return output
