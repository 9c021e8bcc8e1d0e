"""Shared fixtures: a scrubbed environment and the fake server."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.engines import Installation, install
from batchprobe.models import resolve_model, tiny_gemma3, tiny_gemma4


@pytest.fixture(autouse=True)
def _scrub_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy variable would route the tests' loopback traffic away from the local servers.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


# Real engines, installed through batchprobe's own API and cached under the cache dir
# (~/.cache/batchprobe or $BATCHPROBE_CACHE_DIR), so a second CI run on a machine reuses them.


@pytest.fixture(scope="session")
def mlx_lm_env() -> Installation:
    return install("mlx-lm")


@pytest.fixture(scope="session")
def transformers_env() -> Installation:
    return install("transformers")


@pytest.fixture(scope="session")
def llama_env() -> Installation:
    # ~7 minutes the first time on 2 cores; cached by version afterwards.
    return install("llama.cpp")


@pytest.fixture(scope="session")
def tiny_gemma3_dir(tmp_path_factory: pytest.TempPathFactory, mlx_lm_env: Installation) -> Path:
    return tiny_gemma3.build(
        tmp_path_factory.mktemp("models") / "tiny-gemma3", python=mlx_lm_env.python
    )


@pytest.fixture(scope="session")
def gemma3_270m() -> Path:
    return resolve_model("gemma3-270m")


@pytest.fixture(scope="session")
def tiny_gemma4_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # vllm-mlx routes to its multimodal engine by path: keep "gemma4" in the name.
    return tiny_gemma4.build(tmp_path_factory.mktemp("m") / "tiny-gemma4")


@pytest.fixture(scope="session")
def vllm_mlx_030() -> Installation:
    return install("vllm-mlx==0.3.0")


@pytest.fixture(scope="session")
def vllm_mlx_060() -> Installation:
    return install("vllm-mlx==0.6.0")
