"""The patch registry, the shim's environment, and the patch-module contract the shim relies on."""

from __future__ import annotations

import importlib
import logging
import sys

import pytest

from batchprobe import patches
from batchprobe.errors import ConfigError
from batchprobe.patches import (
    PatchInfo,
    gemma4_attention,
    get_patch,
    patch_names,
    shim_dir,
    shim_env,
)


def test_gemma4_attention_is_registered_and_answers_the_known_issue() -> None:
    info = get_patch("gemma4-attention")
    assert isinstance(info, PatchInfo)
    assert (info.engine, info.module) == ("vllm-mlx", "gemma4_attention")
    assert info.answers_issue_id == "vllm-mlx-gemma4-shared-kv"
    assert patch_names() == ["gemma4-attention", "mlx-lm-exact-cache-hit"]


def test_unknown_patch_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"patch: unknown 'nope'; known: gemma4-attention, mlx-lm-exact-cache-hit") as err:
        get_patch("nope")
    assert err.value.field == "patch"


def test_patch_info_rejects_extra_fields() -> None:
    data = get_patch("gemma4-attention").model_dump()
    with pytest.raises(ValueError, match="extra"):
        PatchInfo.model_validate({**data, "colour": "red"})


def test_shim_env_validates_and_deduplicates() -> None:
    assert shim_env([]) == {}
    assert shim_env(["gemma4-attention", "gemma4-attention"]) == {
        "BATCHPROBE_PATCHES": "gemma4-attention"
    }
    with pytest.raises(ConfigError, match="known: gemma4-attention"):
        shim_env(["gemma4-attention", "typo"])


def test_shim_dir_ships_sitecustomize_next_to_the_patch_modules() -> None:
    assert (shim_dir() / "sitecustomize.py").is_file()
    for name in patch_names():
        module = importlib.import_module(f"batchprobe.patches.{get_patch(name).module}")
        # The shim loads <module>.py from the shim directory's parent, by file path.
        assert (shim_dir().parent / f"{get_patch(name).module}.py").is_file()
        assert isinstance(module.TARGET_MODULE, str) and callable(module.apply)
        assert all(len(pair) == 2 for pair in module.COMPETING_PATCHES)


def test_exports_match_all() -> None:
    public = {n for n in vars(patches) if not n.startswith("_")} - {
        "annotations",
        "registry",
        "shim",
        "gemma4_attention",
        "mlx_lm_exact_cache_hit",
    }
    assert public == set(patches.__all__)


def test_patch_returns_false_without_mlx_vlm(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # None in sys.modules makes the import fail, whatever is installed in this venv.
    monkeypatch.setitem(sys.modules, "mlx_vlm", None)
    with caplog.at_level(logging.INFO, logger="batchprobe.patches.gemma4_attention"):
        assert gemma4_attention.patch_gemma4_attention_for_batching() is False
    assert "not importable" in caplog.text
