"""The KV-pressure wave, after the sweep: requests that each fit the server's KV pool alone
and together hold it past its size, sent at once; then one request larger than the pool,
alone. A managed engine gets a launch of its own with a small pool (where it has the option);
a URL's server is filled where it states its pool, or ``--kv-tokens`` gives it.

The answers are judged like any other (a count repeated or shifted after a preemption is a
wrong answer); the judge reads the requests that failed while the pool was full, and the
oversize request's outcome, from the arm's ``pressure`` record.
"""

from __future__ import annotations

import dataclasses
import time

from batchprobe.client import OpenAIClient
from batchprobe.client.types import ErrorKind
from batchprobe.errors import EngineStalled, EngineUnreachable
from batchprobe.probe.endpoint import Endpoint, server_lost
from batchprobe.probe.metrics import arm_metrics
from batchprobe.probe.pool import (
    LEAST_OVER,
    MANAGED_POOL_TOKENS,
    peak_in_flight,
    stated_pool,
    wave_size,
)
from batchprobe.probe.state import RunState
from batchprobe.results.arms import ArmResult, ArmSpec
from batchprobe.results.items import WorkItem
from batchprobe.results.pool import KvPool, Oversize, PoolPressure
from batchprobe.results.sessions import refused_up_front
from batchprobe.send.arm import generates, warm_up
from batchprobe.send.clients import arm_client
from batchprobe.send.load import InFlight, gauge
from batchprobe.send.waves import run_mixed_wave
from batchprobe.workload.pressure import NAME, oversize_item, pressure_items
from batchprobe.workload.shapes import Send, ShapePlan

_PREEMPTIONS = "vllm:num_preemptions_total"
# Errors that mean "the client gave up waiting": the oversize request hung.
_WAITED_OUT = (ErrorKind.READ_TIMEOUT, ErrorKind.TOTAL_TIMEOUT)


class PressureWave:
    """One wave past the KV pool; ``not_run`` says why there was none."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.not_run = None

    @property
    def not_run(self) -> str | None:
        record = self.run.report.sweep_run
        return record.pressure_not_run if record is not None else None

    @not_run.setter
    def not_run(self, why: str | None) -> None:
        """Kept in the sweep's record, which the final pass reads."""
        if self.run.report.sweep_run is not None:
            self.run.report.sweep_run.pressure_not_run = why

    def launch(self) -> None:
        run, cfg = self.run, self.run.config
        depth = max(cfg.sweep or [1])
        if depth < 2:
            self.not_run = "the sweep's deepest step is 1: a pool is filled by requests together"
            return
        managed = cfg.base_url is None
        kv = cfg.kv_tokens if cfg.kv_tokens is not None else MANAGED_POOL_TOKENS
        if managed and not run.provider.kv_pool(kv):
            self.not_run = (f"{cfg.engine or 'the engine'} has no launch option "
                            "that sizes its KV pool (llama.cpp -c with --kv-unified, vLLM "
                            "--num-gpu-blocks-override, SGLang --max-total-tokens)")
            return
        spec = ArmSpec(name=f"pressure@{depth}", concurrency=depth,
                       mode="batching" if managed else None, role="pressure",
                       kv_tokens=kv if managed else None)
        with run.provider(spec) as ep:
            try:
                run.interrupts.run(self._wave(ep, spec))
            except (EngineUnreachable, EngineStalled) as exc:
                arms = [a for a in run.report.arms if a.spec.name == spec.name]
                lost = server_lost(ep, arms[-1] if arms else None, "in the KV-pressure wave", exc)
                if lost is exc:
                    raise
                raise lost from exc
            finally:
                for arm in run.report.arms:
                    if arm.spec.role == "pressure":
                        run.diagnose(ep, arm)

    async def _pool(self, client: OpenAIClient, spec: ArmSpec) -> KvPool | None:
        cfg = self.run.config
        if spec.kv_tokens is not None:
            return KvPool(tokens=spec.kv_tokens, per_request=spec.kv_tokens,
                          source=f"the launch: one pool of {spec.kv_tokens} shared by every slot")
        if cfg.kv_tokens is not None:
            return KvPool(tokens=cfg.kv_tokens, source="--kv-tokens")
        warnings: list[str] = []
        pool = await stated_pool(client, await client.get_json("/props"), warnings)
        self.run.report.warnings += warnings
        return pool

    async def _wave(self, ep: Endpoint, spec: ArmSpec) -> None:
        run = self.run
        async with run.client(ep) as client:
            ctx = await run.prepare(ep, client)
            shapes = run.plans.shape_ctx
            pool = await self._pool(client, spec)
            if pool is None or shapes is None:
                self.not_run = ("the server states no KV pool (vLLM /metrics, SGLang "
                                "/get_server_info, llama.cpp /props); give it with --kv-tokens")
                return
            requests, each, why = wave_size(pool, spec.concurrency)
            if why is not None:
                self.not_run = why
                return
            sessions = shapes.take_sessions(requests + 1)
            run_id, cpt, seed = run.report.run_id, shapes.chars_per_token, run.config.seed
            items = pressure_items(run_id=run_id, sessions=sessions[:-1], tokens_each=each,
                                   chars_per_token=cpt, seed=seed, api=shapes.default_api)
            over = int(pool.tokens * LEAST_OVER) + 1
            big = oversize_item(run_id=run_id, session=sessions[-1], tokens=over,
                                chars_per_token=cpt, seed=seed, api=shapes.default_api)
            wave = ShapePlan(NAME, items, [Send(i) for i in items],
                             notes=[f"{len(items)} requests of about {each} tokens at once"])
            alone = ShapePlan(NAME, [big], [Send(big)], notes=["larger than the pool, alone"])
            run.plant([wave, alone])
            run.plans.plans.append(wave)  # its wrong answers get serial references
            arm = ArmResult(spec=spec, state="running")
            run.report.arms.append(arm)
            run.served_by(ep, arm)
            warm = await warm_up(client, spec.name, ctx)
            arm.warm_up_error = warm.error
            run.listener.arm_started(arm, len(items) + 1)
            before = await _preemptions(client)
            async with arm_client(client, 1) as sender:
                t0 = time.perf_counter()
                await run_mixed_wave(sender, arm, dataclasses.replace(ctx, plans=[wave]), t0,
                                     InFlight())
                wall = time.perf_counter() - t0
                await run_mixed_wave(sender, arm, dataclasses.replace(ctx, plans=[alone]), t0)
            after = await _preemptions(client)
            arm.metrics = arm_metrics([s for s in arm.sessions if s.session != big.session], wall)
            arm.pressure = _record(arm, pool, each, items, big.session, over,
                                   run.config.request_timeout_s)
            if before is not None and after is not None:
                arm.pressure.preemptions = after - before
            arm.server_alive_after = await generates(client, spec.name, ctx)
            if ep.is_alive is not None and not ep.is_alive():
                arm.server_alive_after = False
            arm.state = "done"
            run.listener.arm_finished(arm, [], 0)
            run.save()


async def _preemptions(client: OpenAIClient) -> int | None:
    value = gauge(await client.get_text("/metrics") or "", _PREEMPTIONS)
    return None if value is None else round(value)


def _record(arm: ArmResult, pool: KvPool, each: int, items: list[WorkItem], oversize: int,
            over: int,
            deadline_s: float) -> PoolPressure:
    """What the wave asked of the pool (each prompt as the server counted it, where it said,
    and its max_tokens), what the replies held at most, how the oversize request ended."""
    wave = [s for s in arm.sessions if s.session != oversize]
    planned = {i.session: i for i in items}
    asked = sum((s.prompt_tokens if s.prompt_tokens is not None else planned[s.session].max_tokens)
                + planned[s.session].max_tokens for s in wave if s.session in planned)
    big = next((s for s in arm.sessions if s.session == oversize), None)
    outcome: Oversize = ("not sent" if big is None else "answered" if big.error is None else
                         "hung" if big.error.kind in _WAITED_OUT else "refused")
    return PoolPressure(
        pool=pool, requests=len(wave), tokens_per_request=each, planned_tokens=asked,
        peak_tokens=peak_in_flight(wave), refused=sum(1 for s in wave if refused_up_front(s)),
        oversize=outcome, oversize_tokens=over, oversize_deadline_s=deadline_s,
    )
