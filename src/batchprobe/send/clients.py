"""The client side of an arm: how many client processes send it, and whether the client's own
timings can be trusted afterwards (its connections and its event loops' lag)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from batchprobe.client import ClientPool, Completer, OpenAIClient
from batchprobe.client._lag import worst
from batchprobe.results.client import ClientHealth
from batchprobe.results.models import ArmResult
from batchprobe.results.thresholds import Thresholds

STREAMS_PER_PROC = 256
"""Concurrent streams one client process carries before ``auto_procs`` adds another: one
process streams ~30k one-token packets/s, a GPU server's rate at about 256 sessions."""


def auto_procs(concurrency: int, cpus: int | None = None) -> int:
    """The default ``--client-procs``: 1 for small runs, one per :data:`STREAMS_PER_PROC`
    streams of the deepest arm beyond that, at most one per core of this machine."""
    cores = cpus if cpus is not None else (os.cpu_count() or 1)
    return max(1, min(-(-concurrency // STREAMS_PER_PROC), cores))


@asynccontextmanager
async def arm_client(client: OpenAIClient, procs: int) -> AsyncIterator[Completer]:
    """``client`` itself for one process; else a pool of ``procs`` worker processes."""
    if procs <= 1:
        yield client
        return
    async with ClientPool(client, procs) as pool:
        yield pool


async def client_health(
    completer: Completer, arm: ArmResult, procs: int, thresholds: Thresholds
) -> ClientHealth:
    """The arm's client record, from the loop lag since the last call (the arm's start)."""
    lags = await completer.loop_lag()
    policy = completer.connection_policy
    lagged = worst(lags)
    limit = thresholds.client_lag_ms
    return ClientHealth(
        procs=procs,
        connections=policy.mode,
        connections_reason=policy.reason,
        reconnects=sum(1 for s in arm.sessions if s.reconnect is not None),
        loop_lag=lags,
        lag_threshold_ms=limit,
        trusted=lagged is None or lagged.busy_p99_ms <= limit,
    )
