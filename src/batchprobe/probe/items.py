"""The run's work items, built once: one plan per traffic shape, sized with the server's tokenizer."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from batchprobe.client import OpenAIClient
from batchprobe.errors import ConfigError
from batchprobe.probe import discover
from batchprobe.probe.calibrate import calibrate_chars_per_token
from batchprobe.results.models import RunConfig
from batchprobe.results.shapes import ShapeStatus
from batchprobe.workload.haystack import DEFAULT_CHARS_PER_TOKEN
from batchprobe.workload.items import WorkItem
from batchprobe.workload.shapes import ShapeContext, ShapePlan, default_shapes


@dataclass
class Plans:
    """Every shape's plan, in wave order, and what became of each shape."""

    plans: list[ShapePlan] = field(default_factory=list)
    status: list[ShapeStatus] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def items(self) -> list[WorkItem]:
        return [i for plan in self.plans for i in plan.items]


def _any(wanted: set[str] | None, *shapes: str) -> bool:
    return wanted is None or any(s in wanted for s in shapes)


async def _context(
    cfg: RunConfig, run_id: str, client: OpenAIClient, extra: dict[str, JsonValue], props: JsonValue
) -> tuple[ShapeContext, str | None]:
    note = None
    cpt = None
    if "recall" in cfg.workloads:
        cpt, note = await calibrate_chars_per_token(client, run_id, cfg.prompt_style)
    wanted = set(cfg.shapes) if cfg.shapes is not None else None
    # Only what the shapes asked for is asked of the server. Tokenizer questions first:
    # llama-server drops a kept-alive connection after a stream without saying so, and
    # discovery requests are not resent.
    biases = await discover.bias_tokens(client) if _any(wanted, "params") else []
    per_number = (
        await discover.tokens_per_number(client)
        if _any(wanted, "early", "params")
        else discover.FALLBACK_TOKENS_PER_NUMBER
    )
    both_paths = _any(wanted, "join", "ragged", "early", "repeat", "params")
    ctx = ShapeContext(
        run_id=run_id,
        seed=cfg.seed,
        sessions=cfg.sessions,
        haystack_tokens=cfg.haystack_tokens,
        max_tokens=cfg.max_tokens,
        recall_max_tokens=cfg.recall_max_tokens,
        prompt_style=cfg.prompt_style,
        chars_per_token=cpt or DEFAULT_CHARS_PER_TOKEN,
        serves_chat=both_paths and await discover.serves_chat(client, run_id, extra),
        bias_tokens=biases,
        tokens_per_number=per_number,
        sliding_window=discover.sliding_window(cfg.model),
        context_tokens=discover.context_tokens(props),
    )
    return ctx, note


async def build_plans(
    cfg: RunConfig,
    run_id: str,
    client: OpenAIClient,
    extra: dict[str, JsonValue],
    props: JsonValue = None,
) -> Plans:
    """Build each shape asked for (or each the server supports); say why any was skipped.

    A shape named in ``cfg.shapes`` that the server cannot do is a :class:`ConfigError`.
    """
    registry = default_shapes()
    asked = cfg.shapes
    ctx, note = await _context(cfg, run_id, client, extra, props)
    result = Plans(warnings=[note] if note else [])
    asked_set = set(asked) if asked is not None else None
    streaming = _any(asked_set, "join") and await discover.streams(
        client, run_id, cfg.prompt_style, extra
    )
    why_not = {}
    for name in registry.names:
        shape = registry.get(name)
        why = shape.unavailable(ctx)
        if why is None and shape.needs_streaming and not streaming:
            why = "the server does not stream tokens one by one (join is set off by stream progress)"
        why_not[name] = why
    can = [n for n, why in why_not.items() if why is None]
    for name in asked or []:
        if why_not[name] is not None:
            raise ConfigError("--shapes", f"{name}: {why_not[name]}; allowed here: {', '.join(can)}")
    for name in registry.names:
        shape = registry.get(name)
        if asked is not None and name not in asked:
            result.status.append(ShapeStatus(shape=name, ran=False, reason="not in --shapes"))
            continue
        why = why_not[name]
        if why is not None:
            result.status.append(ShapeStatus(shape=name, ran=False, reason=why))
            continue
        plan = shape.build(ctx)
        kept = [i for i in plan.items if i.workload in cfg.workloads]
        if not kept:
            reason = f"--workloads {','.join(cfg.workloads)} leaves it no items"
            result.status.append(ShapeStatus(shape=name, ran=False, reason=reason))
            continue
        keep = {i.session for i in kept}
        plan.items = kept
        plan.sends = [s for s in plan.sends if s.item.session in keep]
        result.plans.append(plan)
        result.status.append(
            ShapeStatus(shape=name, ran=True, sessions=plan.sessions, notes=plan.notes)
        )
    return result
