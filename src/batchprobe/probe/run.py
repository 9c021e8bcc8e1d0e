"""The whole probe: arms in order, the verdict file written at every step and always at the end."""

from __future__ import annotations

import dataclasses
import datetime as dt
import platform
import secrets
import sys
import time
import traceback
from pathlib import Path
from typing import Protocol

from pydantic import JsonValue

from batchprobe import __version__
from batchprobe.client import OpenAIClient, Timeouts
from batchprobe.errors import BatchprobeError, ConfigError, EngineDied, EngineUnreachable
from batchprobe.probe.arm import ArmContext, generates, warm_up
from batchprobe.probe.cache import cache_notes, cache_policy, launch_spec, skipped_shapes
from batchprobe.probe.clients import arm_client, auto_procs, client_health, client_limit
from batchprobe.probe.compare import compare
from batchprobe.probe.endpoint import Endpoint, EndpointProvider
from batchprobe.probe.interrupts import Interrupts, signals_as_interrupt
from batchprobe.probe.items import Plans, build_plans
from batchprobe.probe.load import LoadSampler
from batchprobe.probe.metrics import arm_metrics
from batchprobe.probe.status import status_for
from batchprobe.probe.sweep import (
    envelope,
    failure_rule,
    knee,
    predicted_s,
    serial_s,
    step_record,
)
from batchprobe.probe.verdict import arm_failures, decide
from batchprobe.probe.waves import run_mixed_wave, run_waves
from batchprobe.results.client import ClientHealth
from batchprobe.results.diagnosis import Diagnosis
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
from batchprobe.results.sweep import StopRule, SweepStep, SweepStop
from batchprobe.results.writer import write_report
from batchprobe.workload.shapes import ShapePlan

LLAMA_CPP = "llama.cpp"
_EXIT_WAIT_S = 2.0


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


class _Run:
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
        self.steps: list[SweepStep] = []
        self.sweep_stop: SweepStop | None = None
        self.sweep_notes: list[str] = []

    def save(self) -> None:
        write_report(self.report, self.output)

    async def _prepare(self, ep: Endpoint, client: OpenAIClient) -> ArmContext:
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

    def _timeouts(self) -> Timeouts:
        return Timeouts(total=self.config.request_timeout_s)

    async def _build_context(self, client: OpenAIClient, props: JsonValue | None) -> ArmContext:
        cfg = self.config
        extra: dict[str, JsonValue] = {}
        if self.report.environment.server_kind == LLAMA_CPP:
            extra["cache_prompt"] = False
        plans = self.plans = await build_plans(cfg, self.report.run_id, client, extra, props)
        self.report.warnings += plans.warnings
        self.report.shapes = plans.status
        return ArmContext(
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

    def _on_session(self, arm: ArmResult, session: SessionResult) -> None:
        self.listener.session_done(arm, session)

    async def _arm(self, ep: Endpoint, arm: ArmResult) -> None:
        async with OpenAIClient(
            ep.base_url, timeouts=self._timeouts(), request_ids=ep.request_ids
        ) as client:
            ctx = await self._prepare(ep, client)
            ctx.cache_body, ctx.cold_note, ctx.cache_note = cache_policy(
                ctx.extra_body, ep.cache_control, arm.spec
            )
            warm = await warm_up(client, arm.spec.name, ctx)
            if warm.error is not None:
                # An error of the arm: the server failed a request, measured or not.
                arm.error = f"warm-up failed: {warm.error.kind.value}: {warm.error.message}"
            procs = self._client_procs(arm.spec.concurrency)
            async with arm_client(client, procs) as sender:
                await sender.loop_lag()  # the arm's window starts here
                self.listener.arm_started(arm, _requests(ctx, arm.spec))
                arm.metrics = arm_metrics(arm.sessions, await run_waves(sender, arm, ctx))
                self._client_health(arm, await client_health(sender, arm, procs, ctx.thresholds))
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
            self._served_by(ep, arm)
            try:
                self.interrupts.run(self._arm(ep, arm))
            except EngineUnreachable as exc:
                died = _engine_died(ep, arm, f"during arm {spec.name}")
                if died is None:
                    raise
                raise died from exc
            finally:
                self._diagnose(ep, arm)
            if arm.server_alive_after is False:
                died = _engine_died(ep, arm, f"after arm {spec.name}")
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

    def _client_procs(self, concurrency: int) -> int:
        return self.config.client_procs or auto_procs(concurrency)

    def _client_health(self, arm: ArmResult, health: ClientHealth) -> None:
        arm.client = health
        warning = client_limit(arm)
        if warning is not None:
            self.report.warnings.append(warning)

    def _served_by(self, ep: Endpoint, arm: ArmResult) -> None:
        arm.engine_version = ep.engine_version
        arm.log_path = ep.log_path
        self.report.patches_applied = list(ep.patches)
        self.report.environment.engine_version = ep.engine_version
        if ep.process is not None:
            # On disk while the engine runs, so a stale one can be found and reaped.
            arm.engine_pid, arm.engine_pgid = ep.process.pid, ep.process.pgid
            arm.engine_launch = ep.process.launch_token
        self.save()

    def run_sweep(self) -> None:
        """Every planned depth on one launch sized for the deepest, then the bisection of a
        failure; each step is an arm of the report and a step of the envelope."""
        depths = self.config.sweep or []
        managed = self.config.base_url is None
        spec = launch_spec(
            ArmSpec(
                name="sweep", concurrency=max(depths), mode="batching" if managed else None, role="step"
            ),
            self.config,
        )
        with self.provider(spec) as ep:
            try:
                self.interrupts.run(self._sweep(ep, spec))
            except EngineUnreachable as exc:
                running = self.report.arms[-1]
                died = _engine_died(ep, running, "during the sweep")
                if died is None:
                    raise
                raise died from exc
            finally:
                for arm in self.report.arms:
                    if arm.spec.role != "arm":
                        self._diagnose(ep, arm)

    async def _sweep(self, ep: Endpoint, spec: ArmSpec) -> None:
        cfg = self.config
        async with OpenAIClient(
            ep.base_url, timeouts=self._timeouts(), request_ids=ep.request_ids
        ) as client:
            ctx = await self._prepare(ep, client)
            ctx.cache_body, ctx.cold_note, ctx.cache_note = cache_policy(
                ctx.extra_body, ep.cache_control, spec
            )
            warm = await warm_up(client, spec.name, ctx)
            if warm.error is not None:
                self.sweep_notes.append(
                    f"the sweep launch's warm-up failed: {warm.error.kind.value}: {warm.error.message}"
                )
            started = time.monotonic()
            last: SweepStep | None = None
            for n in cfg.sweep or []:
                plans = (self.plans.throughput.get(n), self.plans.steps[n])
                if last is not None and not self._fits(started, last, plans, n):
                    break
                last = await self._step(client, ep, ctx, spec, n, plans, "sweep")
                if not last.correct:
                    self.sweep_stop = SweepStop(
                        rule=failure_rule(last), at_n=n, detail="; ".join(last.reasons[:2])
                    )
                    break
                if last.within_slo is False:
                    self.sweep_stop = SweepStop(
                        rule=StopRule.SLO, at_n=n, detail="; ".join(last.slo_breaches)
                    )
                    break
                at = knee(self.steps)
                if cfg.sweep_auto and at is not None and n >= 2 * cfg.sessions:
                    self.sweep_stop = SweepStop(
                        rule=StopRule.KNEE, at_n=at, detail=f"throughput stopped growing after {at}"
                    )
                    break
            if self.sweep_stop is None and last is not None and last.n == (cfg.sweep or [0])[-1]:
                self.sweep_stop = SweepStop(rule=StopRule.PLAN_END, at_n=last.n)
            if self.sweep_stop is not None and self.sweep_stop.rule in (
                StopRule.INCORRECT, StopRule.ERRORS
            ):
                await self._bisect(client, ep, ctx, spec, started)

    def _fits(self, started: float, last: SweepStep, plans: StepPlans, n: int) -> bool:
        """Whether the next step, predicted from the last one's pace, fits the time budget."""
        budget = self.config.time_budget_s
        if budget is None:
            return True
        elapsed = time.monotonic() - started
        predicted = predicted_s(last, sum(len(p.sends) for p in _plans(plans)))
        if elapsed + predicted <= budget:
            return True
        self.sweep_stop = SweepStop(
            rule=StopRule.TIME_BUDGET,
            at_n=n,
            detail=f"{elapsed:.0f}s spent; the step at {n} would take about {predicted:.0f}s "
            f"more than the {budget:.0f}s budget allows",
        )
        return False

    async def _bisect(
        self, client: OpenAIClient, ep: Endpoint, ctx: ArmContext, spec: ArmSpec, started: float
    ) -> None:
        """Between the last correct depth and the first failing one, until they are adjacent."""
        stop = self.sweep_stop
        if stop is None or stop.at_n is None:
            return
        failing = stop.at_n
        correct = max((s.n for s in self.steps if s.correct and s.n < failing), default=None)
        while correct is not None and failing - correct > 1:
            middle = (correct + failing) // 2
            plans = self.plans.at(middle)
            last = self.steps[-1]
            if not self._fits(started, last, plans, middle):
                self.sweep_stop = stop.model_copy(
                    update={"detail": f"{stop.detail}; bisection cut short by the time budget"}
                )
                return
            step = await self._step(client, ep, ctx, spec, middle, plans, "bisect")
            if step.correct:
                correct = middle
            else:
                failing = middle
        self.sweep_stop = stop.model_copy(update={"at_n": failing})

    async def _step(
        self,
        client: OpenAIClient,
        ep: Endpoint,
        ctx: ArmContext,
        spec: ArmSpec,
        n: int,
        plans: StepPlans,
        kind: str,
    ) -> SweepStep:
        """One step: its throughput phase, then its mixed wave, with the server's load sampled;
        a bisection step then sends its items alone for their references (after the waves, so
        they run cold)."""
        baseline = self.report.arms[0]
        arm = ArmResult(
            spec=ArmSpec(name=f"sweep@{n}", concurrency=n, mode=spec.mode, role="step"),
            state="running",
            started_at=_now(),
        )
        self.report.arms.append(arm)
        self._served_by(ep, arm)
        throughput, mixed = plans
        step_ctx = dataclasses.replace(ctx, plans=_plans(plans))
        self.listener.arm_started(arm, sum(len(p.sends) for p in step_ctx.plans))
        pgid = ep.process.pgid if ep.process is not None else None
        procs = self._client_procs(n)
        async with arm_client(client, procs) as sender, LoadSampler(ep.base_url, pgid) as sampler:
            await sender.loop_lag()  # the step's window starts here
            t0 = time.perf_counter()
            if throughput is not None:
                await run_mixed_wave(sender, arm, dataclasses.replace(ctx, plans=[throughput]), t0)
            before = len(arm.sessions)
            mixed_wall = await run_mixed_wave(sender, arm, dataclasses.replace(ctx, plans=mixed), t0)
            wall = time.perf_counter() - t0
            self._client_health(arm, await client_health(sender, arm, procs, ctx.thresholds))
        arm.metrics = arm_metrics(arm.sessions, wall, every_shape=True)
        arm.server_alive_after = await generates(client, arm.spec.name, step_ctx)
        if ep.is_alive is not None and not ep.is_alive():
            arm.server_alive_after = False
        arm.state = "done"
        self.listener.arm_finished(arm)
        judged = [baseline, arm]
        references = f"the serial baseline {baseline.spec.name} (its own launch, cold)"
        if kind == "bisect" and arm.server_alive_after is not False:
            ref = ArmResult(
                spec=ArmSpec(name=f"references@{n}", concurrency=1, mode=spec.mode, role="reference"),
                state="running",
                started_at=_now(),
            )
            self.report.arms.append(ref)
            self.listener.arm_started(ref, len(step_ctx.items))
            ref.metrics = arm_metrics(ref.sessions, await run_waves(client, ref, step_ctx))
            ref.state = "done"
            self.listener.arm_finished(ref)
            judged = [baseline, ref, arm]
            references = f"{ref.spec.name}: its items sent alone on the sweep's launch, after the wave"
        alone = serial_s(arm.sessions[before:], judged[:-1])
        step = step_record(
            arm,
            compare(arm, baseline),
            alone / mixed_wall if alone is not None and mixed_wall > 0 else None,
            arm_failures(judged, arm, self.config.thresholds),
            self.config,
            sampler.server_load(),
            sampler.rss_peak_mb,
            kind,
            references,
        )
        self.steps.append(step)
        self.report.envelope = envelope(baseline, self.steps, self.sweep_notes)
        self.save()
        if arm.server_alive_after is False:
            raise EngineUnreachable(f"the server stopped answering after step {arm.spec.name}")
        return step

    def _diagnose(self, ep: Endpoint, arm: ArmResult) -> None:
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
        if self.steps and report.arms:
            stop = self.sweep_stop or SweepStop(
                rule=StopRule.STOPPED_EARLY, detail=f"the run stopped: {status.value}"
            )
            report.envelope = envelope(report.arms[0], self.steps, self.sweep_notes)
            report.envelope.stop = stop
        report.verdict = decide(
            status, report.arms, report.comparisons, self.config.thresholds, report.envelope
        )
        report.verdict.reasons += cache_notes(report.arms) + skipped_shapes(report.shapes)
        report.finished_at = _now()
        self.save()


StepPlans = tuple[ShapePlan | None, list[ShapePlan]]


def _plans(plans: StepPlans) -> list[ShapePlan]:
    throughput, mixed = plans
    return [*([throughput] if throughput is not None else []), *mixed]


def _requests(ctx: ArmContext, spec: ArmSpec) -> int:
    if spec.concurrency == 1:
        return len(ctx.items)
    return sum(len(plan.sends) for plan in ctx.plans)


def _engine_died(ep: Endpoint, arm: ArmResult, when: str) -> EngineDied | None:
    """EngineDied with the exit code and log tail when the managed engine has exited."""
    if ep.process is None:
        return None
    # It stopped answering: give an exiting process a moment to be done.
    code = ep.process.exit_code(_EXIT_WAIT_S)
    if code is None:
        return None
    arm.engine_exit_code = code
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    where = f"; log: {ep.log_path}" if ep.log_path else ""
    return EngineDied(f"the engine {how} {when}{where}", log_tail=ep.process.log_tail())


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
    run = _Run(config, output, provider, listener or _Quiet())
    run.save()
    status, error = Status.ERROR, None
    with signals_as_interrupt() as run.interrupts:
        try:
            for spec in config.arms:
                run.run_arm(spec)
            if config.sweep:
                run.run_sweep()
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
