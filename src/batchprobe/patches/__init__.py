"""Runtime patches for known engine bugs, and the shim that applies them inside an engine.

registry          PatchInfo, get_patch(name), patch_names()
shim              shim_dir(), shim_env(names): what a launcher adds to the engine process;
                  patch_outcomes(names, log lines): which applied, as the engine's log says
gemma4_attention  patch_gemma4_attention_for_batching() (mlx-vlm's Gemma-4 attention)
mlx_lm_exact_cache_hit  apply(): mlx-lm's prompt cache leaves an exact hit's last token
"""

from __future__ import annotations

from batchprobe.patches.registry import PatchInfo, get_patch, patch_names
from batchprobe.patches.shim import (
    PATCHES_ENV,
    PatchOutcome,
    patch_outcomes,
    shim_dir,
    shim_env,
)

__all__ = [
    "PATCHES_ENV",
    "PatchInfo",
    "PatchOutcome",
    "get_patch",
    "patch_names",
    "patch_outcomes",
    "shim_dir",
    "shim_env",
]
