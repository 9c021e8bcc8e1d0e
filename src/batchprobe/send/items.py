"""The run's work items: one plan per traffic shape, sized with the server's tokenizer.

Without a sweep they are built once, at ``--sessions``. A sweep builds fresh items for each
depth (their own sessions and needles, so no step is flattered by another's cache), sized so
that a step's one wave has at least as many requests as the depth keeps in flight.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

from pydantic import JsonValue

from batchprobe.errors import ConfigError
from batchprobe.results.items import Api, Constraint, WorkItem
from batchprobe.results.models import RunConfig
from batchprobe.results.shapes import ShapeStatus
from batchprobe.send import discover
from batchprobe.send.asking import Asker
from batchprobe.send.calibrate import calibrate_chars_per_token
from batchprobe.workload.haystack import DEFAULT_CHARS_PER_TOKEN
from batchprobe.workload.shapes import (
    AfterTokens,
    BiasToken,
    Send,
    ShapeContext,
    ShapePlan,
    default_shapes,
)
from batchprobe.workload.shapes.params import CHOICES, TOP_LOGPROBS


@dataclass
class Plans:
    """Every shape's plan, in wave order, and what became of each shape.

    ``steps``: a sweep's planned depths and each one's plans; ``plans`` is then every step's
    plans in turn (what the serial baseline sends). ``at`` builds a fresh step (bisection).
    """

    plans: list[ShapePlan] = field(default_factory=list)
    status: list[ShapeStatus] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    steps: dict[int, list[ShapePlan]] = field(default_factory=dict)
    throughput: dict[int, ShapePlan] = field(default_factory=dict)
    shape_ctx: ShapeContext | None = None
    names: list[str] = field(default_factory=list)
    workloads: list[str] = field(default_factory=list)

    @property
    def items(self) -> list[WorkItem]:
        return [i for plan in self.plans for i in plan.items]

    def at(self, depth: int) -> tuple[ShapePlan | None, list[ShapePlan]]:
        """Fresh plans for one sweep step at ``depth`` (new sessions and needles): its
        throughput phase (``depth`` counting prompts at once, the burst's decode half: short
        prompts, so the figure is decode batching, not prefill) and its mixed wave (every
        shape at the least size that sends ``depth`` requests; depth 1 is the burst alone,
        every other shape is about requests sharing the server)."""
        ctx = self.shape_ctx
        if ctx is None:
            raise RuntimeError("build_plans kept no shape context")
        throughput = None
        if "burst" in self.names and "decode" in self.workloads:
            ctx.sessions = depth
            (burst,) = _build(ctx, ["burst"], ["decode"])
            burst.sends = [Send(i) for i in burst.items]
            burst.notes = [f"the throughput phase: {depth} counting prompts at once"]
            throughput = burst
        # Depth 1 is the burst alone; deeper, the burst's part is its throughput phase (the
        # other shapes send recall prompts together enough).
        names = self.names if depth > 1 else [n for n in self.names if n == "burst"] or self.names
        if depth > 1 and throughput is not None:
            names = [n for n in names if n != "burst"]
        ctx.depth = depth
        ctx.sessions = _size_for(ctx, names, self.workloads, depth, throughput is not None)
        mixed = _build(ctx, names, self.workloads)
        for plan in mixed:
            if plan.shape == "burst" and throughput is not None:
                # Its decode half is the throughput phase.
                plan.items = [i for i in plan.items if i.workload != "decode"]
                plan.sends = [x for x in plan.sends if x.item.workload != "decode"]
        return throughput, [p for p in mixed if p.items]


def _build(ctx: ShapeContext, names: list[str], workloads: list[str]) -> list[ShapePlan]:
    """Each named shape that can run at ``ctx.sessions``, kept to ``workloads``."""
    registry = default_shapes()
    plans = []
    for name in names:
        shape = registry.get(name)
        if shape.unavailable(ctx) is not None:
            continue
        plan = _kept(shape.build(ctx), workloads)
        if plan is not None:
            plans.append(plan)
    return plans


def _kept(plan: ShapePlan, workloads: list[str]) -> ShapePlan | None:
    """``plan`` with only the items (and their sends) of ``workloads``; None if none is left."""
    kept = [i for i in plan.items if i.workload in workloads]
    if not kept:
        return None
    keep = {i.session for i in kept}
    plan.items = kept
    plan.sends = [_without(s, keep) for s in plan.sends if s.item.session in keep]
    return plan


def _without(send: Send, keep: set[int]) -> Send:
    """``send`` waiting on no session outside ``keep`` (one left out by --workloads)."""
    after, hang_up = send.after, send.hang_up
    if after is not None:
        named = after.sessions if isinstance(after, AfterTokens) else (after.session,)
        after = after if set(named) <= keep else None
    if hang_up is not None and hang_up.beside is not None and hang_up.beside not in keep:
        hang_up = dataclasses.replace(hang_up, beside=None)
    return dataclasses.replace(send, after=after, hang_up=hang_up)


def _size_for(
    ctx: ShapeContext, names: list[str], workloads: list[str], depth: int, split: bool
) -> int:
    """The least per-shape size whose plans send at least ``depth`` requests in one wave
    (``split``: the burst's decode half is sent apart, so it does not count)."""

    def sends(size: int) -> int:
        trial = copy.deepcopy(ctx)
        trial.sessions = size
        return sum(
            1
            for p in _build(trial, names, workloads)
            for x in p.sends
            if not (split and p.shape == "burst" and x.item.workload == "decode")
        )

    if depth == 1:
        return 1
    low, high = 2, 2
    while sends(high) < depth and high < depth:
        low, high = high, high * 2
    while low < high:
        middle = (low + high) // 2
        if sends(middle) >= depth:
            high = middle
        else:
            low = middle + 1
    return high


def _any(wanted: set[str] | None, *shapes: str) -> bool:
    return wanted is None or any(s in wanted for s in shapes)


async def _context(
    cfg: RunConfig, run_id: str, client: Asker, extra: dict[str, JsonValue], props: JsonValue
) -> tuple[ShapeContext, list[str]]:
    notes: list[str] = []
    cpt = None
    wanted = set(cfg.shapes) if cfg.shapes is not None else None
    both_paths, switched = await _paths(cfg, run_id, client, extra, wanted)
    notes += [switched] if switched else []
    if "recall" in cfg.workloads:
        cpt, note = await calibrate_chars_per_token(client, run_id, cfg.prompt_style)
        notes += [note] if note else []
    # Only what the shapes asked for is asked of the server. Tokenizer questions first:
    # llama-server drops a kept-alive connection after a stream without saying so, and
    # discovery requests are not resent.
    biases: list[BiasToken] = []
    if _any(wanted, "params"):
        biases, why = await discover.bias_tokens(client, cfg.model)
        notes += [f"params: {why}"] if why else []
    per_number = (
        await discover.tokens_per_number(client)
        if _any(wanted, "early", "params")
        else discover.FALLBACK_TOKENS_PER_NUMBER
    )
    # Asked whatever the shapes: the serial references ask for them where they come back
    # (near ties), and params' open rows check their own top-1.
    top_logprobs, returned = await discover.top_logprobs(
        client, run_id, cfg.prompt_style, extra, TOP_LOGPROBS
    )
    if _any(wanted, "params") and not top_logprobs:
        notes.append("params: the server refused top logprobs; open rows ask for none")
    honoured: list[tuple[Constraint, Api]] = []
    choices = False
    if _any(wanted, "params"):
        default: Api = "chat" if cfg.prompt_style == "chat" else "completions"
        other: Api = "completions" if default == "chat" else "chat"
        apis = [default, other] if both_paths else [default]
        honoured, unhonoured = await discover.constraints(client, run_id, apis, extra)
        notes += unhonoured
        refused = await discover.choices(client, run_id, cfg.prompt_style, extra, CHOICES)
        choices = refused is None
        if refused is not None:
            notes.append(f"params: no rows asking for n={CHOICES} choices: {refused}")
    ctx = ShapeContext(
        run_id=run_id,
        seed=cfg.seed,
        sessions=cfg.sessions,
        haystack_tokens=cfg.haystack_tokens,
        max_tokens=cfg.max_tokens,
        recall_max_tokens=cfg.recall_max_tokens,
        prompt_style=cfg.prompt_style,
        chars_per_token=cpt or DEFAULT_CHARS_PER_TOKEN,
        both_paths=both_paths,
        bias_tokens=biases,
        top_logprobs=top_logprobs,
        logprobs_returned=returned,
        tokens_per_number=per_number,
        constraints=tuple(honoured),
        choices=choices,
        sliding_window=discover.sliding_window(cfg.model),
        context_tokens=discover.context_tokens(props),
    )
    return ctx, notes


async def _paths(
    cfg: RunConfig, run_id: str, client: Asker, extra: dict[str, JsonValue],
    wanted: set[str] | None,
) -> tuple[bool, str | None]:
    """Whether the shapes send every other item over the other request path (only after a
    real 1-token generation over it succeeded), and a note when a completion-style run goes
    over chat because the server refuses /v1/completions (``cfg.prompt_style`` becomes "chat")."""
    if not _any(wanted, "join", "ragged", "early", "repeat", "params", "conversation"):
        return False, None
    if not await discover.serves_other_path(client, run_id, cfg.prompt_style, extra):
        return False, None
    if cfg.prompt_style == "completion" and await discover.refuses(client, run_id, "completions", extra):
        cfg.prompt_style = "chat"
        return False, (
            "the server refused /v1/completions (a 1-token generation) and serves "
            "/v1/chat/completions: every request goes over chat (--prompt-style chat)"
        )
    return True, None


async def build_plans(
    cfg: RunConfig,
    run_id: str,
    client: Asker,
    extra: dict[str, JsonValue],
    props: JsonValue = None,
) -> Plans:
    """Build each shape asked for (or each the server supports); say why any was skipped.

    A shape named in ``cfg.shapes`` that the server cannot do is a :class:`ConfigError`.
    """
    registry = default_shapes()
    asked = cfg.shapes
    ctx, notes = await _context(cfg, run_id, client, extra, props)
    result = Plans(warnings=notes)
    asked_set = set(asked) if asked is not None else None
    streaming = _any(asked_set, *(n for n in registry.names
                                  if registry.get(n).needs_streaming)) and await discover.streams(
        client, run_id, cfg.prompt_style, extra
    )
    why_not = {}
    for name in registry.names:
        shape = registry.get(name)
        why = shape.unavailable(ctx)
        if why is None and shape.needs_streaming and not streaming:
            why = (f"the server does not stream tokens one by one ({name} acts on a stream "
                   "as it comes)")
        why_not[name] = why
    can = [n for n, why in why_not.items() if why is None]
    for name in asked or []:
        if why_not[name] is not None:
            raise ConfigError("--shapes", f"{name}: {why_not[name]}; allowed here: {', '.join(can)}")
    if cfg.sweep is not None:
        return _sweep_plans(cfg, ctx, result, why_not)
    for name in registry.names:
        shape = registry.get(name)
        if asked is not None and name not in asked:
            result.status.append(ShapeStatus(shape=name, ran=False, reason="not in --shapes"))
            continue
        why = why_not[name]
        if why is not None:
            result.status.append(ShapeStatus(shape=name, ran=False, reason=why))
            continue
        plan = _kept(shape.build(ctx), list(cfg.workloads))
        if plan is None:
            reason = f"--workloads {','.join(cfg.workloads)} leaves it no items"
            result.status.append(ShapeStatus(shape=name, ran=False, reason=reason))
            continue
        result.plans.append(plan)
        result.status.append(
            ShapeStatus(shape=name, ran=True, sessions=plan.sessions, notes=plan.notes)
        )
    return result


def _sweep_plans(
    cfg: RunConfig, ctx: ShapeContext, result: Plans, why_not: dict[str, str | None]
) -> Plans:
    """Every planned depth's fresh plans; the shapes a server cannot do are skipped, said once."""
    asked = set(cfg.shapes) if cfg.shapes is not None else None
    names = [n for n, why in why_not.items() if why is None and (asked is None or n in asked)]
    result.shape_ctx, result.names, result.workloads = ctx, names, list(cfg.workloads)
    for depth in cfg.sweep or []:
        throughput, mixed = result.at(depth)
        if throughput is not None:
            result.throughput[depth] = throughput
        result.steps[depth] = mixed
        result.plans += [p for p in (throughput, *mixed) if p is not None]
    for name, why in why_not.items():
        if asked is not None and name not in asked:
            result.status.append(ShapeStatus(shape=name, ran=False, reason="not in --shapes"))
            continue
        sessions = [s for p in result.plans if p.shape == name for s in p.sessions]
        if why is not None or not sessions:
            reason = why or f"--workloads {','.join(cfg.workloads)} leaves it no items"
            result.status.append(ShapeStatus(shape=name, ran=False, reason=reason))
            continue
        notes = [] if 1 not in result.steps or name == "burst" else [
            "sits out the depth-1 step (it is about requests sharing the server)"
        ]
        result.status.append(ShapeStatus(shape=name, ran=True, sessions=sessions, notes=notes))
    return result
