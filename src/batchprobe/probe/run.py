"""The whole probe: arms in order, the verdict file written at every step and always at the end."""

from __future__ import annotations

import datetime as dt
import platform
import secrets
import sys
import traceback
from pathlib import Path
from typing import Protocol

from pydantic import JsonValue

from batchprobe import __version__
from batchprobe.client import OpenAIClient, Timeouts
from batchprobe.errors import (
    BatchprobeError,
    ConfigError,
    EngineDied,
    EngineStalled,
    EngineUnreachable,
)
from batchprobe.judge.compare import compare
from batchprobe.judge.judge import judge
from batchprobe.judge.verdict import decide
from batchprobe.probe.arm import ArmContext, generates, warm_up
from batchprobe.probe.cache import cache_notes, cache_policy, launch_spec, skipped_shapes
from batchprobe.probe.clients import arm_client, auto_procs, client_health, client_limit
from batchprobe.probe.endpoint import Endpoint, EndpointProvider, engine_died, server_lost
from batchprobe.probe.interrupts import Interrupts, signals_as_interrupt
from batchprobe.probe.items import Plans, build_plans
from batchprobe.probe.metrics import arm_metrics
from batchprobe.probe.replay import replay_wrong
from batchprobe.probe.status import status_for
from batchprobe.probe.sweep import envelope
from batchprobe.probe.sweep_run import Sweep
from batchprobe.probe.waves import run_waves
from batchprobe.results.client import ClientHealth
from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.findings import Finding, FindingKind, Severity
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
from batchprobe.results.sweep import StopRule, SweepStop
from batchprobe.results.writer import write_report
from batchprobe.workload.shapes import ShapePlan

LLAMA_CPP = "llama.cpp"


class ProbeListener(Protocol):
    """Progress callbacks (the CLI draws them with rich)."""

    def arm_started(self, arm: ArmResult, total: int) -> None: ...

    def session_done(self, arm: ArmResult, session: SessionResult) -> None: ...

    def arm_finished(self, arm: ArmResult) -> None: ...


class _Quiet:
    def arm_started(self, arm: ArmResult, total: int) -> None:
        pass

    def session_done(self, arm: ArmResult, session: SessionResult) -> None:
        pass

    def arm_finished(self, arm: ArmResult) -> None:
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
        """Items built after the context (a bisection step): their needles and counts join
        the launch's, so cross-talk from any of them is named."""
        if self.ctx is not None:
            self.ctx.plant(plans)

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
            on_session=self._on_session,
        )
        ctx.plant(plans.plans)
        return ctx

    def _on_session(self, arm: ArmResult, session: SessionResult) -> None:
        self.listener.session_done(arm, session)

    async def _arm(self, ep: Endpoint, arm: ArmResult) -> None:
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
                self.listener.arm_started(arm, _requests(ctx, arm.spec))
                arm.metrics = arm_metrics(arm.sessions, await run_waves(sender, arm, ctx))
                self.client_health(arm, await client_health(sender, arm, procs, ctx.thresholds))
            if arm.spec.concurrency > 1:
                t = self.config.thresholds
                await replay_wrong(client, arm, ctx, self.report.arms, t, [ctx.plans], mixed=False)
            arm.server_alive_after = await generates(client, arm.spec.name, ctx)
        if ep.is_alive is not None and not ep.is_alive():
            arm.server_alive_after = False

    def run_arm(self, spec: ArmSpec) -> None:
        spec = launch_spec(spec, self.config)
        arm = ArmResult(spec=spec, state="running", started_at=_now())
        self.report.arms.append(arm)
        self.save()
        died: EngineDied | None = None
        with self.provider(spec) as ep:
            self.served_by(ep, arm)
            try:
                self.interrupts.run(self._arm(ep, arm))
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
        self.listener.arm_finished(arm)
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
        base = report.arms[0] if report.arms else None
        report.comparisons = [compare(a, base) for a in report.arms[1:]] if base else []
        _warnings(report)
        sweep = self.sweep
        if sweep is not None and sweep.steps and report.arms:
            stop = sweep.stop or SweepStop(
                rule=StopRule.STOPPED_EARLY, detail=f"the run stopped: {status.value}"
            )
            report.envelope = envelope(report.arms[0], sweep.steps, sweep.notes)
            report.envelope.stop = stop
        self.judge(status)
        report.finished_at = _now()
        self.save()

    def judge(self, status: Status) -> None:
        """The findings, once, and the verdict rendered from them."""
        report, t = self.report, self.config.thresholds
        judgement = judge(report.arms, report.comparisons, t)
        judgement.findings += _not_run(report, status)
        report.findings, report.judged = judgement.findings, judgement.judged
        report.verdict = decide(
            status, report.arms, report.comparisons, t, report.envelope, self.config.sweep,
            judgement,
        )
        report.verdict.reasons += cache_notes(report.arms) + skipped_shapes(report.shapes)


def _not_run(report: Report, status: Status) -> list[Finding]:
    """Planned arms that never started: a failure when the engine failed, else not judged."""
    ran = {a.spec.name for a in report.arms}
    severity: Severity = "info" if status in (Status.INTERRUPTED, Status.OK) else "hard"
    return [
        Finding(arm=spec.name, kind=FindingKind.NOT_RUN, severity=severity,
                message=f"never ran (the run ended: {status.value})")
        for spec in report.config.arms
        if spec.name not in ran
    ]


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
                run.run_arm(spec)
            if config.sweep:
                run.sweep = Sweep(run)
                run.sweep.launch()
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
