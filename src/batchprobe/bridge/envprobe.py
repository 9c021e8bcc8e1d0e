"""The ``env-probe`` preset's report: versions and hardware of a runner, as JSON."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata

from pydantic import BaseModel, ConfigDict

__all__ = ["ENGINE_PACKAGES", "EnvReport", "probe_environment"]

ENGINE_PACKAGES = (
    "batchprobe", "mlx", "mlx-lm", "mlx-vlm", "vllm-mlx", "vllm", "sglang", "torch",
    "transformers", "llama-cpp-python",
)  # fmt: skip
# Tools that describe the hardware, each with a fixed argv; absent ones are skipped.
_HARDWARE_COMMANDS = {
    "nvidia-smi": ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"],
    "sysctl": ["sysctl", "-n", "machdep.cpu.brand_string", "hw.memsize"],
}


class EnvReport(BaseModel):
    """What a runner is: interpreter, OS, CPU, memory, installed engine packages, GPUs."""

    model_config = ConfigDict(extra="forbid")
    python: str
    executable: str
    platform: str
    machine: str
    cpu_count: int | None
    memory_bytes: int | None
    packages: dict[str, str]
    """Installed versions of ENGINE_PACKAGES in this interpreter (absent ones omitted)."""
    hardware: dict[str, str]
    """Output of the hardware tools found on PATH."""


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _packages() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in ENGINE_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _hardware() -> dict[str, str]:
    found: dict[str, str] = {}
    for tool, argv in _HARDWARE_COMMANDS.items():
        if shutil.which(tool) is None:
            continue
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            found[tool] = f"error: {exc}"
            continue
        found[tool] = (done.stdout or done.stderr).strip()
    return found


def probe_environment() -> EnvReport:
    return EnvReport(
        python=platform.python_version(), executable=sys.executable,
        platform=platform.platform(), machine=platform.machine(), cpu_count=os.cpu_count(),
        memory_bytes=_memory_bytes(), packages=_packages(), hardware=_hardware(),
    )  # fmt: skip
