"""SGLang (`python -m sglang.launch_server`): "simple" caps running requests at one.

Checked against SGLang 0.5.23's own CLI (``sglang/launch_server.py``; the options come
from the ``sglang/srt/arg_groups/fields`` dataclasses, ``--`` + field name): ``--model-path``,
``--host``, ``--port``, ``--max-running-requests`` and ``--random-seed`` are all there, as
in 0.5.3. ``python -m sglang.launch_server`` still works (``sglang serve`` is now
recommended, but older releases lack it). The ``[all]`` extra became test tools and
decord (0.5.3) or the diffusion stack (0.5.23); the server needs neither.
"""

from __future__ import annotations

from batchprobe.engines._base import PipEngine
from batchprobe.engines._types import Installation, LaunchSpec, PlatformName


class Sglang(PipEngine):
    """SGLang needs a GPU; its launch argv and version parsing are unit-tested only."""

    name = "sglang"
    description = "SGLang's server (GPU); --max-running-requests caps the batch."
    package = "sglang"
    default_version = "0.5.23"
    runs_here = False

    def pip_requirements(self, version: str, platform: PlatformName) -> list[list[str]]:
        return [[f"sglang=={version}"]]

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        running = 1 if spec.mode == "simple" else spec.concurrency
        return [
            str(inst.python),
            "-m",
            "sglang.launch_server",
            "--model-path",
            spec.model,
            "--host",
            spec.host,
            "--port",
            str(spec.port),
            "--max-running-requests",
            str(running),
            "--random-seed",
            "0",
            *(self.kv_pool_args(spec.kv_tokens) if spec.kv_tokens is not None else []),
        ]

    def kv_pool_args(self, tokens: int) -> list[str]:
        return ["--max-total-tokens", str(tokens)]


ENGINE = Sglang()
