"""The KV pool: where the server states it (or the launch made it), how large a wave fills it
past its size, and how many tokens that wave held in flight."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pydantic import JsonValue

from batchprobe.client import OpenAIClient
from batchprobe.results.pool import KvPool
from batchprobe.results.sessions import SessionResult

# The pool the pressure wave may fill: past this, the tokens in flight cost more than the run
# can spend (about twice a default step's prefill on two CPU cores).
MAX_FILL_TOKENS = 16384
# What the wave plans against the pool, and the least it must reach to count as past it.
OVER = 1.5
LEAST_OVER = 1.25
# A request of the wave uses at most this share of what one request may (it fits alone).
FIT = 0.8
# The wave's requests at least: enough that the pool fills while several are mid-answer
# (a preemption, a shifted token), few enough that the run stays in its budget.
LEAST_REQUESTS = 8
# A stated capacity beyond this is nonsense (no server holds a billion tokens of KV).
SANE_MAX = 10**9
# The pool batchprobe launches a managed engine with for the wave (tokens), and the knobs.
MANAGED_POOL_TOKENS = 2048

_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{([^}]*)\}", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _sane(value: int | None, what: str, warnings: list[str]) -> int | None:
    if value is None:
        return None
    if not 1 <= value <= SANE_MAX:
        warnings.append(f"KV pool: the server states {what} = {value}, not a pool size "
                        f"(1..{SANE_MAX}); not used")
        return None
    return value


def from_metrics(text: str | None, warnings: list[str]) -> KvPool | None:
    """vLLM's ``vllm:cache_config_info``: ``num_gpu_blocks`` blocks of ``block_size``."""
    found = _CACHE_INFO.search(text or "")
    if found is None:
        return None
    labels = dict(_LABEL.findall(found.group(1)))
    blocks = _sane(_int(labels.get("num_gpu_blocks")), "num_gpu_blocks", warnings)
    size = _sane(_int(labels.get("block_size")), "block_size", warnings)
    if blocks is None or size is None:
        return None
    tokens = _sane(blocks * size, "num_gpu_blocks x block_size", warnings)
    if tokens is None:
        return None
    return KvPool(tokens=tokens, source=f"/metrics vllm:cache_config_info ({blocks} x {size})")


def from_server_info(info: JsonValue, warnings: list[str]) -> KvPool | None:
    """SGLang's ``/get_server_info``: ``max_total_num_tokens``."""
    if not isinstance(info, dict) or "max_total_num_tokens" not in info:
        return None
    tokens = _sane(_int(info["max_total_num_tokens"]), "max_total_num_tokens", warnings)
    return None if tokens is None else KvPool(tokens=tokens, source="/get_server_info")


def from_props(props: JsonValue, warnings: list[str]) -> KvPool | None:
    """llama.cpp's ``/props``: ``n_ctx`` per slot and ``total_slots``. It does not say
    whether the slots share one pool (``--kv-unified``): assume one context per slot."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    n_ctx = _sane(_int(settings.get("n_ctx")) if isinstance(settings, dict) else None,
                  "n_ctx", warnings)
    slots = _sane(_int(props.get("total_slots")), "total_slots", warnings)
    if n_ctx is None or slots is None:
        return None
    return KvPool(
        tokens=n_ctx * slots, per_request=n_ctx, source=f"/props (n_ctx {n_ctx} x {slots} slots)",
        assumption=(f"assumed one context of {n_ctx} per slot; /props does not say whether "
                    f"the slots share one pool (--kv-unified), which would hold {n_ctx} alone"),
    )


async def stated_pool(
    client: OpenAIClient, props: JsonValue, warnings: list[str]
) -> KvPool | None:
    """The pool a URL's server states: vLLM's metrics, SGLang's server info, llama.cpp's
    props, in that order (the first that states one)."""
    pool = from_metrics(await client.get_text("/metrics"), warnings)
    if pool is None:
        pool = from_server_info(await client.get_json("/get_server_info"), warnings)
    return pool if pool is not None else from_props(props, warnings)


def wave_size(pool: KvPool, most: int) -> tuple[int, int, str | None]:
    """How many requests, of how many tokens each (prompt and answer), hold the pool ``OVER``
    times over, each fitting alone: the fewest that can, at least ``LEAST_REQUESTS`` and at
    most ``most`` (the sweep's deepest step); or why no such wave is run."""
    if pool.tokens > MAX_FILL_TOKENS:
        return 0, 0, (f"the KV pool holds {pool.tokens} tokens ({pool.source}): filling it past "
                      f"{LEAST_OVER:.0%} takes more tokens in flight than the run spends (pools "
                      f"up to {MAX_FILL_TOKENS} are filled)")
    limit = pool.tokens if pool.per_request is None else min(pool.tokens, pool.per_request)
    fewest = math.ceil(OVER * pool.tokens / int(FIT * limit))
    requests = min(most, max(LEAST_REQUESTS, fewest))
    each = min(math.ceil(OVER * pool.tokens / requests), int(FIT * limit))
    if each * requests < LEAST_OVER * pool.tokens:
        return 0, 0, (f"{requests} requests of at most {int(FIT * limit)} tokens each (one "
                      f"request may use {limit}) cannot hold the pool of {pool.tokens} tokens "
                      f"{LEAST_OVER:.0%} over")
    return requests, each, None


def peak_in_flight(sessions: Sequence[SessionResult], points: int = 400) -> int | None:
    """The most tokens the requests held at once, from their replies: each holds its prompt
    from its first token (prefill done) and its answer's tokens as they streamed, until it
    ended. None when no reply counted its tokens."""
    spans = [s for s in sessions if s.prompt_tokens is not None and s.first_token_s is not None]
    if not spans:
        return None
    start = min(s.first_token_s or 0.0 for s in spans)
    end = max(s.end_s for s in spans)
    best = 0
    for k in range(points + 1):
        t = start + (end - start) * k / points
        held = 0
        for s in spans:
            first = s.first_token_s or 0.0
            if not first <= t <= s.end_s:
                continue
            last = s.last_token_s if s.last_token_s is not None else s.end_s
            done = 1.0 if last <= first else min(1.0, (t - first) / (last - first))
            held += (s.prompt_tokens or 0) + round((s.completion_tokens or 0) * done)
        best = max(best, held)
    return best
