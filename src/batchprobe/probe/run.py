"""The whole probe: arms in order, the verdict file written at every step and always at the end."""

from __future__ import annotations

import dataclasses
import datetime as dt
import platform
import secrets
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import JsonValue

from batchprobe import __version__
from batchprobe.client import Completer, OpenAIClient, Timeouts
from batchprobe.errors import (
    BatchprobeError,
    ConfigError,
    EngineDied,
    EngineStalled,
    EngineUnreachable,
)
from batchprobe.judge.final import baseline, comparisons, final_pass
from batchprobe.judge.judge import judge, judge_arm
from batchprobe.judge.references import references
from batchprobe.judge.score import plant, score
from batchprobe.judge.steps import client_limit
from batchprobe.probe.cache import cache_policy, launch_spec
from batchprobe.probe.endpoint import Endpoint, EndpointProvider, engine_died, server_lost
from batchprobe.probe.interrupts import Interrupts, signals_as_interrupt
from batchprobe.probe.metrics import arm_metrics
from batchprobe.probe.pressure import PressureWave
from batchprobe.probe.references import ReferenceRounds
from batchprobe.probe.replay import replay_wrong
from batchprobe.probe.status import status_for
from batchprobe.probe.sweep_run import Sweep
from batchprobe.results.client import ClientHealth
from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.findings import Finding, Judged
from batchprobe.results.items import Sending, WorkItem
from batchprobe.results.models import (
    ArmResult,
    ArmSpec,
    Environment,
    Report,
    RunConfig,
    RunError,
    SessionResult,
    Status,
)
from batchprobe.results.writer import write_report
from batchprobe.send.arm import ArmContext, generates, warm_up
from batchprobe.send.clients import arm_client, auto_procs, client_health
from batchprobe.send.items import Plans, build_plans
from batchprobe.send.waves import run_waves
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


class _Quiet:
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


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_report(config: RunConfig) -> Report:
    return Report(
        run_id=secrets.token_hex(4),
        started_at=_now(),
        config=config,
        environment=Environment(
            batchprobe_version=__version__,
            python=sys.version.split()[0],
            platform=platform.platform(),
        ),
    )


class ProbeRun:
    """One run: its config, its report, its plans, its endpoints; arms run here, a sweep in
    ``probe.sweep_run``."""

    def __init__(
        self, config: RunConfig, output: Path, provider: EndpointProvider, listener: ProbeListener
    ) -> None:
        self.config = config
        self.output = output
        self.provider = provider
        self.listener = listener
        self.report = new_report(config)
        self.ctx: ArmContext | None = None
        self.plans = Plans()
        self.interrupts = Interrupts()
        self.sweep: Sweep | None = None
        self.pressure: PressureWave | None = None

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
        cfg = self.config
        extra: dict[str, JsonValue] = {}
        if self.report.environment.server_kind == LLAMA_CPP:
            extra["cache_prompt"] = False
        plans = self.plans = await build_plans(cfg, self.report.run_id, client, extra, props)
        self.report.warnings += plans.warnings
        self.report.shapes = plans.status
        ctx = ArmContext(
            run_id=self.report.run_id,
            prompt_style=cfg.prompt_style,
            request_seed=cfg.request_seed,
            liveness_timeout_s=cfg.liveness_timeout_s,
            thresholds=cfg.thresholds,
            plans=plans.plans,
            extra_body=extra,
            logprobs=0 if cfg.logprobs else None,
            reference_logprobs=(
                TOP_LOGPROBS if plans.shape_ctx is not None and plans.shape_ctx.logprobs_returned
                else None
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
                    [i for p in plans.plans for i in p.items] if spec.concurrency == 1
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

    async def _arm(self, ep: Endpoint, arm: ArmResult, rounds: ReferenceRounds | None) -> None:
        async with self.client(ep) as client:
            ctx = await self.prepare(ep, client)
            ctx.cache_body, ctx.cold_note, ctx.cache_note = cache_policy(
                ctx.extra_body, ep.cache_control, arm.spec
            )
            # A failed warm-up is an error of the arm: the server failed a request, measured or not.
            arm.warm_up_error = (await warm_up(client, arm.spec.name, ctx)).error
            procs = self.client_procs(arm.spec.concurrency)
            async with arm_client(client, procs) as sender:
                await sender.loop_lag()  # the arm's window starts here
                if rounds is None:
                    self.listener.arm_started(arm, _requests(ctx, arm.spec))
                    wall = await run_waves(sender, arm, ctx)
                else:
                    wall = await self._rounds(sender, arm, ctx, rounds)
                arm.metrics = arm_metrics(arm.sessions, wall)
                self.client_health(arm, await client_health(sender, arm, procs, ctx.thresholds))
            if arm.spec.concurrency > 1:
                t = self.config.thresholds
                await replay_wrong(client, arm, ctx, self.report.arms, t, [ctx.plans], mixed=False)
            arm.server_alive_after = await generates(client, arm.spec.name, ctx)
        if ep.is_alive is not None and not ep.is_alive():
            arm.server_alive_after = False

    async def _rounds(
        self, sender: Completer, arm: ArmResult, ctx: ArmContext, rounds: ReferenceRounds
    ) -> float:
        """The references the judge asks for, round after round, alone; their wall time."""
        wall, index = 0.0, 0
        while plans := rounds.next(index):
            requests = sum(len(p.items) for p in plans)
            self.listener.phase(f"references, round {index + 1}", requests)
            if index == 0:
                self.listener.arm_started(arm, requests)
            # On a URL the server is the sweep's own: a fresh nonce keeps them cold.
            nonce = secrets.token_hex(4) if self.config.base_url is not None else None
            seen, before = {s.session for s in arm.sessions}, len(arm.sessions)
            wall += await run_waves(
                sender, arm, dataclasses.replace(ctx, plans=plans, nonce=nonce)
            )
            # An earlier turn sent again ahead of a later one: its first reference stands.
            arm.sessions[before:] = [s for s in arm.sessions[before:] if s.session not in seen]
            index += 1
        return wall

    def references(self) -> None:
        """After the sweep: the baseline arm sends alone only what the judge asks for."""
        spec = next(s for s in self.config.arms if s.role == "reference")
        rounds = ReferenceRounds(
            self.plans.plans, self.report.arms, self.config.thresholds.length_slack,
            self.config.seed, every=self.config.references == "every",
        )
        self.run_arm(spec, rounds)
        record = self.report.sweep_run
        if record is not None:
            record.reference_sample = sorted(rounds.sample)
            record.references_asked = len(rounds.asked)
            record.notes.append(
                f"references: {len(rounds.asked)} item(s) sent alone after the sweep (a seeded "
                f"sample of {len(rounds.sample)}, the wrong or short answers, the compared "
                "greedy rows without logprobs)"
                + (f"; {rounds.skipped} wrong answer(s) not sent: the first references of "
                   "their kind failed alone too" if rounds.skipped else "")
            )

    def run_arm(self, spec: ArmSpec, rounds: ReferenceRounds | None = None) -> None:
        spec = launch_spec(spec, self.config)
        arm = ArmResult(spec=spec, state="running", started_at=_now())
        # The baseline leads the report, whenever it ran.
        self.report.arms.insert(0 if spec.role == "reference" else len(self.report.arms), arm)
        self.save()
        died: EngineDied | None = None
        with self.provider(spec) as ep:
            self.served_by(ep, arm)
            try:
                self.interrupts.run(self._arm(ep, arm, rounds))
            except (EngineUnreachable, EngineStalled) as exc:
                lost = server_lost(ep, arm, f"during arm {spec.name}", exc)
                if lost is exc:
                    raise
                raise lost from exc
            finally:
                self.diagnose(ep, arm)
            if arm.server_alive_after is False:
                died = engine_died(ep, arm, f"after arm {spec.name}")
            arm.served_model = self.report.environment.served_model
            uncontrolled = ep.cache_control != "restart" and (
                self.report.environment.server_kind != LLAMA_CPP
            )
            if uncontrolled and len(self.config.arms) > 1:
                _warn_once(
                    self.report,
                    "prefix cache not controlled: the server has no per-request switch and is not "
                    "restarted between arms, so a later arm may reuse an earlier arm's cached "
                    "prompts; see cached_prompt_tokens per arm",
                )
        arm.state = "done"
        self.listener.arm_finished(arm, self._findings_of(arm), 0)
        self.save()
        if died is not None:
            raise died
        if arm.server_alive_after is False:
            raise EngineDied(f"the server stopped answering after arm {spec.name}")

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
        self.report.patches_applied = list(ep.patches)
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

    def finish(self, status: Status, error: RunError | None = None) -> None:
        report = self.report
        report.status = status
        report.error = error
        for arm in report.arms:
            if arm.state == "running":
                arm.state = "interrupted" if status is Status.INTERRUPTED else "failed"
            if arm.metrics is None and arm.sessions:
                arm.metrics = arm_metrics(arm.sessions, 0.0)
        report.comparisons = comparisons(report.arms)
        _warnings(report)
        self.judge()
        report.finished_at = _now()
        self.save()
        self.listener.judged(report)

    def judgement(self) -> tuple[list[Finding], list[Judged]]:
        """The run's findings as they stand (the final pass makes them again at the end)."""
        judged = judge(self.report.arms, comparisons(self.report.arms), self.config.thresholds)
        return judged.findings, judged.judged

    def baseline(self) -> ArmResult | None:
        return baseline(self.report.arms)

    def _findings_of(self, arm: ArmResult) -> list[Finding]:
        refs = references(self.report.arms)
        return judge_arm(arm, arm.spec.role == "reference", refs, self.config.thresholds).findings

    def judge(self) -> None:
        """The final pass, once, from what the verdict file holds (``judge.final``); then the
        known issues its hard findings name."""
        final_pass(self.report)
        self.add_diagnoses(self.provider.explain_findings(
            [f"{f.kind.value}: {f.message}" for f in self.report.findings if f.hard]))


def _warnings(report: Report) -> None:
    for arm in report.arms:
        buffered = arm.metrics.buffered_sessions if arm.metrics else 0
        if buffered:
            _warn_once(
                report,
                f"arm {arm.spec.name}: {buffered} session(s) received every token at once (a "
                "buffered stream): timed end to end, so their TTFT/ITL are not reported",
            )
    for arm in report.arms[1:]:
        cold = [s for s in arm.sessions if not (s.situation and s.situation.prefix_cache)]
        cached = sum(s.cached_tokens or 0 for s in cold)
        if cached:
            _warn_once(
                report,
                f"arm {arm.spec.name} reported {cached} cached prompt tokens outside the repeat "
                "wave: its figures may be flattered by a prefix cache",
            )


def _requests(ctx: ArmContext, spec: ArmSpec) -> int:
    if spec.concurrency == 1:
        return len(ctx.items)
    return sum(len(plan.sends) for plan in ctx.plans)


def _warn_once(report: Report, message: str) -> None:
    if message not in report.warnings:
        report.warnings.append(message)


def run_probe(
    config: RunConfig,
    output: Path,
    provider: EndpointProvider,
    listener: ProbeListener | None = None,
) -> Report:
    """Run every arm of ``config``; the verdict file at ``output`` is always left valid."""
    run = ProbeRun(config, output, provider, listener or _Quiet())
    run.save()
    status, error = Status.ERROR, None
    with signals_as_interrupt() as run.interrupts:
        try:
            for spec in config.arms:
                if spec.role != "reference":
                    run.run_arm(spec)
            if config.sweep:
                run.sweep = Sweep(run)
                run.sweep.launch()
                run.pressure = PressureWave(run)
                run.pressure.launch()
                run.references()
                run.sweep.after_references(run.judgement)
            status = Status.OK
        except BatchprobeError as exc:
            status, error = status_for(exc), RunError(message=str(exc))
            run.report.log_tail = getattr(exc, "log_tail", None)
            run.add_diagnoses(provider.explain(exc))
        except KeyboardInterrupt:
            status, error = Status.INTERRUPTED, RunError(message="interrupted by a signal")
        except Exception as exc:
            # The last resort for a bug: the verdict says "error" and keeps the traceback, and
            # the exception still reaches the caller (the CLI turns it into exit 2).
            error = RunError(
                message=f"internal error: {type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(),
            )
            raise
        finally:
            run.finish(status, error)
    return run.report
