"""Shaped traffic: one wave per shape, in order, each request's situation recorded.

A serial arm (concurrency 1) sends every item once, alone: the cold references. A concurrent
arm sends each shape's wave as its plan says (phases, stream-progress and finish triggers,
copies) and waits for the wave to end before the next one starts, so a failure belongs to
one shape.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from batchprobe._aio import gather_all
from batchprobe.client import Completer
from batchprobe.client.types import CompletionRequest, RequestRecord
from batchprobe.errors import EngineStalled
from batchprobe.results.items import WorkItem
from batchprobe.results.models import ArmResult, ArmSpec
from batchprobe.results.shapes import Situation, WaveResult
from batchprobe.send.arm import TIMEOUTS, ArmContext, answers_nothing, to_session
from batchprobe.send.load import InFlight
from batchprobe.send.replay import sent_after
from batchprobe.send.wave_state import Wave
from batchprobe.workload.constraints import request_fields
from batchprobe.workload.conversation import continue_turn
from batchprobe.workload.shapes import Send, ShapePlan
from batchprobe.workload.shapes.params import COMPARED_ROLES


@dataclass
class _Turns:
    """One plan's items as this arm sent them and what each answered: a conversation's later
    turn is built from the turn before (``Turn.continues``), a re-send sends its first copy's."""

    sent: dict[int, WorkItem] = field(default_factory=dict)
    answers: dict[int, str] = field(default_factory=dict)

    def resolve(self, send: Send) -> WorkItem:
        item = send.item
        if send.copy_index and item.session in self.sent:
            return self.sent[item.session]
        before = item.turn.continues if item.turn is not None else None
        if before is not None:
            item = continue_turn(item, self.sent[before], self.answers.get(before, ""))
        if not send.copy_index:
            self.sent[item.session] = item
        return item

    def answered(self, send: Send, record: RequestRecord) -> None:
        if not send.copy_index:
            self.answers[send.item.session] = record.text


def _nonce(item: WorkItem, ctx: ArmContext) -> str | None:
    """The nonce a reference is sent with, if any: never for the rows the divergence test
    compares, whose text must come from the very prompt their wave sent."""
    return None if item.role in COMPARED_ROLES else ctx.nonce


def request_for(item: WorkItem, copy_index: int, arm: ArmSpec, ctx: ArmContext, cached: bool) -> CompletionRequest:
    """The request ``item`` goes out as in ``arm`` (``repro`` writes its body as sent)."""
    params = item.params
    serial = ctx.reference_logprobs if arm.concurrency == 1 else None
    extra = dict(ctx.cache_body if cached else ctx.extra_body)
    for name in ("top_p", "stop", "logit_bias", "presence_penalty", "frequency_penalty"):
        value = getattr(params, name)
        if value is not None:
            extra[name] = value
    if params.constraint is not None:
        extra.update(request_fields(params.constraint))
    prompt, messages = item.prompt, list(item.history)
    nonce = _nonce(item, ctx)
    if nonce is not None:
        prompt = prompt.replace(ctx.run_id, nonce)
        messages = [m.model_copy(update={"content": m.content.replace(ctx.run_id, nonce)})
                    for m in messages]
    return CompletionRequest(
        request_id=f"{ctx.run_id}-{arm.name}-{item.shape}-{item.session}-{copy_index}",
        api=item.api or ctx.default_api,
        prompt=prompt,
        messages=messages,
        max_tokens=item.max_tokens,
        temperature=params.temperature,
        seed=ctx.request_seed,
        logprobs=max((k for k in (item.top_logprobs, ctx.logprobs, serial) if k is not None),
                     default=None),
        n=params.n or 1,
        extra_body=extra,
    )


async def _send(
    client: Completer,
    arm: ArmResult,
    ctx: ArmContext,
    wave: Wave,
    send: Send,
    times: tuple[float, float],
    limit: asyncio.Semaphore,
    cached: bool,
    turns: _Turns,
) -> None:
    t0, wave_t0 = times
    await wave.wait(send.after)
    if send.delay_s:
        await asyncio.sleep(send.delay_s)
    item = turns.resolve(send)
    hang_up = asyncio.Event() if send.hang_up is not None else None
    async with limit:
        arrival = time.perf_counter() - wave_t0
        state, in_flight, decoding = wave.arrive(item.session, send.copy_index,
                                                 item.params.n or 1)
        request = request_for(item, send.copy_index, arm.spec, ctx, cached)
        if arm.request_body is None:
            arm.request_body = client.request_body(request)
        watch = None
        if send.hang_up is not None and hang_up is not None:
            watch = asyncio.ensure_future(wave.hang_up(state, send.hang_up, hang_up))
        try:
            record = await client.complete(request, lambda n: wave.progress(state, n), hang_up)
            turns.answered(send, record)
        finally:
            if watch is not None:
                watch.cancel()
            wave.leave(state)
    session = to_session(arm.spec.name, item, record, t0, ctx)
    session.situation = Situation(
        shape=item.shape,
        api=request.api,
        copy_index=send.copy_index,
        arrival_s=round(arrival, 4),
        phase=send.phase,
        after=sent_after(send.after),
        delay_s=send.delay_s,
        in_flight_at_arrival=in_flight,
        decoding_at_arrival=decoding,
        departures=state.departures,
        more_departures=state.more_departures,
        max_tokens=item.max_tokens,
        params=item.params.describe(),
        sampled=not item.params.greedy,
        bias_text=item.params.bias_text,
        stop=list(item.params.stop or []),
        constraint=item.params.constraint,
        choices=item.params.n,
        role=item.role,
        prefix_cache=cached,
        conversation=item.turn.conversation if item.turn is not None else None,
        turn=item.turn.index if item.turn is not None else None,
        nonce=_nonce(item, ctx),
        waiting_at_hang_up=state.waiting_at_hang_up if record.hung_up else None,
    )
    ctx.record(session, item, send.item)
    arm.sessions.append(session)
    ctx.on_session(arm, session)
    if record.error is not None and record.error.kind in TIMEOUTS:
        await _still_generating(client, arm, ctx, wave, record.error.kind.value)


async def _still_generating(
    client: Completer, arm: ArmResult, ctx: ArmContext, wave: Wave, kind: str
) -> None:
    """After a request timed out: raise :class:`EngineStalled` when a 1-token request gets no
    reply at all and no stream of the wave moved for a liveness window before the timeout nor
    during the check, so an arm whose server stopped generating ends now instead of every
    request waiting out its own timeout (a dead worker thread behind a live HTTP front). A
    slow server that is still prefilling or decoding others is not stalled."""
    failed_at = time.perf_counter()
    async with wave.checking:  # one check at a time: checks never overlap each other
        if wave.alive_at >= failed_at:
            return
        if not await answers_nothing(client, arm.spec.name, ctx):
            wave.alive_at = time.perf_counter()
            return
        if wave.moved_at > failed_at - ctx.liveness_timeout_s:
            return
    arm.server_alive_after = False
    raise EngineStalled(
        f"the server stopped generating during arm {arm.spec.name}: a request ended with "
        f"{kind}, then a 1-token request got no token within {ctx.liveness_timeout_s:g} s "
        "and no stream had moved for as long before it"
    )


def sends_alone(spec: ArmSpec) -> bool:
    """A serial arm sends each item once, alone and cold (the references); a replay sends
    its case as the wave did, at any depth."""
    return spec.concurrency == 1 and spec.role != "replay"


async def _phases(
    client: Completer,
    arm: ArmResult,
    ctx: ArmContext,
    plan: ShapePlan,
    wave: Wave | None,
    times: tuple[float, float],
    limit: asyncio.Semaphore,
) -> None:
    """One plan's sends, phase after phase; ``wave`` None: a fresh one per phase."""
    serial = sends_alone(arm.spec)
    # Serial arms are the cold references; only a concurrent repeat or conversation wave (or
    # a replay of one, at any depth) runs with the cache.
    cached = plan.prefix_cache and not serial
    sends = [Send(i) for i in plan.items] if serial else plan.sends
    turns = _Turns()
    for phase in sorted({s.phase for s in sends}):
        batch = [s for s in sends if s.phase == phase]
        shared = wave or Wave()
        if serial:
            for send in batch:
                await _send(client, arm, ctx, shared, send, times, limit, cached, turns)
        else:
            await gather_all(
                *(_send(client, arm, ctx, shared, s, times, limit, cached, turns) for s in batch)
            )


def _wave_result(
    arm: ArmResult, ctx: ArmContext, plan: ShapePlan, wall_s: float, notes: list[str]
) -> WaveResult:
    mine = set(plan.sessions)
    done = [s for s in arm.sessions if s.shape == plan.shape and s.session in mine]
    cached = plan.prefix_cache and not sends_alone(arm.spec)
    reported = [s.cached_tokens for s in done if s.cached_tokens is not None]
    return WaveResult(
        shape=plan.shape,
        sessions=plan.sessions,
        requests=len(done),
        wall_s=round(wall_s, 3),
        prefix_cache=ctx.cache_note if cached else ctx.cold_note,
        cached_prompt_tokens=sum(reported) if reported else None,
        notes=[*plan.notes, *notes],
    )


async def run_waves(client: Completer, arm: ArmResult, ctx: ArmContext) -> float:
    """Every shape's wave in order; return the arm's wall time."""
    t0 = time.perf_counter()
    limit = asyncio.Semaphore(arm.spec.concurrency)
    for plan in ctx.plans:
        wave_t0 = time.perf_counter()
        await _phases(client, arm, ctx, plan, None, (t0, wave_t0), limit)
        arm.waves.append(_wave_result(arm, ctx, plan, time.perf_counter() - wave_t0, []))
    return time.perf_counter() - t0


async def run_mixed_wave(
    client: Completer, arm: ArmResult, ctx: ArmContext, t0: float | None = None,
    flight: InFlight | None = None,
) -> float:
    """A sweep step: every shape's sends in one wave, at most ``concurrency`` in flight.

    Each shape keeps its own phases and triggers; every request's situation counts the whole
    step in flight, so a joiner joins whatever the other shapes are decoding. Session times
    are relative to ``t0`` (the step's start; default now). Returns the wave's wall time.
    """
    started = time.perf_counter()
    t0 = started if t0 is None else t0
    limit = asyncio.Semaphore(arm.spec.concurrency)
    wave = Wave(flight)

    async def one(plan: ShapePlan) -> float:
        await _phases(client, arm, ctx, plan, wave, (t0, started), limit)
        return time.perf_counter() - started

    walls = await gather_all(*(one(plan) for plan in ctx.plans))
    note = [f"mixed with every other shape at {arm.spec.concurrency} in flight"]
    for plan, wall in zip(ctx.plans, walls):
        arm.waves.append(_wave_result(arm, ctx, plan, wall, note if len(ctx.plans) > 1 else []))
    return time.perf_counter() - started
