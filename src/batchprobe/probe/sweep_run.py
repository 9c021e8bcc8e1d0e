"""The sweep's orchestration: every planned depth on one launch, then the bisection of a
failure; each step is an arm of the report and a step of the envelope, judged as it ends."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from batchprobe.client import OpenAIClient
from batchprobe.client.types import RequestError
from batchprobe.errors import EngineStalled, EngineUnreachable
from batchprobe.judge.final import final_steps
from batchprobe.judge.judge import judge_arm, replay_candidates
from batchprobe.judge.references import references
from batchprobe.judge.steps import envelope, failure_rule, knee, step_record
from batchprobe.probe.cache import cache_policy, launch_spec
from batchprobe.probe.endpoint import Endpoint, server_lost
from batchprobe.probe.metrics import arm_metrics
from batchprobe.probe.pairs import PairRunner, pair_plan
from batchprobe.probe.replay import replay_wrong
from batchprobe.probe.state import RunState, utc_now
from batchprobe.probe.sweep import predicted_s
from batchprobe.results.arms import ArmResult, ArmSpec
from batchprobe.results.findings import Finding, Judged
from batchprobe.results.sweep import StepRun, StopRule, SweepRun, SweepStep, SweepStop
from batchprobe.results.throughput import PairedThroughput
from batchprobe.send.arm import ArmContext, generates, warm_up
from batchprobe.send.clients import arm_client, client_health
from batchprobe.send.cpu import CpuMeter
from batchprobe.send.load import InFlight, LoadSampler
from batchprobe.send.waves import run_mixed_wave, run_waves
from batchprobe.workload.shapes import ShapePlan

StepPlans = tuple[ShapePlan | None, list[ShapePlan]]


def _last(arms: list[ArmResult]) -> ArmResult | None:
    """The arm under way when the server was lost (none before the sweep's first step)."""
    return arms[-1] if arms else None


# How long a server may take to stop requests after a step, in its longest request's time.
DRAIN_FACTOR = 2.0
DRAIN_BOUNDS_S = (5.0, 60.0)


def _drain_deadline(arm: ArmResult) -> float:
    """How long after a step with client aborts the server may still run requests: twice
    its longest request, within DRAIN_BOUNDS_S (a dropped request run on to its max_tokens
    ends within that; one still running then never stops)."""
    longest = max((s.end_s - s.start_s for s in arm.sessions), default=0.0)
    low, high = DRAIN_BOUNDS_S
    return min(max(DRAIN_FACTOR * longest, low), high)


def step_plans(plans: StepPlans) -> list[ShapePlan]:
    throughput, mixed = plans
    return [*([throughput] if throughput is not None else []), *mixed]


class Sweep:
    """One sweep of a run: its steps, why it stopped, the launch's warm-up."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.config = run.config
        self.steps: list[SweepStep] = []
        """Each step as the judge could call it when it ended (the stop rule reads them);
        the final pass makes them again from the record."""
        self.record = run.report.sweep_run = SweepRun(pressure_not_run="the run stopped before it")
        """What the sweep did, in the verdict file: the final pass judges from it."""
        self.notes: list[str] = self.record.notes
        self.throughput: list[PairedThroughput] = self.record.throughput
        self.warm_up_error: RequestError | None = None
        self.plans_of: dict[str, StepPlans] = {}
        """Each step's plans, for its replays."""
        self.spec: ArmSpec | None = None

    @property
    def stop(self) -> SweepStop | None:
        return self.record.stop

    @stop.setter
    def stop(self, stop: SweepStop | None) -> None:
        self.record.stop = stop

    def launch(self) -> None:
        depths = self.config.sweep or []
        managed = self.config.base_url is None
        spec = launch_spec(
            ArmSpec(name="sweep", concurrency=max(depths), mode="batching" if managed else None,
                    role="step"),
            self.config,
        )
        run = self.run
        self.spec = spec
        with run.provider(spec) as ep:
            try:
                run.interrupts.run(self._sweep(ep, spec))
            except (EngineUnreachable, EngineStalled) as exc:
                lost = server_lost(ep, _last(run.report.arms), "during the sweep", exc)
                if lost is exc:
                    raise
                raise lost from exc
            finally:
                for arm in run.report.arms:
                    if arm.spec.role != "arm":
                        run.diagnose(ep, arm)

    async def _sweep(self, ep: Endpoint, spec: ArmSpec) -> None:
        async with self.run.client(ep) as client:
            ctx = await self.run.prepare(ep, client)
            ctx.cache_body, ctx.cold_note, ctx.cache_note = cache_policy(
                ctx.extra_body, ep.cache_control, spec
            )
            warm = await warm_up(client, spec.name, ctx)
            # An error of the step it precedes: the first one.
            self.warm_up_error = warm.error
            started = time.monotonic()
            deepest = max(self.config.sweep or [1])
            if deepest > 1:
                await self._pairs(client, ep, ctx, deepest, "start")
            await self._planned(client, ep, ctx, spec, started)
            if deepest > 1 and self.steps:
                await self._pairs(client, ep, ctx, deepest, "after")
            if self.stop is not None and self.stop.rule in (StopRule.INCORRECT, StopRule.ERRORS):
                await self._bisect(client, ep, ctx, spec, started)

    async def _planned(
        self, client: OpenAIClient, ep: Endpoint, ctx: ArmContext, spec: ArmSpec, started: float
    ) -> None:
        cfg = self.config
        last: SweepStep | None = None
        for n in cfg.sweep or []:
            plans = (self.run.plans.throughput.get(n), self.run.plans.steps[n])
            if last is not None and not self._fits(started, last, plans, n):
                return
            last = await self._step(client, ep, ctx, spec, n, plans, "sweep")
            if last.correct is False:
                detail = "; ".join(last.reasons[:2])
                self.stop = SweepStop(rule=failure_rule(last), at_n=n, detail=detail)
                return
            if last.within_slo is False:
                self.stop = SweepStop(rule=StopRule.SLO, at_n=n, detail="; ".join(last.slo_breaches))
                return
            at = knee(self.steps)
            if cfg.sweep_auto and at is not None and n >= 2 * cfg.sessions:
                self.stop = SweepStop(
                    rule=StopRule.KNEE, at_n=at, detail=f"throughput stopped growing after {at}"
                )
                return
        if last is not None and last.n == (cfg.sweep or [0])[-1]:
            self.stop = SweepStop(rule=StopRule.PLAN_END, at_n=last.n)

    async def _pairs(
        self, client: OpenAIClient, ep: Endpoint, ctx: ArmContext, n: int, when: str
    ) -> None:
        """The throughput pairs at ``n``: at the start, before any correctness traffic (and
        more of them while the interval holds the threshold), or again after the mixed waves."""
        shapes = self.run.plans.shape_ctx
        if shapes is None:
            return
        label = "before any correctness traffic" if when == "start" else "again, after the mixed waves"
        self.run.listener.phase(f"throughput pairs at N={n}, {label}", 0)
        pgid = ep.process.pgid if ep.process is not None else None
        async with arm_client(client, self.run.client_procs(n)) as sender:
            runner = PairRunner(sender, ctx, shapes, CpuMeter(pgid))
            earlier = next((p for p in self.throughput if p.n == n), None)
            result = await runner.run(pair_plan(self.config, n, when), earlier)
        self.throughput.append(result)
        self.run.report.envelope = envelope(None, self.steps, self.notes, self.throughput)
        self.run.save()

    def _fits(self, started: float, last: SweepStep, plans: StepPlans, n: int) -> bool:
        """Whether the next step, predicted from the last one's pace, fits the time budget."""
        budget = self.config.time_budget_s
        if budget is None:
            return True
        elapsed = time.monotonic() - started
        predicted = predicted_s(last, sum(len(p.sends) for p in step_plans(plans)))
        if elapsed + predicted <= budget:
            return True
        self.stop = SweepStop(
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
        stop = self.stop
        if stop is None or stop.at_n is None:
            return
        failing = stop.at_n
        correct = max(
            (s.n for s in self.steps if s.correct is not False and s.n < failing), default=None
        )
        while correct is not None and failing - correct > 1:
            middle = (correct + failing) // 2
            plans = self.run.plans.at(middle)
            self.run.plant(step_plans(plans))
            if not self._fits(started, self.steps[-1], plans, middle):
                self.stop = stop.model_copy(
                    update={"detail": f"{stop.detail}; bisection cut short by the time budget"}
                )
                return
            step = await self._step(client, ep, ctx, spec, middle, plans, "bisect")
            if step.correct is not False:
                correct = middle
            else:
                failing = middle
        self.stop = stop.model_copy(update={"at_n": failing})

    def _new_arm(self, name: str, n: int, depth: int, mode: str | None, role: str) -> ArmResult:
        arm = ArmResult(
            spec=ArmSpec(name=name, concurrency=n, depth=depth, mode=mode, role=role),  # type: ignore[arg-type]
            state="running",
            started_at=utc_now(),
        )
        self.run.report.arms.append(arm)
        return arm

    async def _waves(
        self, client: OpenAIClient, ep: Endpoint, arm: ArmResult, ctx: ArmContext, plans: StepPlans
    ) -> tuple[LoadSampler, float]:
        """The throughput phase, then the mixed wave, with the server's load sampled; the
        mixed wave's wall time."""
        throughput, mixed = plans
        pgid = ep.process.pgid if ep.process is not None else None
        procs = self.run.client_procs(arm.spec.concurrency)
        flight = InFlight()
        sampling = LoadSampler(ep.base_url, pgid, flight)
        async with arm_client(client, procs) as sender, sampling as sampler:
            await sender.loop_lag()  # the step's window starts here
            t0 = time.perf_counter()
            if throughput is not None:
                await run_mixed_wave(sender, arm, dataclasses.replace(ctx, plans=[throughput]),
                                     t0, flight)
            mixed_wall = await run_mixed_wave(sender, arm, dataclasses.replace(ctx, plans=mixed),
                                              t0, flight)
            wall = time.perf_counter() - t0
            dropped = sum(1 for s in arm.sessions if s.hung_up)
            # Requests that errored (a client timeout closes its connection too) leave the
            # server's running count nothing to tell the dropped ones apart from.
            if dropped and not any(s.error for s in arm.sessions):
                arm.capacity = await sampler.capacity(dropped, _drain_deadline(arm))
            self.run.client_health(arm, await client_health(sender, arm, procs, ctx.thresholds))
        arm.metrics = arm_metrics(arm.sessions, wall, every_shape=True)
        return sampler, mixed_wall

    async def _references(
        self, client: OpenAIClient, n: int, mode: str | None, ctx: ArmContext
    ) -> ArmResult:
        """A bisection step's items sent alone, after its waves (so they ran cold)."""
        ref = self._new_arm(f"references@{n}", 1, n, mode, "reference")
        self.run.listener.arm_started(ref, len(ctx.items))
        ref.metrics = arm_metrics(ref.sessions, await run_waves(client, ref, ctx))
        ref.state = "done"
        self.run.listener.arm_finished(ref, [], 0)
        return ref

    def _judge(self, arm: ArmResult) -> tuple[list[Finding], list[Judged], list[int]]:
        """What the judge can say of a step as it ends, before the references it asks for:
        errors, cross-talk, broken streams, answers that checked themselves (a bisection
        step brings its own references). The final pass (``finalize``) says the rest."""
        refs = references(self.run.report.arms)
        one = judge_arm(arm, False, refs, self.config.thresholds)
        found = list(one.findings)
        for other in self.run.report.arms:
            if other.spec.role == "reference" and other.spec.depth == arm.spec.depth:
                found += judge_arm(other, True, refs, self.config.thresholds).findings
        return found, one.judged, one.awaiting

    async def _step(
        self, client: OpenAIClient, ep: Endpoint, ctx: ArmContext, spec: ArmSpec, n: int,
        plans: StepPlans, kind: str,
    ) -> SweepStep:
        """One step: its waves, its liveness, its references (bisection), what the judge can
        say of it before the references."""
        run = self.run
        arm = self._new_arm(f"sweep@{n}", n, n, spec.mode, "step")
        if not self.steps and self.warm_up_error is not None:
            arm.warm_up_error = self.warm_up_error
        run.served_by(ep, arm)
        step_ctx = dataclasses.replace(ctx, plans=step_plans(plans))
        run.listener.arm_started(arm, sum(len(p.sends) for p in step_ctx.plans))
        sampler, mixed_wall = await self._waves(client, ep, arm, ctx, plans)
        before = len(arm.sessions) - sum(len(p.sends) for p in plans[1])
        note = "the serial baseline: the references the judge asked for, sent alone after the sweep"
        if kind == "bisect":
            await self._references(client, n, spec.mode, step_ctx)
            note = f"references@{n}: its items sent alone on the sweep's launch, after the wave"
            waves = [[plans[0]]] if plans[0] is not None else []
            await replay_wrong(client, arm, ctx, run.report.arms, self.config.thresholds,
                               [*waves, plans[1]], mixed=True)
        self.plans_of[arm.spec.name] = plans
        arm.server_alive_after = await generates(client, arm.spec.name, step_ctx)
        if ep.is_alive is not None and not ep.is_alive():
            arm.server_alive_after = False
        arm.state = "done"
        found, counts, awaiting = self._judge(arm)
        run.listener.arm_finished(arm, found, len(awaiting))
        record = StepRun(n=n, arm=arm.spec.name, kind="bisect" if kind == "bisect" else "sweep",
                         references=note, mixed_wall_s=mixed_wall, mixed_from=before,
                         server_load=sampler.server_load(), engine_rss_peak_mb=sampler.rss_peak_mb)
        self.record.steps.append(record)
        step = step_record(
            arm, None, None, (found, counts), self.config, record.server_load,
            record.engine_rss_peak_mb, record.kind, note,
        )
        if not step.hard_kinds and awaiting:
            step = step.model_copy(update={
                "correct": None,
                "reasons": [f"{len(awaiting)} answer(s) await their serial reference"],
            })
        self.steps.append(step)
        run.report.envelope = envelope(None, self.steps, self.notes, self.throughput)
        run.save()
        if arm.server_alive_after is False:
            raise EngineUnreachable(f"the server stopped answering after step {arm.spec.name}")
        return step

    async def replay(self, client: OpenAIClient, ctx: ArmContext) -> None:
        """Replay the waves of every step holding a wrong answer whose reference passed."""
        t = self.config.thresholds
        for arm in self.run.report.arms:
            plans = self.plans_of.get(arm.spec.name)
            if plans is None or arm.replays or not replay_candidates(arm, self.run.report.arms, t):
                continue
            throughput, mixed = plans
            waves = [[throughput]] if throughput is not None else []
            self.run.listener.phase(f"replays of {arm.spec.name}", 0)
            await replay_wrong(client, arm, ctx, self.run.report.arms, t, [*waves, mixed],
                               mixed=True)

    def after_references(self, judgement: Callable[[], tuple[list[Finding], list[Judged]]]) -> None:
        """After the references, on a batching launch again (a managed engine) or the same
        server: the steps' wrong answers whose reference passed are replayed in their waves;
        then, where the judgement (``judgement``: the run's findings so far) fails a step of
        the plan with a correct one below it, the depths between are bisected (each with its
        own references, sent alone on that launch)."""
        if self.spec is None:
            return
        spec, run = self.spec, self.run
        if not self.wants_replays() and self._late_stop(*judgement()) is None:
            return
        with run.provider(spec) as ep:
            try:
                run.interrupts.run(self._after(ep, spec, judgement))
            except (EngineUnreachable, EngineStalled) as exc:
                lost = server_lost(ep, _last(run.report.arms), "after the references", exc)
                if lost is exc:
                    raise
                raise lost from exc

    def _late_stop(self, findings: list[Finding], judged: list[Judged]) -> SweepStop | None:
        """Where the plan's steps, judged with their references, fail one that the sweep
        could not call failing as it ran (a wrong answer needs its reference) with a correct
        one below it and depths between: the stop there, for a bisection."""
        if self.stop is None or self.stop.rule is not StopRule.PLAN_END:
            return None
        self.steps = final_steps(self.run.report, findings, judged)
        failing = min((s.n for s in self.steps if s.correct is False), default=None)
        if failing is None:
            return None
        correct = max((s.n for s in self.steps if s.correct and s.n < failing), default=None)
        if correct is None or failing - correct <= 1:
            return None
        step = next(s for s in self.steps if s.n == failing)
        return SweepStop(rule=failure_rule(step), at_n=failing, detail="; ".join(step.reasons[:2]))

    async def _after(
        self, ep: Endpoint, spec: ArmSpec,
        judgement: Callable[[], tuple[list[Finding], list[Judged]]],
    ) -> None:
        async with self.run.client(ep) as client:
            ctx = await self.run.prepare(ep, client)
            ctx.cache_body, ctx.cold_note, ctx.cache_note = cache_policy(
                ctx.extra_body, ep.cache_control, spec
            )
            await self.replay(client, ctx)
            stop = self._late_stop(*judgement())
            if stop is not None:
                self.stop = stop
                self.run.listener.phase("bisection", 0)
                await self._bisect(client, ep, ctx, spec, time.monotonic())
    def wants_replays(self) -> bool:
        t = self.config.thresholds
        arms = self.run.report.arms
        return any(
            replay_candidates(a, arms, t) for a in arms if a.spec.name in self.plans_of
            and not a.replays
        )
