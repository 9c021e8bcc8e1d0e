"""Engine fixtures: real environments installed through batchprobe's own API (cached)."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.engines import Installation, install
from batchprobe.models import resolve_model, tiny_gemma3


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


@pytest.fixture
def no_cache(tmp_path: Path) -> Path:
    """An empty cache directory (nothing installed)."""
    return tmp_path / "cache"
