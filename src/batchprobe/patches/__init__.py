"""Runtime patches for known engine bugs, and the shim that applies them inside an engine.

registry          PatchInfo, get_patch(name), patch_names()
shim              shim_dir(), shim_env(names): what a launcher adds to the engine process
gemma4_attention  patch_gemma4_attention_for_batching() (mlx-vlm's Gemma-4 attention)
mlx_lm_exact_cache_hit  apply(): mlx-lm's prompt cache leaves an exact hit's last token
"""

from __future__ import annotations

from batchprobe.patches.registry import PatchInfo, get_patch, patch_names
from batchprobe.patches.shim import PATCHES_ENV, shim_dir, shim_env

__all__ = ["PATCHES_ENV", "PatchInfo", "get_patch", "patch_names", "shim_dir", "shim_env"]
