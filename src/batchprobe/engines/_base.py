"""The engine interface: one subclass per server, registered by name."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from batchprobe.engines._known import KnownIssue
from batchprobe.engines._types import (
    Capabilities,
    Installation,
    InstallRecipe,
    LaunchSpec,
    ModelFormat,
    PlatformName,
)
from batchprobe.errors import ConfigError

_VERSION_RE = re.compile(r"\b(\d+\.\d+(?:\.\d+)*(?:[.+-]?[A-Za-z0-9]+(?:\.\d+)?)*)")


class Engine(ABC):
    """An inference server batchprobe can install, launch and explain.

    Subclasses set the class attributes and implement :meth:`launch_argv`; third
    parties register instances through :class:`~batchprobe.engines.EngineRegistry`
    or the ``batchprobe.engines`` entry-point group.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""
    package: ClassVar[str | None] = None
    default_version: ClassVar[str | None] = None
    capabilities: ClassVar[Capabilities] = Capabilities()
    readiness_path: ClassVar[str] = "/health"
    # Log lines meaning "will never become ready" although the process lives on.
    fatal_startup_patterns: ClassVar[tuple[str, ...]] = ()
    known_issues: ClassVar[tuple[KnownIssue, ...]] = ()
    runs_here: ClassVar[bool] = True
    # What the engine loads: a GGUF file or a Hugging Face checkpoint folder (an alias such as
    # gemma3-270m resolves to the one its engine takes).
    model_format: ClassVar[ModelFormat] = "hf"
    # The model a run uses when --model is not given: one that can do the probe's tasks
    # (find its needle, count) at the default plan's size in reasonable time here; None: required.
    default_model: ClassVar[str | None] = None

    @abstractmethod
    def install_recipe(self, version: str, platform: PlatformName) -> InstallRecipe:
        """How to build the environment for ``version`` on ``platform``."""

    @abstractmethod
    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        """The server's argv for one mode and concurrency (never a shell string)."""

    def kv_pool_args(self, tokens: int) -> list[str] | None:
        """The launch options that give the server one KV pool of ``tokens`` shared by every
        request (the pressure wave's launch); None when the engine has no such option."""
        return None

    def launch_env(self, inst: Installation, spec: LaunchSpec) -> dict[str, str]:
        """Extra environment variables the server needs (most need none)."""
        return {}

    def install_root(self, version: str, cache: Path) -> Path:
        """Where this version's environment lives."""
        return cache / "envs" / f"{self.name}-{version}"

    def installation(self, version: str, root: Path) -> Installation:
        """The Installation describing a finished environment at ``root``."""
        return Installation(
            name=self.name, version=version, root=root, python=root / "bin" / "python"
        )

    def find_binary(self) -> Path | None:
        """For engines installed outside batchprobe: their binary, if present."""
        return None

    def version_argv(self, inst: Installation) -> list[str]:
        """A command that prints the installed version (parsed by :meth:`parse_version`)."""
        if inst.python is None or self.package is None:
            raise ConfigError("engine", f"{self.name} has no way to report its version")
        code = f"import importlib.metadata as m; print(m.version({self.package!r}))"
        return [str(inst.python), "-c", code]

    def parse_version(self, text: str) -> str:
        """The version in a version command's output (the last one printed)."""
        found = _VERSION_RE.findall(text)
        if not found:
            raise ValueError(f"no version found in {text[:200]!r}")
        return str(found[-1])

    def served_model_id(self, spec: LaunchSpec, listed: list[str]) -> str:
        """The id to send in requests: the one /v1/models lists, else the model given."""
        return listed[0] if listed else spec.model


class PipEngine(Engine):
    """An engine installed with pip into its own virtual environment."""

    def pip_requirements(self, version: str, platform: PlatformName) -> list[list[str]]:
        """Groups of requirements, one pip install per group, in order."""
        _require_package(self)
        return [[f"{self.package}=={version}"]]

    def post_install(self, platform: PlatformName) -> list[list[str]]:
        """Extra argv templates run after the installs (e.g. uninstalling a conflict)."""
        return []

    def install_recipe(self, version: str, platform: PlatformName) -> InstallRecipe:
        steps = [
            ("{python}", "-m", "pip", "install", *group)
            for group in self.pip_requirements(version, platform)
        ]
        steps.extend(tuple(step) for step in self.post_install(platform))
        return InstallRecipe(kind="venv", steps=tuple(steps))


def _require_package(engine: Engine) -> str:
    """The PyPI package of a pip engine (a programming error if missing)."""
    if engine.package is None:
        raise TypeError(f"{type(engine).__name__} is a PipEngine without a package")
    return engine.package
