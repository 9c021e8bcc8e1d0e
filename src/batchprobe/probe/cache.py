"""The cache policy: throughput waves cold, the repeat and conversation waves with the cache
as users run it."""

from __future__ import annotations

from pydantic import JsonValue

from batchprobe.probe.endpoint import CacheControl
from batchprobe.results.models import ArmSpec, RunConfig

_SWITCH = "cache_prompt"
# The shapes whose plans ask for the prefix cache (ShapePlan.prefix_cache).
CACHED_SHAPES = frozenset({"repeat", "conversation"})


def wants_cache(config: RunConfig) -> bool:
    """A plan of shapes with a cached wave (a replay's arm says its own cache)."""
    if config.replay is not None:
        return False
    return config.shapes is None or bool(CACHED_SHAPES & set(config.shapes))


def launch_spec(spec: ArmSpec, config: RunConfig) -> ArmSpec:
    """A concurrent arm that runs repeat or conversation is launched with the engine's default
    prefix cache.

    Only engines with no per-request switch (vllm-mlx) read this; its other waves' prompts
    share no prefix with anything sent before, and their cached tokens are recorded.
    """
    if spec.concurrency > 1 and spec.mode is not None and wants_cache(config):
        return spec.model_copy(update={"prefix_cache": True})
    return spec


def cache_policy(
    cold_body: dict[str, JsonValue], control: CacheControl, spec: ArmSpec
) -> tuple[dict[str, JsonValue], str, str]:
    """(the body for the cached wave, how cold waves stand, how the cached wave stands)."""
    if _SWITCH in cold_body:
        warm = {k: v for k, v in cold_body.items() if k != _SWITCH}
        return warm, "off (cache_prompt false per request)", "on (cache_prompt true, the default)"
    if control == "restart":
        if spec.prefix_cache:
            return (
                dict(cold_body),
                (
                    "engine launched with its default prefix cache for the repeat and conversation "
                    "waves; this wave's prompts share no prefix with earlier ones"
                ),
                "on (engine launched with its default prefix cache)",
            )
        return dict(cold_body), "off (fresh server per arm)", "off (engine launched without it)"
    return dict(cold_body), "not controlled (no per-request switch)", "the server's default"
