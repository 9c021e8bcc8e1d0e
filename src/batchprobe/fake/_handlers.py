"""HTTP handlers: models, health, props and the two generation endpoints."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiohttp import web

from batchprobe import _json
from batchprobe.fake._answer import ERROR_ANSWER, Answer, clean_stop, corrupt, flip, runaway
from batchprobe.fake._clock import TokenClock, sleep_until
from batchprobe.fake._config import TURN_FAULTS
from batchprobe.fake._encode import DONE, Encoder, usage
from batchprobe.fake._model import respond, unknown_bias_id
from batchprobe.fake._progress import Progress, generate_silently, late_fault
from batchprobe.fake._requests import Api, BadRequest, parse, parse_tokenize
from batchprobe.fake._state import STATE_KEY, Flight, ServerState
from batchprobe.fake._stream import StreamPlan, huge_text_event, stream_fault, write_stream
from batchprobe.fake._tokens import corrupt_code
from batchprobe.workload.needle import asked_code, find_needle_code

# A cached prompt skips most of prefill, as llama.cpp's prompt cache does.
CACHED_TTFT_FRACTION = 0.1
POOL_BLOCK = 16
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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


async def metrics(request: web.Request) -> web.Response:
    """vLLM's scheduler gauges in the Prometheus text format: requests holding a generation
    slot, and those received, not finished, waiting for one."""
    state = request.app[STATE_KEY]
    label = f'{{model_name="{_label_value(state.config.model_id)}"}}'
    lines = []
    for name, value in (("running", state.running), ("waiting", state.waiting)):
        gauge = f"vllm:num_requests_{name}"
        lines += [f"# TYPE {gauge} gauge", f"{gauge}{label} {value}"]
    if state.pool is not None:
        # vLLM's pool: blocks of 16 tokens, and its preemption counter.
        blocks = state.pool.size // POOL_BLOCK
        info = f'{{block_size="{POOL_BLOCK}",num_gpu_blocks="{blocks}"}}'
        lines += ["# TYPE vllm:cache_config_info gauge", f"vllm:cache_config_info{info} 1.0",
                  "# TYPE vllm:num_preemptions_total counter",
                  f"vllm:num_preemptions_total{label} {state.pool.preemptions}"]
    body = ("\n".join(lines) + "\n").encode()
    return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})


def _label_value(value: str) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


async def props(request: web.Request) -> web.Response:
    """llama.cpp's /props, enough for a client to detect the ``cache_prompt`` switch and
    the context (the KV pool when there is one)."""
    state = request.app[STATE_KEY]
    n_ctx = state.pool.size if state.pool is not None else 32768
    settings = {"n_ctx": n_ctx, "params": {"cache_prompt": True}, "model": state.config.model_id}
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


async def not_found(request: web.Request) -> web.Response:
    """A path the server does not serve, answered as FastAPI does (transformers serve)."""
    request.app[STATE_KEY].requests["completions"] += 1
    return _json_response({"detail": "Not Found"}, status=404)


async def tokenize(request: web.Request) -> web.Response:
    """llama.cpp's /tokenize for the fake's vocabulary: one id per whitespace word."""
    state = request.app[STATE_KEY]
    try:
        content = parse_tokenize(await request.read())
    except BadRequest as exc:
        return error_response(400, str(exc), "invalid_request_error", exc.param)
    try:
        tokens = state.vocab.tokenize(content)
    except ValueError as exc:
        return error_response(400, f"content: {exc}", "invalid_request_error", "content")
    return _json_response({"tokens": tokens})


async def _generate(request: web.Request, api: Api) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    state.requests[api] += 1
    if state.stop_reason == "exit_after" or state.stalled:
        # A crashed engine answers nothing more: hold the request until the process is gone
        # (its connection then drops), rather than serve it while shutting down. A stalled
        # one holds it for ever, its HTTP front still up.
        await asyncio.Event().wait()
    try:
        gen = parse(api, await request.read())
    except BadRequest as exc:
        return error_response(400, str(exc), "invalid_request_error", exc.param)
    unknown = unknown_bias_id(gen.sampling, state.vocab)
    if unknown is not None:
        message = f"logit_bias: token id {unknown} is not in the vocabulary (see POST /tokenize)"
        return error_response(400, message, "invalid_request_error", "logit_bias")
    if state.config.fault == "busy_503" and state.in_flight:
        # vllm-mlx's simple engine rejects overlapping requests at once.
        return error_response(503, "text_generation_busy", "server_busy")
    # A conversation turn asks for one of several keys; any other recall prompt for its needle.
    code = asked_code(gen.prompt) or find_needle_code(gen.prompt)
    # The healthy answer, known on arrival: its length is what the early trigger compares.
    healthy = respond(gen, prompt=gen.prompt, code=code, sampling=gen.sampling, vocab=state.vocab)
    need = gen.prompt_tokens + len(healthy.texts)
    if state.pool is not None and state.pool.refuses(need):
        message = (f"the request needs {need} tokens of KV cache (prompt and answer); the pool "
                   f"holds {state.pool.size}")
        return error_response(400, message, "invalid_request_error")
    with state.track(gen, code, len(healthy.texts), request.transport) as flight:
        async with state.slot(flight):
            response = await _reply(request, state, flight, healthy)
    if state.config.fault in TURN_FAULTS:
        state.turns.remember(gen.prompt)
    state.note_answered()
    return response


async def _reply(
    request: web.Request, state: ServerState, flight: Flight, healthy: Answer
) -> web.StreamResponse:
    config, gen = state.config, flight.gen
    cached = state.cache_hit(gen.prompt, use_cache=gen.cache_prompt)
    clock = _clock(state, flight, cached=cached)
    await sleep_until(clock.due())
    if state.wedged:
        await asyncio.Event().wait()  # abort_wedge: generation stopped during its prefill
    # Faults are decided when the first token is due, so every request of a concurrent
    # burst has arrived and "concurrent" sees them all, as a batched prefill would.
    faulted = state.fault_applies(flight)
    if faulted and config.fault == "hang":
        await asyncio.get_running_loop().create_future()  # never answered; cancelled at shutdown
    if faulted and config.fault == "http_500":
        return error_response(500, "fake engine failure (fault http_500)", "server_error")
    if faulted and config.fault == "drop_after_read":
        return _drop(request)
    answer = _answer(state, flight, healthy) if faulted else healthy
    flight.planned = len(answer.texts)
    progress = Progress(state, flight, late_fault(state))
    encoder = Encoder(
        gen,
        model_id=config.model_id,
        request_id=f"fake{flight.seq:06d}",
        created=int(time.time()),
        logprobs_format=config.logprobs_format,
    )
    counted = _usage_counter(state, flight, cached=cached, leak=faulted)
    more = _more_choices(state, flight, healthy, faulted)
    headers = _echo_headers(request)
    if gen.stream:

        def tail(final: Answer) -> tuple[bytes, ...]:
            further = tuple(encoder.choice_chunk(i, a) for i, a in enumerate(more, start=1))
            if not gen.include_usage:
                return (*further, DONE)
            return (*further, encoder.usage_chunk(counted(final)), DONE)

        fault = stream_fault(config.fault) if faulted else None
        plan = StreamPlan(
            answer, clock, encoder, tail, progress, fault, close_after=config.close_after_stream,
            tokens_per_delta=config.tokens_per_delta,
        )
        response = await write_stream(request, plan, headers)
        if flight.hung_up:
            await _after_hang_up(state, clock, progress, flight)
        return response
    answer = await generate_silently(clock, progress, answer)
    # Only writing is left: the body goes out after this handler returns, _broken_body's
    # half before.
    state.finish(flight)
    if faulted and config.fault == "huge_event":
        huge = b"".join((b'{"choices":[{"index":0,"text":"', *huge_text_event()[1:-1], b'"}]}'))
        return web.Response(body=huge, content_type="application/json", headers=headers)
    body = encoder.body(answer, counted(answer), more)
    if progress.cut:
        return await _broken_body(request, body, "truncated_stream", headers)
    if faulted and config.fault in ("malformed_sse", "truncated_stream"):
        return await _broken_body(request, body, config.fault, headers)
    return web.Response(body=body, content_type="application/json", headers=headers)


async def _after_hang_up(
    state: ServerState, clock: TokenClock, progress: Progress, flight: Flight
) -> None:
    """A dropped request under abort_ignored generates on, unseen, to its planned length
    (holding its slot, counted running); under abort_held it holds its slot for good."""
    if state.config.fault == "abort_held":
        await asyncio.Event().wait()
    if state.config.fault != "abort_ignored":
        return
    while flight.generated < flight.planned:
        clock.advance()
        await sleep_until(clock.due())
        progress.token()


def _more_choices(
    state: ServerState, flight: Flight, healthy: Answer, faulted: bool
) -> list[Answer]:
    """Choices 1 and on of a request that asked for ``n`` (greedy: each the first's answer);
    under ``n_override`` those of another request asking for several, in flight beside it
    (vLLM PR #16863: parallel sampling's choices overriding each other's)."""
    gen = flight.gen
    if gen.n == 1:
        return []
    other = None
    if faulted and state.config.fault == "n_override":
        other = state.partner(flight, lambda f: f.gen.n > 1 and f.gen.prompt != gen.prompt)
    if other is None:
        return [healthy] * (gen.n - 1)
    theirs = respond(gen, prompt=other.gen.prompt, code=other.code, sampling=gen.sampling,
                     vocab=state.vocab)
    return [theirs] * (gen.n - 1)


def _usage_counter(
    state: ServerState, flight: Flight, *, cached: bool, leak: bool
) -> Callable[[Answer], dict[str, Any]]:
    """The reply's ``usage`` from its answer as it ended; under ``usage_leak`` (``leak``)
    another request's of the busy period: its prompt and its answer's tokens."""
    gen = flight.gen
    cached_tokens = gen.prompt_tokens if cached else 0
    source = None
    if leak and state.config.fault == "usage_leak":
        own = (gen.prompt_tokens, flight.planned)
        # One whose count fits this row's max_tokens: usage that only disagrees with the stream.
        source = state.partner(
            flight,
            lambda f: (f.gen.prompt_tokens, f.planned) != own and f.planned <= gen.max_tokens,
        )
    if source is None:
        return lambda final: usage(gen.prompt_tokens, len(final.texts), cached_tokens)
    other = source
    return lambda final: usage(other.gen.prompt_tokens, other.planned, cached_tokens)


def _clock(state: ServerState, flight: Flight, *, cached: bool) -> TokenClock:
    config = state.config
    ttft_s = config.ttft_ms / 1000.0 * (CACHED_TTFT_FRACTION if cached else 1.0)
    jitter_s = config.jitter_ms / 1000.0
    # Seeded per request so a rerun with the same seed and arrival order repeats itself.
    rng = random.Random(config.seed * 1_000_003 + flight.seq) if jitter_s > 0 else None
    start = asyncio.get_running_loop().time()
    return TokenClock(start=start, ttft_s=ttft_s, jitter_s=jitter_s, rng=rng, step=state.step_s)


def _answer(state: ServerState, flight: Flight, healthy: Answer) -> Answer:
    """What ``flight`` is answered under the fault decided at its first token."""
    fault = state.config.fault
    if fault == "ignore_max_tokens":
        return runaway(healthy, flight.gen.max_tokens)
    if fault in TURN_FAULTS:
        return _turn_answer(state, flight, healthy)
    if fault == "finish_error":
        return ERROR_ANSWER
    if fault == "clean_stop":
        return clean_stop(healthy)
    if fault == "flip_once":
        state.flipped = True
        return _corrupted(state, flight, flip)
    if fault in ("corrupt", "wrong_resend"):
        return _corrupted(state, flight, corrupt)
    if fault in _LEAKS:
        return _leaked(state, flight, fault)
    if fault == "abort_leak" and state.dropped is not None:
        other = state.dropped
        return respond(flight.gen, prompt=other.gen.prompt, code=other.code,
                       sampling=flight.gen.sampling, vocab=state.vocab)
    if fault == "stop_shared":
        return _stop_shared(state, flight)
    return healthy


def _corrupted(state: ServerState, flight: Flight, spoil: Callable[[Answer], Answer]) -> Answer:
    """A code with other last digits, or the answer's tokens spoiled: its own content only."""
    gen = flight.gen
    if flight.code is not None:
        code = corrupt_code(flight.code)
        return respond(gen, prompt=gen.prompt, code=code, sampling=gen.sampling, vocab=state.vocab)
    healthy = respond(gen, prompt=gen.prompt, code=None, sampling=gen.sampling, vocab=state.vocab)
    return spoil(healthy)


# What each leak takes from another request of the busy period, and which one it takes it from.
_LEAKS: dict[str, Callable[[Flight, Flight], bool]] = {
    # Another session's reply: its needle for a recall prompt, its text otherwise.
    "cross_talk": lambda me, f: _answers_otherwise(me, f),
    # Its sampling (temperature, top_p): a greedy row comes out sampled.
    "param_leak": lambda me, f: _sampling_of(f) != _sampling_of(me),
    "bias_leak": lambda me, f: f.gen.sampling.logit_bias != me.gen.sampling.logit_bias,
    # A smaller max_tokens: the row ends "length" at the other's count.
    "max_tokens_leak": lambda me, f: f.gen.max_tokens < me.gen.max_tokens,
    "stop_leak": lambda me, f: f.gen.stop != me.gen.stop,
    # Its presence and frequency penalties, applied to this row's own tokens.
    "penalty_leak": lambda me, f: _penalties_of(f) != _penalties_of(me),
    # Its JSON schema or grammar: an unconstrained row decodes under it.
    "constraint_leak": lambda me, f: (
        f.gen.sampling.constraint is not None and me.gen.sampling.constraint is None
    ),
}


def _leaked(state: ServerState, flight: Flight, fault: str) -> Answer:
    """``flight`` generated with one thing of another request's (see ``_LEAKS``)."""
    gen = flight.gen
    prompt, code, sampling = gen.prompt, flight.code, gen.sampling
    fits = _LEAKS[fault]
    other = state.partner(flight, lambda f: fits(flight, f))
    if other is not None:
        theirs = other.gen
        if fault == "cross_talk":
            prompt, code = theirs.prompt, other.code
        elif fault == "param_leak":
            temperature, top_p = _sampling_of(other)
            sampling = replace(sampling, temperature=temperature, top_p=top_p)
        elif fault == "bias_leak":
            sampling = replace(sampling, logit_bias=theirs.sampling.logit_bias)
        elif fault == "max_tokens_leak":
            gen = replace(gen, max_tokens=theirs.max_tokens)
        elif fault == "penalty_leak":
            presence, frequency = _penalties_of(other)
            sampling = replace(sampling, presence_penalty=presence, frequency_penalty=frequency)
        elif fault == "constraint_leak":
            sampling = replace(sampling, constraint=theirs.sampling.constraint)
        else:
            gen = replace(gen, stop=theirs.stop)
    return respond(gen, prompt=prompt, code=code, sampling=sampling, vocab=state.vocab)


def _sampling_of(flight: Flight) -> tuple[float, float]:
    return flight.gen.sampling.temperature, flight.gen.sampling.top_p


def _penalties_of(flight: Flight) -> tuple[float, float]:
    return flight.gen.sampling.presence_penalty, flight.gen.sampling.frequency_penalty


def _stop_shared(state: ServerState, flight: Flight) -> Answer:
    """stop_shared: ``flight`` generated with its own stop strings and those of every other
    request in flight, each cutting its text where it occurs (finish "stop")."""
    gen = flight.gen
    stops = dict.fromkeys((*gen.stop, *(s for f in state.beside(flight) for s in f.gen.stop)))
    shared = replace(gen, stop=tuple(stops))
    return respond(shared, prompt=gen.prompt, code=flight.code, sampling=gen.sampling,
                   vocab=state.vocab)


def _turn_answer(state: ServerState, flight: Flight, healthy: Answer) -> Answer:
    """conversation_leak and stale_turn (see fake._turns); a cold request is answered
    healthily (it is not served from the cache)."""
    gen = flight.gen
    if not gen.cache_prompt:
        return healthy
    if state.config.fault == "stale_turn":
        grown = state.turns.grown(gen.prompt)
        if grown is None:
            return healthy
        return respond(gen, prompt=grown, code=asked_code(grown), sampling=gen.sampling, vocab=state.vocab)
    code = state.turns.leaked_code(gen.prompt)
    if code is None:
        return healthy
    return respond(gen, prompt=gen.prompt, code=code, sampling=gen.sampling, vocab=state.vocab)


def _answers_otherwise(flight: Flight, other: Flight) -> bool:
    """``other`` would be answered differently: another code, or another decode prompt."""
    if flight.code is not None:
        return other.code is not None and other.code != flight.code
    return other.code is None and other.gen.prompt != flight.gen.prompt


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
