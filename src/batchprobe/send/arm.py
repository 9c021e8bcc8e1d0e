"""One arm's shared context, its warm-up, and turning a request record into a session."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import JsonValue

from batchprobe.client import Completer, OpenAIClient
from batchprobe.client.types import Api, CompletionRequest, ErrorKind, RequestRecord
from batchprobe.results.items import WorkItem
from batchprobe.results.models import ArmResult, PromptStyle, SessionResult
from batchprobe.results.thresholds import Thresholds
from batchprobe.workload.shapes import ShapePlan

_EXCERPT = 200


@dataclass
class ArmContext:
    """What every arm of a run shares."""

    run_id: str
    prompt_style: PromptStyle
    thresholds: Thresholds
    plans: list[ShapePlan]
    request_seed: int | None = None
    liveness_timeout_s: float = 20.0
    extra_body: dict[str, JsonValue] = field(default_factory=dict)
    # The body for the one wave sent with the prefix cache as users run it (repeat).
    cache_body: dict[str, JsonValue] = field(default_factory=dict)
    cold_note: str = "off"
    cache_note: str = "on"
    logprobs: int | None = None
    reference_logprobs: int | None = None
    """Top logprobs every serial request asks for (the server returns them): where a wrong
    answer left its reference, the reference says how near a tie it was."""
    nonce: str | None = None
    """Sent in place of the run id in every prompt (references to a URL: cold)."""
    on_session: Callable[[ArmResult, SessionResult], None] = lambda arm, s: None
    """Progress: a session came back (the replays and the throughput pairs show none)."""
    record: Callable[[SessionResult, WorkItem, WorkItem], None] = lambda s, item, planned: None
    """Every session, with the request it was sent and the item as planned (they differ for
    a later conversation turn): the run keeps them and scores the answer (the sending side
    never judges)."""

    @property
    def items(self) -> list[WorkItem]:
        return [i for plan in self.plans for i in plan.items]

    @property
    def default_api(self) -> Api:
        return "chat" if self.prompt_style == "chat" else "completions"


def _is_buffered(times: list[float], span_ms: float) -> bool:
    return len(times) >= 4 and (times[-1] - times[0]) * 1000.0 <= span_ms


def to_session(
    arm: str, item: WorkItem, rec: RequestRecord, t0: float, ctx: ArmContext
) -> SessionResult:
    """A request record as a session (unscored), its times relative to the arm start ``t0``."""
    times = rec.token_times
    result = SessionResult(
        arm=arm,
        item=item.key(),
        workload=item.workload,
        session=item.session,
        shape=item.shape,
        request_id=rec.request_id,
        error=rec.error,
        reconnect=rec.reconnect,
        prompt_head=item.prompt[:_EXCERPT],
        expected_code=item.expected_code,
        answer_excerpt=rec.text[:_EXCERPT],
        prompt_digest=item.digest(),
        text=rec.text,
        chunk_ends=rec.chunk_ends,
        logprobs=rec.logprobs,
        top_logprobs=rec.top_logprobs,
        finish_reason=rec.finish_reason,
        choices=rec.choices,
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
        hung_up=rec.hung_up,
    )
    return result


def side_request(
    request_id: str, tag: str, api: Api, max_tokens: int, extra_body: dict[str, JsonValue],
    seed: int | None = None,
) -> CompletionRequest:
    """An unmeasured request with its own prompt (``tag`` in it), so nothing it caches helps a
    measured one: a warm-up, or a liveness check's 1-token request."""
    return CompletionRequest(
        request_id=request_id,
        api=api,
        prompt=f"[{tag}] The weather today is",
        max_tokens=max_tokens,
        temperature=0.0,
        seed=seed,
        extra_body=dict(extra_body),
    )


def _side_request(arm: str, ctx: ArmContext, purpose: str, max_tokens: int) -> CompletionRequest:
    return side_request(f"{ctx.run_id}-{arm}-{purpose}", f"{purpose} {ctx.run_id} {arm}",
                        ctx.default_api, max_tokens, ctx.extra_body, ctx.request_seed)


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


TIMEOUTS = frozenset({ErrorKind.CONNECT_TIMEOUT, ErrorKind.READ_TIMEOUT, ErrorKind.TOTAL_TIMEOUT})
"""No reply at all in time (an error response or a dropped connection is a reply)."""


async def _within(client: Completer, request: CompletionRequest, timeout_s: float) -> RequestRecord | None:
    """``request`` sent; None when it did not end within ``timeout_s``."""
    try:
        return await asyncio.wait_for(client.complete(request), timeout_s)
    except asyncio.TimeoutError:
        return None


async def _liveness(client: Completer, arm: str, ctx: ArmContext) -> RequestRecord | None:
    """A 1-token request; None when it did not end within ``ctx.liveness_timeout_s``."""
    return await _within(client, _side_request(arm, ctx, "liveness", max_tokens=1),
                         ctx.liveness_timeout_s)


def _no_reply(record: RequestRecord | None) -> bool:
    """No reply at all: a server that answers with an error, or drops the connection, still
    runs."""
    return record is None or (record.error is not None and record.error.kind in TIMEOUTS)


async def silent(client: Completer, request: CompletionRequest, timeout_s: float) -> bool:
    """Whether ``request`` (a 1-token one) gets no reply at all within ``timeout_s``."""
    return _no_reply(await _within(client, request, timeout_s))


async def generates(client: Completer, arm: str, ctx: ArmContext) -> bool:
    """Whether the server still generates: one token within ``ctx.liveness_timeout_s``.

    Not a model list: mlx-lm keeps answering ``/v1/models`` after its generation thread died.
    """
    record = await _liveness(client, arm, ctx)
    return record is not None and (record.error is None or record.error.kind not in _DEAD)


async def answers_nothing(client: Completer, arm: str, ctx: ArmContext) -> bool:
    """Whether a 1-token request gets no reply at all within ``ctx.liveness_timeout_s``."""
    return _no_reply(await _liveness(client, arm, ctx))
