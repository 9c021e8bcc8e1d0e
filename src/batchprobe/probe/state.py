"""What every part of a run shares: its config, its report (the verdict file), its plans and
sending context, its endpoints' bookkeeping. ``probe.run`` runs the arms on it; the sweep and
the pressure wave take it too, so neither imports the other's orchestration."""

from __future__ import annotations

import datetime as dt
import platform
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import JsonValue

from batchprobe import __version__
from batchprobe.client import OpenAIClient, Timeouts
from batchprobe.errors import ConfigError
from batchprobe.judge.score import plant, score
from batchprobe.judge.steps import client_limit
from batchprobe.probe.endpoint import Endpoint, EndpointProvider
from batchprobe.probe.interrupts import Interrupts
from batchprobe.results.client import ClientHealth
from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.findings import Finding
from batchprobe.results.items import Sending, WorkItem
from batchprobe.results.models import (
    ArmResult,
    Environment,
    Report,
    RunConfig,
    SessionResult,
)
from batchprobe.results.repro import ReproCase
from batchprobe.results.writer import write_report
from batchprobe.send.arm import ArmContext
from batchprobe.send.asking import Watched
from batchprobe.send.clients import auto_procs
from batchprobe.send.items import Plans, build_plans
from batchprobe.send.replay import plans_for
from batchprobe.send.waves import sends_alone
from batchprobe.workload.haystack import DEFAULT_CHARS_PER_TOKEN
from batchprobe.workload.shapes import ShapePlan
from batchprobe.workload.shapes.params import TOP_LOGPROBS

LLAMA_CPP = "llama.cpp"


@dataclass(frozen=True)
class PlanSummary:
    """What a run will send, said before it starts: its requests and their tokens (the
    references the judge asks for come later and are counted as they go)."""

    requests: int
    prompt_tokens: int
    decode_tokens: int
    """The sum of every request's max_tokens: the most it can decode."""


class ProbeListener(Protocol):
    """Progress callbacks (the CLI draws them with rich, or as plain lines in a pipe).

    ``phase``: a part of the run starts (the sweep's launch, the references, the replays);
    ``arm_finished``: an arm or step ended, with what the judge could already say of it
    (``findings``: errors, cross-talk, broken streams; ``awaiting``: wrong answers that wait
    for their cold reference before they are called anything); ``judged``: the final pass,
    once, with the report whose findings are the truth every mark must agree with."""

    def plan_ready(self, summary: PlanSummary) -> None: ...

    def phase(self, name: str, requests: int) -> None: ...

    def arm_started(self, arm: ArmResult, total: int) -> None: ...

    def session_done(self, arm: ArmResult, session: SessionResult) -> None: ...

    def arm_finished(self, arm: ArmResult, findings: Sequence[Finding], awaiting: int) -> None: ...

    def judged(self, report: Report) -> None: ...


class QuietListener:
    """A listener that shows nothing (the library's default)."""

    def plan_ready(self, summary: PlanSummary) -> None:
        pass

    def phase(self, name: str, requests: int) -> None:
        pass

    def arm_started(self, arm: ArmResult, total: int) -> None:
        pass

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        pass

    def arm_finished(self, arm: ArmResult, findings: Sequence[Finding], awaiting: int) -> None:
        pass

    def judged(self, report: Report) -> None:
        pass


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_report(config: RunConfig) -> Report:
    return Report(
        run_id=secrets.token_hex(4),
        started_at=utc_now(),
        config=config,
        environment=Environment(
            batchprobe_version=__version__,
            python=sys.version.split()[0],
            platform=platform.platform(),
        ),
    )


class RunState:
    """A run's shared state and the helpers every stage uses on it."""

    def __init__(
        self, config: RunConfig, output: Path, provider: EndpointProvider,
        listener: ProbeListener, case: ReproCase | None = None,
    ) -> None:
        self.config = config
        self.case = case
        """``run --replay``: the case whose requests are the plan."""
        self.output = output
        self.provider = provider
        self.listener = listener
        self.report = new_report(config)
        self.ctx: ArmContext | None = None
        self.plans = Plans()
        self.interrupts = Interrupts()

    def save(self) -> None:
        write_report(self.report, self.output)

    async def prepare(self, ep: Endpoint, client: OpenAIClient) -> ArmContext:
        """Detect the server, pick the model (set on ``client``), build the items once."""
        # Raises EngineUnreachable when nothing answers; None when there is no /props.
        props = await client.get_json("/props")
        models = [] if ep.model else await client.list_models()
        model = ep.model or (models[0] if models else None)
        if model is None:
            raise ConfigError("--model", f"{ep.base_url}/v1/models lists no model; pass --model")
        client.model = model
        env = self.report.environment
        env.served_model = model
        if isinstance(props, dict) and "default_generation_settings" in props:
            env.server_kind = LLAMA_CPP
        if self.ctx is None:
            self.ctx = await self._build_context(client, props)
        return self.ctx

    def client(self, ep: Endpoint) -> OpenAIClient:
        timeouts = Timeouts(total=self.config.request_timeout_s)
        return OpenAIClient(ep.base_url, timeouts=timeouts, request_ids=ep.request_ids)

    def plant(self, plans: list[ShapePlan]) -> None:
        """Every item built (the plan's, a bisection step's, the pressure wave's): their
        needles and counts join the run's, so cross-talk from any of them is named."""
        plant(self.report.planted, (i for p in plans for i in p.items))

    def _record(self, session: SessionResult, item: WorkItem, planned: WorkItem) -> None:
        """A session came back: its request (and a later turn's plan) joins the verdict
        file, its answer is scored."""
        if session.item is not None:
            self.report.items.setdefault(session.item, item)
        if planned != item:
            session.planned = planned.key()
            self.report.items.setdefault(session.planned, planned)
        plant(self.report.planted, [item])
        score(session, item, self.report.planted)

    async def _build_context(self, client: OpenAIClient, props: JsonValue | None) -> ArmContext:
        cfg, case = self.config, self.case
        extra: dict[str, JsonValue] = {}
        if self.report.environment.server_kind == LLAMA_CPP:
            extra["cache_prompt"] = False
        sending = case.sending if case is not None else Sending(request_seed=cfg.request_seed)
        if case is not None:
            # The case's requests, with its bodies: its run id stays in their prompts.
            extra = {**{k: v for k, v in sending.extra_body.items() if k != "cache_prompt"},
                     **extra}
            plans = self.plans = Plans(plans=plans_for(case.requests))
            self.report.planted = case.planted.model_copy(deep=True)
        else:
            asker = Watched(client, cfg.liveness_timeout_s)
            plans = self.plans = await build_plans(cfg, self.report.run_id, asker, extra, props)
        self.report.warnings += plans.warnings
        self.report.shapes = plans.status
        ctx = ArmContext(
            run_id=case.run_id if case is not None else self.report.run_id,
            prompt_style=cfg.prompt_style,
            request_seed=sending.request_seed,
            liveness_timeout_s=cfg.liveness_timeout_s,
            thresholds=cfg.thresholds,
            plans=plans.plans,
            extra_body=extra,
            logprobs=0 if cfg.logprobs else sending.logprobs,
            reference_logprobs=(
                TOP_LOGPROBS if plans.shape_ctx is not None and plans.shape_ctx.logprobs_returned
                else sending.reference_logprobs
            ),
            on_session=self._on_session,
            record=self._record,
        )
        self.plant(plans.plans)
        self.report.sending = Sending(
            extra_body=dict(extra), logprobs=ctx.logprobs,
            reference_logprobs=ctx.reference_logprobs, request_seed=ctx.request_seed,
        )
        self.listener.plan_ready(self._summary(plans))
        return ctx

    def _summary(self, plans: Plans) -> PlanSummary:
        """What the plan sends before any reference: each arm's or step's requests."""
        cfg = self.config
        chars = plans.shape_ctx.chars_per_token if plans.shape_ctx else DEFAULT_CHARS_PER_TOKEN
        sends = [x.item for p in plans.plans for x in p.sends]
        if not cfg.sweep:
            sends = [
                item
                for spec in cfg.arms
                for item in (
                    [i for p in plans.plans for i in p.items] if sends_alone(spec)
                    else [x.item for p in plans.plans for x in p.sends]
                )
            ]
        prompt = sum(len(i.prompt) + sum(len(m.content) for m in i.history) for i in sends)
        return PlanSummary(
            requests=len(sends),
            prompt_tokens=int(prompt / chars),
            decode_tokens=sum(i.max_tokens for i in sends),
        )

    def _on_session(self, arm: ArmResult, session: SessionResult) -> None:
        self.listener.session_done(arm, session)

    def client_procs(self, concurrency: int) -> int:
        return self.config.client_procs or auto_procs(concurrency)

    def client_health(self, arm: ArmResult, health: ClientHealth) -> None:
        arm.client = health
        warning = client_limit(arm)
        if warning is not None:
            self.report.warnings.append(warning)

    def served_by(self, ep: Endpoint, arm: ArmResult) -> None:
        arm.engine_version = ep.engine_version
        arm.log_path = ep.log_path
        self.report.environment.engine_version = ep.engine_version
        if ep.process is not None:
            # On disk while the engine runs, so a stale one can be found and reaped.
            arm.engine_pid, arm.engine_pgid = ep.process.pid, ep.process.pgid
            arm.engine_launch = ep.process.launch_token
        self.save()

    def diagnose(self, ep: Endpoint, arm: ArmResult) -> None:
        bodies = [
            f"{s.error.kind.value}: {s.error.message} {s.error.body_excerpt or ''}".strip()
            for s in arm.sessions
            if s.error is not None
        ]
        if not bodies and arm.server_alive_after is not False:
            return
        self.add_diagnoses(ep.diagnose(bodies))

    def add_diagnoses(self, diagnoses: list[Diagnosis]) -> None:
        known = {d.issue_id for d in self.report.diagnoses}
        for diagnosis in diagnoses:
            if diagnosis.issue_id not in known:
                known.add(diagnosis.issue_id)
                self.report.diagnoses.append(diagnosis)

