"""Hugging Face `transformers serve`: eager by default, `--continuous-batching` on request."""

from __future__ import annotations

from batchprobe.engines._base import PipEngine
from batchprobe.engines._types import Capabilities, Installation, LaunchSpec, PlatformName

# Default continuous-batching sizing takes 60% of free RAM; keep it bounded.
CB_NUM_BLOCKS = 64
CB_MAX_BATCH_TOKENS = 1024


class TransformersServe(PipEngine):
    """`transformers serve MODEL` on CPU (or MPS on Apple Silicon)."""

    name = "transformers"
    default_model = "gemma3-270m"
    aliases = ("transformers-serve", "transformers_serve")
    description = (
        "Hugging Face transformers' OpenAI server (`transformers serve`), HF-format models."
    )
    package = "transformers"
    default_version = "5.24.0"
    # 5.x serves /v1/completions too (measured with the tiny gemma3 in both modes).
    capabilities = Capabilities(default_api="completions", logprobs=False)

    def pip_requirements(self, version: str, platform: PlatformName) -> list[list[str]]:
        if platform == "macos-arm64":
            return [["torch"], [f"transformers[serving]=={version}"]]
        # The CPU torch first, or transformers' deps would pull a CUDA build.
        return [["torch==2.13.0"], [f"transformers[serving]=={version}"]]

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        if inst.root is None:
            raise TypeError("transformers serve needs a managed environment")
        argv = [
            str(inst.root / "bin" / "transformers"),
            "serve",
            spec.model,
            "--host",
            spec.host,
            "--port",
            str(spec.port),
            "--device",
            "cpu",
        ]
        if spec.mode == "batching":
            argv += [
                "--continuous-batching",
                "--cb-num-blocks",
                str(CB_NUM_BLOCKS),
                "--cb-max-batch-tokens",
                str(CB_MAX_BATCH_TOKENS),
            ]
        return argv


ENGINE = TransformersServe()
