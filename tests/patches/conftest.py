"""Fixtures for the patch tests: small mlx-vlm venvs, the tiny gemma-4 model, the harness.

Each mlx-vlm version lives in its own venv (just ``mlx[cpu]`` and ``mlx-vlm==X``, ~40 s and
~0.9-1.1 GB each here) under ``cache_dir()/test-envs/mlx-vlm-X``, created on first use so a
fresh CI machine works and reused afterwards. A venv counts only once its marker exists.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from batchprobe.models.tiny_gemma4 import build
from batchprobe.paths import cache_dir

# 0.4.3 and 0.4.4: the signatures the patch refuses; 0.5.0: the first it mirrors; 0.7.10: the
# mlx-vlm that `pip install vllm-mlx==0.3.0` resolves to here (mlx-vlm>=0.4.3 -> newest).
SUPPORTED = ("0.5.0", "0.7.10")
UNSUPPORTED = ("0.4.3", "0.4.4")
VLLM_MLX_MLX_VLM = "0.7.10"
PATCH_FILE = Path(__file__).resolve().parents[2] / "src/batchprobe/patches/gemma4_attention.py"
HARNESS = Path(__file__).with_name("_harness.py")
MARKER = ".batchprobe-test-env"
INSTALL_TIMEOUT_S = 900
HARNESS_TIMEOUT_S = 300


def mlx_vlm_python(version: str) -> Path:
    """The python of a venv with mlx[cpu] + mlx-vlm==version, created when missing."""
    root = cache_dir() / "test-envs"
    root.mkdir(parents=True, exist_ok=True)
    env = root / f"mlx-vlm-{version}"
    with (root / f".mlx-vlm-{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest processes must not build it twice
        if not (env / MARKER).is_file():
            _create_venv(env, version)
    return env / "bin" / "python"


def _create_venv(env: Path, version: str) -> None:
    shutil.rmtree(env, ignore_errors=True)  # no marker: an interrupted install
    python = env / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=120)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "mlx[cpu]", f"mlx-vlm=={version}"],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    (env / MARKER).write_text(json.dumps({"mlx-vlm": version}) + "\n")


@pytest.fixture(scope="session")
def tiny_gemma4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # "gemma4" in the path: vllm-mlx picks its multimodal engine by name.
    return build(tmp_path_factory.mktemp("models") / "tiny-gemma4")


HarnessRunner = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session")
def run_harness(tiny_gemma4: Path) -> Iterator[HarnessRunner]:
    def run(version: str, scenario: str) -> dict[str, Any]:
        python = mlx_vlm_python(version)
        argv = [str(python), str(HARNESS), scenario, str(tiny_gemma4), str(PATCH_FILE)]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BATCHPROBE_PATCHES")}
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=HARNESS_TIMEOUT_S, env=env, check=False
        )
        if done.returncode != 0:
            pytest.fail(f"harness {scenario} on mlx-vlm {version} failed:\n{done.stderr[-4000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        result["_stderr"] = done.stderr
        return result

    yield run
