"""Shared fixtures: a scrubbed environment and the fake server."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.engines import Installation, install
from batchprobe.models import resolve_model, tiny_gemma3, tiny_gemma4

# Fixtures that install an engine or build/assemble a model: only tests marked `engine` may
# use them, so that `pytest -m "not engine"` stays a quick loop on an empty cache.
ENGINE_FIXTURES = frozenset({
    "mlx_lm_env", "transformers_env", "llama_env", "tiny_gemma3_dir", "gemma3_270m",
    "tiny_gemma4_dir", "vllm_mlx_030", "vllm_mlx_060", "gemma3_270m_hf", "tiny_llama_task", "tiny_gemma3_task",
    "tiny_gemma4_task",
})  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unmarked = [
        item.nodeid
        for item in items
        if item.get_closest_marker("engine") is None
        and ENGINE_FIXTURES & set(getattr(item, "fixturenames", ()))
    ]
    if unmarked:
        raise pytest.UsageError(
            "tests that install an engine or build a model must be marked engine: "
            + ", ".join(unmarked)
        )


@pytest.fixture(autouse=True)
def _scrub_env(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # A proxy variable would route the tests' loopback traffic away from the local servers.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    if request.node.get_closest_marker("engine") is None:
        # Quick tests see an empty cache: nothing installed, no model assembled, and nothing
        # they do can touch the shared one.
        monkeypatch.setenv("BATCHPROBE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


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
def gemma3_270m_hf() -> Path:
    # Unpacked from the GGUF into the cache once (~1 min, plus the model-tools env < 1 min).
    return resolve_model("gemma3-270m", model_format="hf")


@pytest.fixture(scope="session")
def tiny_llama_task() -> Path:
    # The constructed llama that does the tasks, built into the cache once (~10 s, plus the
    # model-tools environment < 1 min): its folder, model.gguf beside the checkpoint.
    return resolve_model("tiny-llama", model_format="hf")


@pytest.fixture(scope="session")
def tiny_gemma3_task() -> Path:
    # The same construction in gemma-3's layout (a sliding-window first layer), ~10 s.
    return resolve_model("tiny-gemma3", model_format="hf")


@pytest.fixture(scope="session")
def tiny_gemma4_task() -> Path:
    # The construction in gemma-4's layout (shared KV, a tiny vision tower), ~10 s.
    return resolve_model("tiny-gemma4", model_format="hf")


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
