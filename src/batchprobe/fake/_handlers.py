"""HTTP handlers: models, health, props and the two generation endpoints."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from aiohttp import web

from batchprobe import _json
from batchprobe.fake._answer import (
    ERROR_ANSWER,
    Answer,
    decode_answer,
    recall_answer,
    runaway,
)
from batchprobe.fake._clock import TokenClock, run_clock, sleep_until
from batchprobe.fake._encode import DONE, Encoder, usage
from batchprobe.fake._requests import Api, BadRequest, GenRequest, parse
from batchprobe.fake._state import STATE_KEY, Flight, ServerState
from batchprobe.fake._stream import StreamPlan, huge_text_event, stream_fault, write_stream
from batchprobe.fake._tokens import corrupt_code
from batchprobe.workload.needle import find_needle_code

# A cached prompt skips most of prefill, as llama.cpp's prompt cache does.
CACHED_TTFT_FRACTION = 0.1


def _json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_json.dumps(body), status=status, content_type="application/json")


def error_response(status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    error = {"message": message, "type": kind, "param": param, "code": status}
    return _json_response({"error": error}, status)


async def models(request: web.Request) -> web.Response:
    model_id = request.app[STATE_KEY].config.model_id
    entry = {"id": model_id, "object": "model", "created": 0, "owned_by": "batchprobe-fake"}
    return _json_response({"object": "list", "data": [entry]})


async def health(request: web.Request) -> web.Response:
    return _json_response({"status": "ok"})


async def props(request: web.Request) -> web.Response:
    """llama.cpp's /props, enough for a client to detect the ``cache_prompt`` switch."""
    state = request.app[STATE_KEY]
    settings = {"n_ctx": 32768, "params": {"cache_prompt": True}, "model": state.config.model_id}
    return _json_response(
        {
            "default_generation_settings": settings,
            "total_slots": state.total_slots,
            "model_path": state.config.model_id,
            "build_info": "batchprobe-fake",
        }
    )


async def completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "completions")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "chat")


async def _generate(request: web.Request, api: Api) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    try:
        gen = parse(api, await request.read())
    except BadRequest as exc:
        return error_response(400, str(exc), "invalid_request_error", exc.param)
    if state.config.fault == "busy_503" and state.in_flight:
        # vllm-mlx's simple engine rejects overlapping requests at once.
        return error_response(503, "text_generation_busy", "server_busy")
    with state.track(find_needle_code(gen.prompt)) as flight:
        async with state.slot():
            response = await _reply(request, state, gen, flight)
    state.note_answered()
    return response


async def _reply(
    request: web.Request, state: ServerState, gen: GenRequest, flight: Flight
) -> web.StreamResponse:
    config = state.config
    cached = state.cache_hit(gen.prompt, use_cache=gen.cache_prompt)
    clock = _clock(state, flight, cached=cached)
    await sleep_until(clock.due())
    # Faults are decided when the first token is due, so every request of a concurrent
    # burst has arrived and "concurrent" sees them all, as a batched prefill would.
    faulted = state.fault_applies(flight)
    if faulted and config.fault == "hang":
        await asyncio.get_running_loop().create_future()  # never answered; cancelled at shutdown
    if faulted and config.fault == "http_500":
        return error_response(500, "fake engine failure (fault http_500)", "server_error")
    if faulted and config.fault == "drop_after_read":
        return _drop(request)
    answer = _answer(state, gen, flight, faulted)
    encoder = Encoder(
        gen, model_id=config.model_id, request_id=f"fake{flight.seq:06d}", created=int(time.time())
    )
    usage_body = usage(gen.prompt_tokens, len(answer.texts), gen.prompt_tokens if cached else 0)
    headers = _echo_headers(request)
    if gen.stream:
        tail = (encoder.usage_chunk(usage_body), DONE) if gen.include_usage else (DONE,)
        fault = stream_fault(config.fault) if faulted else None
        plan = StreamPlan(answer, clock, encoder, tail, fault)
        return await write_stream(request, plan, headers)
    await run_clock(clock, len(answer.texts))
    if faulted and config.fault == "huge_event":
        huge = b"".join((b'{"choices":[{"index":0,"text":"', *huge_text_event()[1:-1], b'"}]}'))
        return web.Response(body=huge, content_type="application/json", headers=headers)
    body = encoder.body(answer, usage_body)
    if faulted and config.fault in ("malformed_sse", "truncated_stream"):
        return await _broken_body(request, body, config.fault, headers)
    return web.Response(body=body, content_type="application/json", headers=headers)


def _clock(state: ServerState, flight: Flight, *, cached: bool) -> TokenClock:
    config = state.config
    ttft_s = config.ttft_ms / 1000.0 * (CACHED_TTFT_FRACTION if cached else 1.0)
    jitter_s = config.jitter_ms / 1000.0
    # Seeded per request so a rerun with the same seed and arrival order repeats itself.
    rng = random.Random(config.seed * 1_000_003 + flight.seq) if jitter_s > 0 else None
    start = asyncio.get_running_loop().time()
    return TokenClock(start=start, ttft_s=ttft_s, jitter_s=jitter_s, rng=rng, step=state.step_s)


def _answer(state: ServerState, gen: GenRequest, flight: Flight, faulted: bool) -> Answer:
    fault = state.config.fault if faulted else "none"
    if fault == "finish_error":
        return ERROR_ANSWER
    if flight.code is None:
        answer = decode_answer(gen, corrupt=fault == "corrupt")
    else:
        code = flight.code
        if fault == "cross_talk":
            code = state.other_code(flight) or code
        if fault == "corrupt":
            code = corrupt_code(code)
        answer = recall_answer(gen, code)
    return runaway(answer, gen.max_tokens) if fault == "ignore_max_tokens" else answer


def _drop(request: web.Request) -> web.StreamResponse:
    """drop_after_read: the request was read; close the connection without a byte of reply."""
    if request.transport is not None:
        request.transport.close()
    return web.Response()


def _echo_headers(request: web.Request) -> dict[str, str]:
    request_id = request.headers.get("x-request-id")
    return {"x-request-id": request_id} if request_id else {}


async def _broken_body(
    request: web.Request, body: bytes, fault: str, headers: dict[str, str]
) -> web.StreamResponse:
    """Non-streaming versions of the stream faults: a cut JSON body, then what ``fault`` says."""
    half = body[: len(body) // 2]
    if fault == "malformed_sse":
        return web.Response(body=half, content_type="application/json", headers=headers)
    response = web.StreamResponse(headers={"Content-Type": "application/json", **headers})
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(half)
    if request.transport is not None:
        request.transport.close()
    return response
