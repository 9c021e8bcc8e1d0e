"""Running one arm: warm-up, then each workload at the arm's concurrency."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from pydantic import JsonValue

from batchprobe.client import OpenAIClient
from batchprobe.client.types import CompletionRequest, ErrorKind, RequestRecord
from batchprobe.results.models import ArmResult, PromptStyle, SessionResult
from batchprobe.results.thresholds import Thresholds
from batchprobe.workload.items import WorkItem
from batchprobe.workload.scoring import score_recall

_EXCERPT = 200


@dataclass
class ArmContext:
    """What every arm of a run shares."""

    run_id: str
    prompt_style: PromptStyle
    thresholds: Thresholds
    items: list[WorkItem]
    request_seed: int | None = None
    liveness_timeout_s: float = 20.0
    extra_body: dict[str, JsonValue] = field(default_factory=dict)
    logprobs: int | None = None
    on_session: Callable[[ArmResult, SessionResult], None] = lambda arm, s: None

    @cached_property
    def codes(self) -> dict[int, str]:
        """Every session's needle code (scored against every recall answer)."""
        return {i.session: i.expected_code for i in self.items if i.expected_code is not None}


def _is_buffered(times: list[float], span_ms: float) -> bool:
    return len(times) >= 4 and (times[-1] - times[0]) * 1000.0 <= span_ms


def to_session(
    arm: str, item: WorkItem, rec: RequestRecord, t0: float, ctx: ArmContext
) -> SessionResult:
    """Score a request record and put its times relative to the arm start ``t0``."""
    times = rec.token_times
    result = SessionResult(
        arm=arm,
        workload=item.workload,
        session=item.session,
        request_id=rec.request_id,
        error=rec.error,
        prompt_head=item.prompt[:_EXCERPT],
        expected_code=item.expected_code,
        answer_excerpt=rec.text[:_EXCERPT],
        text=rec.text,
        chunk_ends=rec.chunk_ends,
        retries=rec.retries,
        logprobs=rec.logprobs,
        finish_reason=rec.finish_reason,
        prompt_tokens=rec.prompt_tokens,
        completion_tokens=rec.completion_tokens,
        cached_tokens=rec.cached_tokens,
        start_s=rec.started_at - t0,
        first_token_s=None if rec.first_token_at is None else rec.first_token_at - t0,
        last_token_s=times[-1] - t0 if times else None,
        end_s=rec.finished_at - t0,
        itl_s=[b - a for a, b in itertools.pairwise(times)],
        streamed=rec.streamed,
        buffered=rec.streamed and _is_buffered(times, ctx.thresholds.buffered_span_ms),
    )
    if item.workload == "recall" and item.expected_code is not None:
        # An error is an error, not a miss: only answers are scored (cross-talk still counts).
        score = score_recall(rec.text, item.session, ctx.codes)
        result.hit = score.hit if rec.error is None else None
        result.cross_talk_from = score.cross_talk_from
    return result


def _request(item: WorkItem, arm: str, ctx: ArmContext) -> CompletionRequest:
    # What an ordinary client sends: greedy by temperature 0 alone. No seed unless asked for:
    # mlx-lm, for one, serves every seeded request on its one-at-a-time path.
    return CompletionRequest(
        request_id=f"{ctx.run_id}-{arm}-{item.workload}-{item.session}",
        api="chat" if ctx.prompt_style == "chat" else "completions",
        prompt=item.prompt,
        max_tokens=item.max_tokens,
        temperature=0.0,
        seed=ctx.request_seed,
        logprobs=ctx.logprobs,
        extra_body=dict(ctx.extra_body),
    )


def _side_request(arm: str, ctx: ArmContext, purpose: str, max_tokens: int) -> CompletionRequest:
    """An unmeasured request with its own prompt, so nothing it caches helps a measured one."""
    return CompletionRequest(
        request_id=f"{ctx.run_id}-{arm}-{purpose}",
        api="chat" if ctx.prompt_style == "chat" else "completions",
        prompt=f"[{purpose} {ctx.run_id} {arm}] The weather today is",
        max_tokens=max_tokens,
        temperature=0.0,
        seed=ctx.request_seed,
        extra_body=dict(ctx.extra_body),
    )


async def warm_up(client: OpenAIClient, arm: str, ctx: ArmContext) -> RequestRecord:
    return await client.complete(_side_request(arm, ctx, "warm-up", max_tokens=4))


# Failures that mean nothing generates any more; an HTTP error or finish_reason "error" is
# still an answer (the arm's errors already judge those).
_DEAD = frozenset(
    {
        ErrorKind.CONNECT_ERROR,
        ErrorKind.CONNECT_TIMEOUT,
        ErrorKind.READ_TIMEOUT,
        ErrorKind.TOTAL_TIMEOUT,
        ErrorKind.DISCONNECTED,
    }
)


async def generates(client: OpenAIClient, arm: str, ctx: ArmContext) -> bool:
    """Whether the server still generates: one token within ``ctx.liveness_timeout_s``.

    Not a model list: mlx-lm keeps answering ``/v1/models`` after its generation thread died.
    """
    request = _side_request(arm, ctx, "liveness", max_tokens=1)
    try:
        record = await asyncio.wait_for(client.complete(request), ctx.liveness_timeout_s)
    except asyncio.TimeoutError:
        return False
    return record.error is None or record.error.kind not in _DEAD


async def run_workloads(client: OpenAIClient, arm: ArmResult, ctx: ArmContext) -> float:
    """Run every item at the arm's concurrency, one workload after the other; return wall time."""
    t0 = time.perf_counter()
    limit = asyncio.Semaphore(arm.spec.concurrency)

    first = next((i for i in ctx.items), None)
    if first is not None:
        arm.request_body = client.request_body(_request(first, arm.spec.name, ctx))

    async def one(item: WorkItem) -> None:
        async with limit:
            record = await client.complete(_request(item, arm.spec.name, ctx))
        session = to_session(arm.spec.name, item, record, t0, ctx)
        arm.sessions.append(session)
        ctx.on_session(arm, session)

    for workload in ("recall", "decode"):
        batch = [i for i in ctx.items if i.workload == workload]
        if arm.spec.concurrency == 1:
            for item in batch:
                await one(item)
        elif batch:
            await asyncio.gather(*(one(i) for i in batch))
    return time.perf_counter() - t0
