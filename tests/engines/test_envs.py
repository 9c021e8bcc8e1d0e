"""Environments: marker semantics, reuse, interrupted and failed installs, not-installed errors."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from batchprobe.engines import (
    MARKER,
    EngineRegistry,
    Installation,
    InstallRecipe,
    LaunchSpec,
    PipEngine,
    find_installation,
    install,
    installed_versions,
    require_installation,
)
from batchprobe.engines._types import PlatformName
from batchprobe.errors import ConfigError, EngineInstallFailed, EngineNotInstalled


class _Cheap(PipEngine):
    """A venv engine whose recipe is one quick python step."""

    name = "cheap"
    default_version: ClassVar[str | None] = "1.0"
    step = "print('step ran')"

    def install_recipe(self, version: str, platform: PlatformName) -> InstallRecipe:
        return InstallRecipe(kind="venv", steps=(("{python}", "-c", self.step),))

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        return [str(inst.python), "-c", "pass"]


class _Failing(_Cheap):
    name = "failing"
    step = "import sys; print('boom: no wheel for this platform'); sys.exit(4)"


@pytest.fixture
def registry() -> EngineRegistry:
    return EngineRegistry([_Cheap(), _Failing()])


@pytest.mark.engine  # creates a real virtual environment with pip (~10-50 s here)
def test_install_creates_a_marked_venv_and_reuses_it(
    tmp_path: Path, registry: EngineRegistry
) -> None:
    assert find_installation("cheap", cache_dir=tmp_path, registry=registry) is None
    steps: list[str] = []
    inst = install("cheap==1.0", cache_dir=tmp_path, registry=registry, on_step=steps.append)
    root = tmp_path / "envs" / "cheap-1.0"
    assert inst.root == root and inst.python == root / "bin" / "python"
    assert inst.python.exists() and (root / MARKER).is_file()
    assert any("virtual environment" in s for s in steps) and any("print" in s for s in steps)
    assert "step ran" in (tmp_path / "logs" / "install-cheap-1.0.log").read_text()
    (root / "sentinel").write_text("kept")
    again = install("cheap", cache_dir=tmp_path, registry=registry)  # default version, reused
    assert again == inst and (root / "sentinel").exists()
    assert installed_versions(registry.get("cheap"), tmp_path) == ["1.0"]


@pytest.mark.engine  # creates a real virtual environment with pip (~10-50 s here)
def test_an_interrupted_install_is_not_taken_for_a_finished_one(
    tmp_path: Path, registry: EngineRegistry
) -> None:
    root = tmp_path / "envs" / "cheap-1.0"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("half-written")
    assert find_installation("cheap==1.0", cache_dir=tmp_path, registry=registry) is None
    with pytest.raises(EngineNotInstalled):
        require_installation("cheap==1.0", cache_dir=tmp_path, registry=registry)
    inst = install("cheap==1.0", cache_dir=tmp_path, registry=registry)
    assert inst.python is not None and inst.python.is_symlink()  # a real venv replaced the debris


@pytest.mark.engine  # creates a real virtual environment with pip (~10-50 s here)
def test_failed_install_raises_with_log_tail_and_leaves_no_marker(
    tmp_path: Path, registry: EngineRegistry
) -> None:
    with pytest.raises(EngineInstallFailed) as info:
        install("failing==1.0", cache_dir=tmp_path, registry=registry)
    assert "exit 4" in str(info.value)
    assert info.value.log_tail is not None and "boom: no wheel" in info.value.log_tail
    assert not (tmp_path / "envs" / "failing-1.0" / MARKER).exists()
    assert find_installation("failing==1.0", cache_dir=tmp_path, registry=registry) is None


def test_not_installed_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(EngineNotInstalled) as info:
        require_installation("vllm-mlx==0.3.0", cache_dir=tmp_path)
    assert info.value.install_command == ["batchprobe", "engines", "install", "vllm-mlx==0.3.0"]
    assert "batchprobe engines install vllm-mlx==0.3.0" in str(info.value)


def test_unversioned_engine_without_default_needs_a_version(tmp_path: Path) -> None:
    class _NoDefault(_Cheap):
        name = "nodefault"
        default_version = None

    with pytest.raises(ConfigError, match="needs a version"):
        install("nodefault", cache_dir=tmp_path, registry=EngineRegistry([_NoDefault()]))


def test_external_engine_is_not_installed_by_batchprobe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no ollama here
    with pytest.raises(EngineInstallFailed, match="ollama.com"):
        install("ollama", cache_dir=tmp_path)
