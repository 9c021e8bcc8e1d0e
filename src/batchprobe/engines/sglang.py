"""SGLang (`python -m sglang.launch_server`): "simple" caps running requests at one."""

from __future__ import annotations

from batchprobe.engines._base import PipEngine
from batchprobe.engines._types import Installation, LaunchSpec, PlatformName


class Sglang(PipEngine):
    """SGLang needs a GPU; its launch argv and version parsing are unit-tested only."""

    name = "sglang"
    description = "SGLang's server (GPU); --max-running-requests caps the batch."
    package = "sglang"
    default_version = "0.5.3"
    runs_here = False

    def pip_requirements(self, version: str, platform: PlatformName) -> list[list[str]]:
        return [[f"sglang[all]=={version}"]]

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
        ]


ENGINE = Sglang()
