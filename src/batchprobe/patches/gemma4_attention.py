"""Runtime patch: mlx-vlm's Gemma-4 ``Attention.__call__``, made safe for continuous batching.

vllm-mlx 0.3.0 replaces this method when continuous batching starts, with a version written for
mlx-vlm 0.4.4's ``(x, mask, cache)`` signature. mlx-vlm 0.5.0 and later call it as
``(x, mask, cache, shared_kv=..., offset=...)`` and expect ``(output, (keys, values), offset)``
back, so every batched request fails with ``unexpected keyword argument 'shared_kv'``.

``patch_gemma4_attention_for_batching`` installs a method that mirrors mlx-vlm >= 0.5.0 exactly
and adds one behaviour: a mask wider than the keys is trimmed to its last ``keys.shape[-2]``
columns, because a batch builds one mask for its longest prompt while the sliding-window layers
cap their keys at the window.

This module is also loaded by file path inside engine processes (see ``_shim``), where
batchprobe itself is not installed: it must import nothing but the standard library at module
level, and mlx / mlx-vlm only inside the functions.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = [
    "COMPETING_PATCHES",
    "MARKER",
    "TARGET_MODULE",
    "apply",
    "mlx_vlm_version",
    "patch_gemma4_attention_for_batching",
]

logger = logging.getLogger("batchprobe.patches.gemma4_attention")

TARGET_MODULE = "mlx_vlm.models.gemma4.language"
MARKER = "_batch_patched"
# Engine functions that install their own (broken) version of the same method; the shim wraps
# them so that ours is re-applied after they run.
COMPETING_PATCHES: tuple[tuple[str, str], ...] = (
    ("vllm_mlx.patches.gemma4_mllm", "patch_gemma4_attention_for_batching"),
)
# The parameters of mlx-vlm >= 0.5.0's Attention.__call__, and the two that its DecoderLayer
# passes by keyword (the caller contract our replacement must honour).
_MIRRORED_PARAMS = ("self", "x", "mask", "cache", "shared_kv", "offset")
_CALLER_KEYWORDS = frozenset({"shared_kv", "offset"})


def patch_gemma4_attention_for_batching() -> bool:
    """Install the batching-safe ``Attention.__call__``; True when it is in place.

    False when mlx-vlm or its gemma4 module cannot be imported, and False with a warning when
    the installed mlx-vlm's Attention is not the one this patch mirrors (mlx-vlm < 0.5.0).
    A second call changes nothing and returns True.
    """
    try:
        language = importlib.import_module(TARGET_MODULE)
        mx = importlib.import_module("mlx.core")
    except ImportError as exc:
        logger.info("gemma4-attention: not applied, mlx-vlm's gemma4 is not importable (%s)", exc)
        return False
    attention = language.Attention
    current = attention.__call__
    if getattr(attention, MARKER, False) and getattr(current, MARKER, False):
        logger.debug("gemma4-attention: already applied")
        return True
    if not _mirrors_installed_version(language):
        logger.warning(
            "gemma4-attention: not applied, mlx-vlm %s has Attention.__call__%s; this patch "
            "mirrors mlx-vlm >= 0.5.0 %s",
            mlx_vlm_version(),
            inspect.signature(current),
            _MIRRORED_PARAMS[1:],
        )
        return False
    replaced = f"{getattr(current, '__module__', '?')}.{getattr(current, '__qualname__', '?')}"
    # The attention kernel the module itself uses (mlx-vlm's masked/quantized-aware wrapper).
    attention.__call__ = _make_batched_call(mx, language.scaled_dot_product_attention)
    setattr(attention, MARKER, True)
    logger.info(
        "gemma4-attention: replaced %s with batchprobe's batching-safe Attention.__call__ "
        "(mlx-vlm %s)",
        replaced,
        mlx_vlm_version(),
    )
    return True


def apply() -> bool:
    """The entry point the shim calls; same as ``patch_gemma4_attention_for_batching``."""
    return patch_gemma4_attention_for_batching()


def mlx_vlm_version() -> str:
    """The installed mlx-vlm's version, or "not installed"."""
    try:
        return importlib.metadata.version("mlx-vlm")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _mirrors_installed_version(language: ModuleType) -> bool:
    current = language.Attention.__call__
    if getattr(current, "__module__", None) == language.__name__:
        return tuple(inspect.signature(current).parameters) == _MIRRORED_PARAMS
    # Another patch (vllm-mlx 0.3.0's) already hides mlx-vlm's own signature; the caller's
    # contract in DecoderLayer still tells which mlx-vlm this is.
    caller = inspect.signature(language.DecoderLayer.__call__).parameters
    return _CALLER_KEYWORDS <= set(caller)


def _snapshot_offset(mx: Any, cache: Any) -> Any:
    """The cache's offset *before* the update, as a value the update cannot change.

    Batch caches keep ``offset`` as an mx.array and advance it with an in-place ``+=``: a plain
    reference taken before ``update_and_fetch`` would then give the queries a RoPE position
    one step ahead of the keys.
    """
    if cache is None:
        return 0
    offset = cache.offset
    return mx.array(offset) if isinstance(offset, mx.array) else offset


def _make_batched_call(mx: Any, sdpa: Callable[..., Any]) -> Callable[..., Any]:
    def __call__(  # becomes Attention.__call__
        self: Any,
        x: Any,
        mask: Any = None,
        cache: Any = None,
        shared_kv: tuple[Any, Any] | None = None,
        offset: Any = None,
    ) -> tuple[Any, tuple[Any, Any], Any]:
        batch, length, _ = x.shape
        queries = self.q_proj(x).reshape(batch, length, self.n_heads, self.head_dim)
        queries = self.q_norm(queries)
        if shared_kv is not None:
            keys, values = shared_kv
        else:
            keys, values, offset = _project_kv(self, x, cache, mx)
        queries = self.rope(queries.transpose(0, 2, 1, 3), offset=offset)
        if isinstance(mask, mx.array) and mask.shape[-1] > keys.shape[-2]:
            mask = mask[..., -keys.shape[-2] :]
        output = sdpa(queries, keys, values, cache=cache, scale=self.scale, mask=mask)
        output = output.transpose(0, 2, 1, 3).reshape(batch, length, -1)
        return self.o_proj(output), (keys, values), offset

    setattr(__call__, MARKER, True)
    return __call__


def _project_kv(self: Any, x: Any, cache: Any, mx: Any) -> tuple[Any, Any, Any]:
    batch, length, _ = x.shape
    keys = self.k_proj(x).reshape(batch, length, self.n_kv_heads, self.head_dim)
    # k_eq_v layers take their values from the raw key projection, before k_norm.
    if self.use_k_eq_v:
        values = keys
    else:
        values = self.v_proj(x).reshape(batch, length, self.n_kv_heads, self.head_dim)
    offset = _snapshot_offset(mx, cache)
    keys = self.rope(self.k_norm(keys).transpose(0, 2, 1, 3), offset=offset)
    values = self.v_norm(values).transpose(0, 2, 1, 3)
    if cache is not None:
        keys, values = cache.update_and_fetch(keys, values)
    return keys, values, offset
