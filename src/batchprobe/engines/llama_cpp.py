"""llama.cpp's `llama-server`, built from the sources vendored in the llama-cpp-python sdist.

The version batchprobe names (`llama.cpp==0.3.36`) is the llama-cpp-python sdist
version: PyPI has no binary wheel with `llama-server`, so the sdist is the
reproducible, cacheable source of a given llama.cpp tree.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from batchprobe.engines._base import Engine
from batchprobe.engines._known import KnownIssue
from batchprobe.engines._types import (
    Capabilities,
    Installation,
    InstallRecipe,
    LaunchSpec,
    PlatformName,
)

CTX_PER_SLOT = 4096
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    # Without these two the build tries to download a web UI.
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
)
# Git checkouts print "version: 6543 (1a2b3c4)"; sdist builds "version: 0.5.0-dev (build 1, commit 0c1e570)".
_BUILD_RE = re.compile(r"version:\s*(\S+)\s*\(([^)]*)\)")


POOL_FULL = KnownIssue(
    issue_id="llama.cpp#23652",
    title="llama-server fails every running request when its unified KV pool fills",
    patterns=(r"Context size has been exceeded",),
    explanation=(
        "With one KV pool shared by every slot (--kv-unified, llama.cpp's own layout when it "
        "picks the slot count), the scheduler admits requests while their prompts fit and "
        "lets them grow; when a decode step finds no free cell it ends every request being "
        "processed with 'Context size has been exceeded.' (HTTP 500, or an error event in a "
        "stream), although each would have fit alone. It queues nothing and preempts nothing."
    ),
    remedy=(
        "Give each slot its own share of the context (an explicit -np without --kv-unified, "
        "or --no-kv-unified) sized for the longest request, so the pool is slots x context; "
        "or size the unified pool (-c) for every slot's longest request at once."
    ),
)


def cmake_flags(platform: PlatformName) -> tuple[str, ...]:
    """CMake flags for a static, server-only build (Metal on Apple Silicon)."""
    return CMAKE_FLAGS + (("-DGGML_METAL=ON",) if platform == "macos-arm64" else ())


class LlamaCpp(Engine):
    """llama-server: continuous batching over `-np` slots by default."""

    name = "llama.cpp"
    default_model = "gemma3-270m"
    model_format = "gguf"
    aliases = ("llama-cpp", "llama_cpp", "llamacpp", "llama-server")
    description = "llama.cpp's llama-server (GGUF models), built locally and cached by version."
    package = "llama-cpp-python"
    default_version = "0.3.36"
    known_issues = (POOL_FULL,)
    capabilities = Capabilities(
        default_api="completions",
        tokenize_path="/tokenize",
        cache_prompt_field=True,
        metrics_path="/metrics",
    )

    def install_recipe(self, version: str, platform: PlatformName) -> InstallRecipe:
        return InstallRecipe(
            kind="llama-server",
            steps=(
                (
                    "pip",
                    "download",
                    "--no-binary",
                    ":all:",
                    "--no-deps",
                    f"{self.package}=={version}",
                ),
                ("cmake", "-G", "Ninja", *cmake_flags(platform)),
                ("ninja", "llama-server"),
            ),
            note="needs cmake, ninja and a C++ compiler",
        )

    def install_root(self, version: str, cache: Path) -> Path:
        return cache / "llama.cpp" / version

    def installation(self, version: str, root: Path) -> Installation:
        return Installation(
            name=self.name, version=version, root=root, executable=root / "bin" / "llama-server"
        )

    def version_argv(self, inst: Installation) -> list[str]:
        return [str(inst.executable), "--version"]

    def parse_version(self, text: str) -> str:
        """`llama-server --version` names a build and commit: 'b6543 (1a2b3c4)'."""
        found = _BUILD_RE.search(text)
        if found is None:
            raise ValueError(f"no llama.cpp build in {text[:200]!r}")
        build = found.group(1)
        return f"{'b' if build.isdigit() else ''}{build} ({found.group(2)})"

    def kv_pool_args(self, tokens: int) -> list[str]:
        """One context of ``tokens`` that every slot draws from (llama.cpp's own layout when
        it picks the slot count)."""
        return ["-c", str(tokens), "--kv-unified"]

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        slots = 1 if spec.mode == "simple" else spec.concurrency
        argv = [
            str(inst.executable),
            "-m",
            spec.model,
            "--host",
            spec.host,
            "--port",
            str(spec.port),
            "-t",
            str(os.cpu_count() or 1),
            "-np",
            str(slots),
            *(self.kv_pool_args(spec.kv_tokens) if spec.kv_tokens is not None else
              # The context is split evenly between slots; keep each slot's share fixed.
              ["-c", str(CTX_PER_SLOT * slots)]),
            "--metrics",
            "--no-webui",
        ]
        if spec.mode == "simple":
            argv.append("--no-cont-batching")
        return argv


ENGINE = LlamaCpp()
