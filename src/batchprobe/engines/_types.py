"""Typed values shared by every engine: modes, capabilities, recipes, installations."""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from batchprobe.errors import ConfigError

Mode = Literal["simple", "batching"]
MODES: tuple[Mode, ...] = ("simple", "batching")
PlatformName = Literal["linux", "macos-arm64", "other"]
# What an engine loads: a GGUF file or a Hugging Face checkpoint folder.
ModelFormat = Literal["gguf", "hf"]
Api = Literal["completions", "chat"]
LOOPBACK = "127.0.0.1"


def current_platform() -> PlatformName:
    """Which family of install recipes applies to this machine."""
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "macos-arm64"
    if sys.platform.startswith("linux"):
        return "linux"
    return "other"


def check_mode(mode: str) -> Mode:
    """Validate a mode string coming from outside (CLI, manifest)."""
    if mode == "simple":
        return "simple"
    if mode == "batching":
        return "batching"
    raise ConfigError("mode", f"unknown {mode!r}; allowed: {', '.join(MODES)}")


class Capabilities(BaseModel):
    """What a probe can rely on when talking to the engine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_api: Api = Field(default="completions", description="Endpoint the probe should use.")
    completions: bool = Field(default=True, description="Serves /v1/completions.")
    chat: bool = Field(default=True, description="Serves /v1/chat/completions.")
    logprobs: bool = Field(default=True, description="Returns token logprobs when asked.")
    tokenize_path: str | None = Field(default=None, description="Tokenize endpoint, if any.")
    cache_prompt_field: bool = Field(
        default=False, description="Accepts a per-request `cache_prompt: false` (llama.cpp)."
    )
    metrics_path: str | None = Field(default=None, description="Prometheus metrics endpoint.")
    request_id_header: bool = Field(
        default=True,
        description="Accepts batchprobe's x-request-id (llama-cpp-python's server refuses one "
        "that is not a UUID, with HTTP 400).",
    )


class InstallRecipe(BaseModel):
    """How to build an engine's environment; argv templates, `{python}` is the env's python."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["venv", "llama-server", "external", "none"]
    steps: tuple[tuple[str, ...], ...] = ()
    note: str = Field(
        default="", description="Shown to the user (e.g. how to get an external binary)."
    )


class Installation(BaseModel):
    """A finished engine environment (or an external binary) on this machine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str
    root: Path | None = Field(default=None, description="Environment directory; None if external.")
    python: Path | None = Field(default=None, description="The environment's python, if a venv.")
    executable: Path | None = Field(default=None, description="The server binary, if not python.")


class LaunchSpec(BaseModel):
    """One engine configuration to start: the model, mode, concurrency and the reserved port."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="Model path or id as the engine expects it.")
    mode: Mode
    concurrency: int = Field(ge=1, le=4096, description="Sessions in flight at once (N).")
    port: int = Field(ge=1, le=65535)
    host: str = LOOPBACK
    prefix_cache: bool = Field(
        default=False, description="Keep the engine's default prefix cache (the repeat wave)."
    )
    kv_tokens: int | None = Field(
        default=None, ge=16,
        description="A KV pool of this many tokens shared by every request (the engine's "
        "kv_pool_args); None: the engine's own sizing.",
    )
    state_dir: Path | None = Field(
        default=None,
        description="An empty directory of this launch's own, removed when it stops: for what "
        "an engine would otherwise keep across launches (vllm-mlx's saved prefix cache).",
    )
