"""mlx-lm's OpenAI-compatible server (`python -m mlx_lm.server`)."""

from __future__ import annotations

from batchprobe.engines._base import PipEngine
from batchprobe.engines._types import Installation, LaunchSpec, PlatformName


class MlxLm(PipEngine):
    """mlx-lm batches concurrent requests by itself; "simple" caps both concurrencies at 1."""

    name = "mlx-lm"
    aliases = ("mlx_lm",)
    description = "Apple MLX's reference server (mlx_lm.server); MLX-format model directories."
    package = "mlx-lm"
    default_version = "0.32.2"
    # A model that fails to load kills the generation thread; the HTTP server keeps
    # answering /health with 503 forever.
    fatal_startup_patterns = (r"generation thread died",)

    def pip_requirements(self, version: str, platform: PlatformName) -> list[list[str]]:
        if platform == "macos-arm64":
            return [[f"mlx-lm=={version}"]]
        # Linux has no Metal: mlx's CPU backend is a separate extra.
        return [["mlx[cpu]", f"mlx-lm=={version}"]]

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        slots = 1 if spec.mode == "simple" else spec.concurrency
        return [
            str(inst.python),
            "-m",
            "mlx_lm.server",
            "--model",
            spec.model,
            "--host",
            spec.host,
            "--port",
            str(spec.port),
            "--decode-concurrency",
            str(slots),
            "--prompt-concurrency",
            str(slots),
        ]


ENGINE = MlxLm()
