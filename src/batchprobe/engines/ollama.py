"""Ollama (`ollama serve`): an external binary, configured through environment variables."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from batchprobe.engines._base import Engine
from batchprobe.engines._types import (
    Capabilities,
    Installation,
    InstallRecipe,
    LaunchSpec,
    PlatformName,
)

# `ollama --version` prints "ollama version is 0.5.7", or, with no server running,
# "Warning: could not connect to a running Ollama instance\nWarning: client version is 0.5.7".
_VERSION_RE = re.compile(r"version is\s+v?(\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.]+)?)")


class Ollama(Engine):
    """Ollama loads models by name (e.g. `gemma3:270m`), not by path."""

    name = "ollama"
    model_format = "gguf"
    description = "Ollama (external binary on PATH); OLLAMA_NUM_PARALLEL sets the slots."
    default_version = None
    readiness_path = "/api/version"
    capabilities = Capabilities(default_api="chat", logprobs=False)
    runs_here = False

    def install_recipe(self, version: str, platform: PlatformName) -> InstallRecipe:
        return InstallRecipe(
            kind="external",
            note="install Ollama from https://ollama.com/download (puts `ollama` on PATH)",
        )

    def find_binary(self) -> Path | None:
        """The `ollama` on PATH, if any."""
        found = shutil.which("ollama")
        return Path(found) if found else None

    def version_argv(self, inst: Installation) -> list[str]:
        return [str(inst.executable), "--version"]

    def parse_version(self, text: str) -> str:
        found = _VERSION_RE.findall(text)
        if not found:
            raise ValueError(f"no ollama version in {text[:200]!r}")
        return str(found[-1])

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        return [str(inst.executable), "serve"]

    def launch_env(self, inst: Installation, spec: LaunchSpec) -> dict[str, str]:
        parallel = 1 if spec.mode == "simple" else spec.concurrency
        return {
            "OLLAMA_HOST": f"{spec.host}:{spec.port}",
            "OLLAMA_NUM_PARALLEL": str(parallel),
            "OLLAMA_MAX_LOADED_MODELS": "1",
            # Otherwise requests beyond the slots wait silently in Ollama's queue.
            "OLLAMA_MAX_QUEUE": str(max(512, parallel)),
        }

    def served_model_id(self, spec: LaunchSpec, listed: list[str]) -> str:
        # Ollama lists every pulled model; the one asked for is the one to use.
        return spec.model


ENGINE = Ollama()
