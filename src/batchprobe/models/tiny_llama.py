"""A tiny random llama (MLX/HF layout), built offline: the tiny gemma3's twin without a sliding
window, every layer global attention, so a bug in a sliding-window cache cannot hide another.

Same size, tokenizer and chat template as :mod:`batchprobe.models.tiny_gemma3`; random weights,
so it checks crashes and greedy equivalence, never recall.
"""

from __future__ import annotations

from pathlib import Path

from batchprobe.models import tiny_gemma3


def build(
    path: Path, seed: int = 0, *, python: Path | None = None, cache_dir: Path | None = None
) -> Path:
    """Write the model into ``path`` (replaced if present) and return it."""
    return tiny_gemma3.build(path, seed, python=python, cache_dir=cache_dir, family="llama")
