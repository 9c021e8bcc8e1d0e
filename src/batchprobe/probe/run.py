"""The whole probe: arms in order, the verdict file written at every step and always at the end."""

from __future__ import annotations

import dataclasses
import secrets
import traceback
from pathlib import Path

from batchprobe.client import Completer
from batchprobe.errors import (
    BatchprobeError,
    EngineDied,
    EngineStalled,
    EngineUnreachable,
)
from batchprobe.judge.final import baseline, comparisons, final_pass
from batchprobe.judge.judge import judge, judge_arm
from batchprobe.judge.references import references
from batchprobe.probe.cache import cache_policy, launch_spec
from batchprobe.probe.endpoint import Endpoint, EndpointProvider, engine_died, server_lost
from batchprobe.probe.interrupts import signals_as_interrupt
from batchprobe.probe.metrics import arm_metrics
from batchprobe.probe.patched import record_patches
from batchprobe.probe.pressure import PressureWave
from batchprobe.probe.references import ReferenceRounds
from batchprobe.probe.replay import replay_wrong
from batchprobe.probe.state import LLAMA_CPP, ProbeListener, QuietListener, RunState, utc_now
from batchprobe.probe.status import status_for
from batchprobe.probe.sweep_run import Sweep
from batchprobe.results.findings import Finding, Judged
from batchprobe.results.models import (
    ArmResult,
    ArmSpec,
    Report,
    RunConfig,
    RunError,
    Status,
)
from batchprobe.results.repro import ReproCase
from batchprobe.send.arm import ArmContext, generates, warm_up
from batchprobe.send.clients import arm_client, client_health
from batchprobe.send.waves import run_mixed_wave, run_waves, sends_alone


class ProbeRun(RunState):
    """One run: its arms run here, the references, the final pass; a sweep in
    ``probe.sweep_run`` and the pressure wave in ``probe.pressure``, which share the run's
    state (``probe.state``), not this class."""

    def __init__(
        self, config: RunConfig, output: Path, provider: EndpointProvider,
        listener: ProbeListener, case: ReproCase | None = None,
    ) -> None:
        super().__init__(config, output, provider, listener, case)
        self.sweep: Sweep | None = None
        self.pressure: PressureWave | None = None

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
                    if arm.spec.role == "reference" and self.config.base_url is not None:
                        # After the replay, on the same server: a fresh nonce keeps it cold.
                        ctx = dataclasses.replace(ctx, nonce=secrets.token_hex(4))
                    send = run_mixed_wave if arm.spec.role == "replay" else run_waves
                    wall = await send(sender, arm, ctx)
                else:
                    wall = await self._rounds(sender, arm, ctx, rounds)
                arm.metrics = arm_metrics(arm.sessions, wall)
                self.client_health(arm, await client_health(sender, arm, procs, ctx.thresholds))
            if not sends_alone(arm.spec):
                t = self.config.thresholds
                await replay_wrong(client, arm, ctx, self.report.arms, t, [ctx.plans],
                                   mixed=arm.spec.role == "replay")
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
        arm = ArmResult(spec=spec, state="running", started_at=utc_now())
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
        for warning in record_patches(report):
            _warn_once(report, warning)
        _warnings(report)
        self.judge()
        report.finished_at = utc_now()
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
    if sends_alone(spec):
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
    case: ReproCase | None = None,
) -> Report:
    """Run every arm of ``config`` (``case``: the requests of ``run --replay``); the verdict
    file at ``output`` is always left valid."""
    run = ProbeRun(config, output, provider, listener or QuietListener(), case)
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
            else:
                # A plan's own reference arm (a replay's) runs after the arms it serves.
                for spec in config.arms:
                    if spec.role == "reference":
                        run.run_arm(spec)
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
