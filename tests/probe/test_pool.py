"""Reading a server's KV pool, sizing the wave that fills it, and what the replies held."""

from __future__ import annotations

import pytest

from batchprobe.client.types import ErrorKind, RequestError
from batchprobe.probe.pool import (
    MAX_FILL_TOKENS,
    from_metrics,
    from_props,
    from_server_info,
    peak_in_flight,
    wave_size,
)
from batchprobe.results.pool import KvPool
from batchprobe.results.sessions import SessionResult, refused_up_front


def test_each_server_states_its_pool_its_own_way() -> None:
    warnings: list[str] = []
    metrics = ('# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size="16",'
               'cache_dtype="auto",num_gpu_blocks="512"} 1.0\n')
    vllm = from_metrics(metrics, warnings)
    assert vllm is not None and vllm.tokens == 8192 and vllm.per_request is None
    sglang = from_server_info({"max_total_num_tokens": 30000}, warnings)
    assert sglang is not None and sglang.tokens == 30000
    props = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 32}
    llama = from_props(props, warnings)
    # /props cannot say whether the slots share one pool: one context per slot, said so.
    assert llama is not None and (llama.tokens, llama.per_request) == (65536, 2048)
    assert llama.assumption is not None and "--kv-unified" in llama.assumption
    assert not warnings
    assert from_metrics("vllm:num_requests_running 0\n", warnings) is None
    assert from_server_info({"version": "1"}, warnings) is None and from_props(None, warnings) is None


@pytest.mark.parametrize("value", [0, -5, 10**10, "lots"])
def test_a_stated_pool_that_is_nonsense_is_a_warning_naming_it(value: object) -> None:
    warnings: list[str] = []
    assert from_server_info({"max_total_num_tokens": value}, warnings) is None
    props = {"default_generation_settings": {"n_ctx": value}, "total_slots": 4}
    assert from_props(props, warnings) is None
    if isinstance(value, int):
        assert any("max_total_num_tokens" in w and str(value) in w for w in warnings), warnings
        assert any("n_ctx" in w for w in warnings), warnings


def test_the_wave_holds_the_pool_half_again_each_request_fitting_alone() -> None:
    # One pool any request may fill: the fewest requests that hold it (8), not the depth.
    requests, each, why = wave_size(KvPool(tokens=2048, per_request=2048, source="the launch"), 16)
    assert why is None and (requests, each) == (8, 384) and 8 * each >= 1.25 * 2048
    # Four slots of one context each: a request uses at most 80% of its slot; as many as the
    # depth allows when fewer cannot hold it.
    requests, each, why = wave_size(KvPool(tokens=8000, per_request=2000, source="/props"), 8)
    assert why is None and (requests, each) == (8, 1500)
    requests, each, why = wave_size(KvPool(tokens=16000, per_request=1000, source="/props"), 32)
    assert why is None and (requests, each) == (30, 800)
    _, _, why = wave_size(KvPool(tokens=8000, per_request=1000, source="/props"), 8)
    assert why is not None and "cannot hold the pool" in why
    _, _, why = wave_size(KvPool(tokens=MAX_FILL_TOKENS + 1, source="/metrics"), 16)
    assert why is not None and "more tokens in flight than the run spends" in why


def _session(n: int, start: float, first: float | None, last: float | None, end: float,
             prompt: int | None, done: int | None, error: RequestError | None = None
             ) -> SessionResult:
    return SessionResult(arm="pressure@2", workload="decode", session=n, request_id=str(n),
                         start_s=start, first_token_s=first, last_token_s=last, end_s=end,
                         prompt_tokens=prompt, completion_tokens=done, error=error)


def test_the_peak_counts_prompts_and_streamed_tokens_of_the_requests_not_ended() -> None:
    # Two requests: 100 prompt + 100 answer from 1 s to 2 s, and one that started when the
    # first ended: never together, so the peak is one request's whole.
    one = _session(1, 0.0, 1.0, 2.0, 2.0, 100, 100)
    two = _session(2, 0.0, 2.5, 3.5, 3.5, 100, 100)
    assert peak_in_flight([one, two]) == 200
    both = _session(3, 0.0, 1.0, 2.0, 2.0, 50, 10)
    assert peak_in_flight([one, both]) == 260
    assert peak_in_flight([_session(4, 0.0, None, None, 1.0, None, None)]) is None


def test_only_a_429_or_503_before_any_token_is_a_refusal_up_front() -> None:
    def err(status: int) -> RequestError:
        return RequestError(kind=ErrorKind.HTTP_STATUS, message="x", http_status=status)

    assert refused_up_front(_session(1, 0.0, None, None, 0.1, None, None, err(503)))
    assert refused_up_front(_session(1, 0.0, None, None, 0.1, None, None, err(429)))
    assert not refused_up_front(_session(1, 0.0, None, None, 0.1, None, None, err(500)))
    assert not refused_up_front(_session(1, 0.0, 0.05, 0.05, 0.1, 10, 1, err(503)))
