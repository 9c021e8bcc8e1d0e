"""The tiny offline random models by family: one way to build any of them."""

from __future__ import annotations

from pathlib import Path

from batchprobe.errors import ConfigError
from batchprobe.models import tiny_gemma3, tiny_gemma4, tiny_llama, tiny_task

TINY_FAMILIES = ("gemma3", "gemma4", "llama")


def build_tiny(
    family: str, path: Path, seed: int = 0, cache_dir: Path | None = None, *, task: bool = False
) -> Path:
    """Write the tiny ``family`` model into ``path`` (replaced if present) and return it.

    ``task``: the constructed model that does the probe's tasks (``tiny_task``: llama, gemma3,
    gemma4, gemma4-wide);
    else random weights: gemma3 and llama are written under the mlx-lm environment's python
    (installed into ``cache_dir`` when missing); gemma4 needs nothing installed.
    """
    if task:
        return tiny_task.build_task(family, path, cache_dir=cache_dir)
    if family == "gemma4":
        return tiny_gemma4.build(path, seed)
    if family == "llama":
        return tiny_llama.build(path, seed, cache_dir=cache_dir)
    if family == "gemma3":
        return tiny_gemma3.build(path, seed, cache_dir=cache_dir)
    also = f" ({family} is built with task=True, --task)" if family in tiny_task.TASK_FAMILIES else ""
    raise ConfigError(
        "family", f"{family!r} has no random-weight model{also}; allowed: {', '.join(TINY_FAMILIES)}"
    )
