"""The registry of runtime patches batchprobe can apply inside a launched engine."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from batchprobe.errors import ConfigError

__all__ = ["PATCHES", "PatchInfo", "get_patch", "patch_names"]


class PatchInfo(BaseModel):
    """One runtime patch: what it targets, what it fixes, which known issue it answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="What `--patch` takes, e.g. 'gemma4-attention'.")
    engine: str = Field(description="The engine whose bug it works around, e.g. 'vllm-mlx'.")
    versions: str = Field(description="Engine versions it is meant for (PEP 440 specifier).")
    module: str = Field(
        description="Module under batchprobe.patches that holds it; the shim loads it by file."
    )
    requires: str = Field(description="What must be installed beside the engine for it to act.")
    fixes: str = Field(description="The bug, in one sentence.")
    answers_issue_id: str = Field(
        description="The known-issue id (Diagnosis.issue_id) whose remedy this patch is."
    )


PATCHES: tuple[PatchInfo, ...] = (
    PatchInfo(
        name="gemma4-attention",
        engine="vllm-mlx",
        versions=">=0.3.0,<0.4.0",
        module="gemma4_attention",
        requires="mlx-vlm>=0.5.0",
        fixes=(
            "vllm-mlx's continuous-batching patch of mlx-vlm's Gemma-4 Attention.__call__ "
            "rejects the `shared_kv`/`offset` arguments of mlx-vlm >= 0.5.0, so every batched "
            "request ends with finish_reason 'error'; batchprobe's patch mirrors mlx-vlm's own "
            "method, snapshots the RoPE offset and trims masks wider than the keys."
        ),
        answers_issue_id="vllm-mlx-gemma4-shared-kv",
    ),
    PatchInfo(
        name="mlx-lm-exact-cache-hit",
        engine="mlx-lm",
        versions=">=0.31.2",
        module="mlx_lm_exact_cache_hit",
        requires="mlx-lm's LRUPromptCache in mlx_lm.models.cache (0.31.2 or later)",
        fixes=(
            "mlx-lm's prompt cache returns an exact hit with no token left to process (a prompt "
            "equal to an earlier prompt plus its whole answer), which kills the server's "
            "generation thread; batchprobe's patch leaves the last token to process."
        ),
        answers_issue_id="mlx-lm-exact-cache-hit",
    ),
)


def patch_names() -> list[str]:
    """The names `--patch` accepts, sorted."""
    return sorted(p.name for p in PATCHES)


def get_patch(name: str) -> PatchInfo:
    """The patch called ``name``; ConfigError naming the known patches otherwise."""
    for info in PATCHES:
        if info.name == name:
            return info
    raise ConfigError("patch", f"unknown {name!r}; known: {', '.join(patch_names())}")
