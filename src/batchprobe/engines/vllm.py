"""vLLM (`vllm serve`): always continuously batched; "simple" means one sequence at a time.

Checked against vLLM 0.33.0's own CLI: ``python -m vllm.entrypoints.openai.api_server``
is deprecated there (a DeprecationWarning pointing to ``vllm serve``), so batchprobe
launches the ``vllm`` console script of the environment (``vllm serve [model_tag]``,
also the documented entry point of the older releases such as 0.11.0). ``--host`` and
``--port`` come from its ``FrontendArgs`` (``vllm/entrypoints/common/cli_args.py``),
``--max-num-seqs`` and ``--seed`` from ``EngineArgs`` (``vllm/engine/arg_utils.py``).
"""

from __future__ import annotations

from pathlib import Path

from batchprobe.engines._base import PipEngine
from batchprobe.engines._types import Installation, LaunchSpec, PlatformName


class Vllm(PipEngine):
    """vLLM needs a CUDA/ROCm (or a from-source CPU) build; it cannot run on a 2-core CI box."""

    name = "vllm"
    description = "vLLM's OpenAI server (GPU); --max-num-seqs caps the running batch."
    package = "vllm"
    default_version = "0.33.0"
    runs_here = False

    def pip_requirements(self, version: str, platform: PlatformName) -> list[list[str]]:
        # On macOS use vllm-mlx instead; pip would only offer an unusable source build.
        return [[f"vllm=={version}"]]

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        seqs = 1 if spec.mode == "simple" else spec.concurrency
        return [
            str(Path(str(inst.python)).with_name("vllm")),
            "serve",
            spec.model,
            "--host",
            spec.host,
            "--port",
            str(spec.port),
            "--max-num-seqs",
            str(seqs),
            "--seed",
            "0",
            *(self.kv_pool_args(spec.kv_tokens) if spec.kv_tokens is not None else []),
        ]

    def kv_pool_args(self, tokens: int) -> list[str]:
        """vLLM's pool is blocks of 16 tokens (its default block size)."""
        return ["--num-gpu-blocks-override", str(max(1, tokens // 16))]


ENGINE = Vllm()
