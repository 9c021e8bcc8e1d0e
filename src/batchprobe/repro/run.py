"""`batchprobe repro`: a FAIL shrunk to the few requests a maintainer needs.

The failure is picked from the verdict, its wave replayed against the target ``tries`` times
to confirm it, then shrunk while it persists (``repro.shrink``), and written out
(``repro.write``). A failure that comes back in fewer than half the replays is flaky: its
rate is reported and it is not shrunk.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from batchprobe.errors import ConfigError, ReportError
from batchprobe.probe.managed import EngineProvider, engine_target
from batchprobe.report.load import load_verdict
from batchprobe.repro.case import ReproCase, ReproRequest, case_from
from batchprobe.repro.replay import Replay, client_for, replay
from batchprobe.repro.shrink import Shrinker, shrink
from batchprobe.repro.write import Outcome, write_all
from batchprobe.results.arms import ArmSpec
from batchprobe.results.bisect import BisectReport

READY_TIMEOUT_S = 300.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReproOptions:
    verdict: Path
    output: Path
    base_url: str | None = None
    model: str | None = None
    finding: int | None = None
    session: int | None = None
    engine: str | None = None
    """``NAME==VERSION`` to launch (``model``: its path or alias); default: the verdict's
    own engine when batchprobe launched it, else its URL."""
    patches: tuple[str, ...] | None = None
    tries: int = 5
    time_budget_s: float = 900.0
    bisect: Path | None = None


@dataclass
class ReproResult:
    case: ReproCase
    requests: list[ReproRequest]
    outcome: Outcome
    files: list[Path]


def _bisect(path: Path | None) -> BisectReport | None:
    if path is None:
        return None
    try:
        return BisectReport.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"--bisect {path}: not a bisect result batchprobe can read ({exc})") from exc


def _options(o: ReproOptions) -> None:
    if not 1 <= o.tries <= 100:
        raise ConfigError("tries", f"{o.tries}: give 1 to 100 replays per candidate")
    if not 0 < o.time_budget_s < math.inf:
        raise ConfigError("time_budget", f"{o.time_budget_s}: give a finite number of seconds > 0")
    if o.output.exists() and (not o.output.is_dir() or any(o.output.iterdir())):
        raise ConfigError("output", f"{o.output} exists and is not an empty folder: name a new one")


class _Server:
    """The target: a URL as given, or an engine batchprobe launches in the failing arm's
    mode at the wave's depth. A launched engine is launched again before a replay when the
    replay sends the prompts exactly as the run did (``cached``: its cache must start cold
    and a nonce cannot make it), or when the last replay errored (a crash)."""

    def __init__(self, case: ReproCase, o: ReproOptions) -> None:
        self.case, self.model = case, o.model
        self.base_url = o.base_url or (case.target.base_url if o.engine is None else None)
        self.provider: EngineProvider | None = None
        self.stack = ExitStack()
        if o.base_url is None and (o.engine is not None or case.target.engine is not None):
            t = case.target
            ref, model = engine_target(o.engine or t.engine,
                                       o.model if o.engine else t.model_arg, None)
            self.provider = EngineProvider(
                ref, model, log_dir=o.output.with_name(o.output.name + "-logs"),
                ready_timeout=READY_TIMEOUT_S,
                patches=list(o.patches) if o.patches is not None else t.patches,
                engine_args=t.engine_args if o.engine is None else [],
            )
        elif self.base_url is None:
            raise ConfigError("base_url", "the verdict names no server: pass --base-url")
        # Replayed with the prompts exactly as sent (no nonce): a case sent with the prefix
        # cache, or holding a later conversation turn (its prompt holds the earlier turn's
        # answer as the run got it, which a nonce would change).
        self.command: list[str] | None = None
        self.clean = False
        """The launch has served no replay that the next must not follow."""
        """The launched engine's command line (REPORT.md's launch command)."""
        self.cached = any(r.prefix_cache or (r.item.turn is not None and r.item.turn.index > 1)
                          for r in case.requests)

    @property
    def managed(self) -> bool:
        return self.provider is not None

    def start(self) -> None:
        """Launch the engine (again); a URL stays as it is."""
        if self.provider is None:
            return
        self.stack.close()
        spec = ArmSpec(name="repro", concurrency=self.case.concurrency,
                       depth=self.case.concurrency, mode=self.case.mode or "batching",
                       role="replay", prefix_cache=self.cached)
        ep = self.stack.enter_context(self.provider(spec))
        self.base_url, self.model = ep.base_url, ep.model
        self.command = list(ep.process.argv) if ep.process is not None else None
        self.clean = True

    def served(self, replay_errored: bool) -> None:
        """A replay ran: the next needs a fresh launch when this one's cache must not serve
        it (``cached``) or a request errored (the engine may have crashed)."""
        self.clean = not (self.cached or replay_errored)

    def close(self) -> None:
        self.stack.close()


async def _replays(server: _Server, case: ReproCase, requests: list[ReproRequest],
                   tries: int, last: list[Replay]) -> int:
    """``tries`` replays of ``requests``; how many showed the failure (the last that did is
    kept in ``last``)."""
    failed = 0
    for _ in range(tries):
        if server.managed and not server.clean:
            server.start()
        url = server.base_url
        if url is None:
            raise ConfigError("base_url", "the verdict names no server: pass --base-url")
        async with client_for(case, url, server.model) as client:
            await client.get_json("/props")  # EngineUnreachable when nothing answers
            one = await replay(client, case, requests, nonce=not server.cached)
        server.served(any(s.error is not None for s in one.arm.sessions))
        if one.shows(case):
            failed += 1
            last[:] = [one]
    return failed


async def _run(server: _Server, case: ReproCase, o: ReproOptions,
               progress: Progress) -> tuple[list[ReproRequest], Outcome]:
    started = time.monotonic()
    last: list[Replay] = []

    async def trial(requests: list[ReproRequest]) -> int:
        return await _replays(server, case, requests, o.tries, last)

    confirmed = await trial(case.requests)
    took = time.monotonic() - started
    if took / o.tries > o.time_budget_s:
        raise ConfigError("time_budget", f"{o.time_budget_s:g} s: one replay of the wave "
                          f"takes {took / o.tries:.0f} s; give at least {took:.0f} s")
    progress(f"the whole wave ({len(case.requests)} requests): the failure came back in "
             f"{confirmed}/{o.tries} replays")
    if 2 * confirmed < o.tries:
        evidence = last[0].evidence(case) if last else None
        return case.requests, Outcome(o.tries, confirmed, True, [], confirmed, evidence)
    shrinker = Shrinker(case, trial, o.tries, max(1, math.ceil(confirmed / 2)),
                        started + o.time_budget_s, progress)
    requests = await shrink(shrinker)
    last.clear()
    final = await trial(requests)
    progress(f"the minimal case ({len(requests)} request(s)): {final}/{o.tries}")
    evidence = last[0].evidence(case) if last else None
    return requests, Outcome(o.tries, confirmed, False, shrinker.history, final, evidence)


def reproduce(o: ReproOptions, progress: Progress = lambda line: None) -> ReproResult:
    """Confirm, shrink and write the reproducer of a verdict's failure (see the module)."""
    _options(o)
    bisect = _bisect(o.bisect)
    case = case_from(load_verdict(o.verdict), o.finding, o.session)
    server = _Server(case, o)
    try:
        server.start()
        requests, outcome = asyncio.run(_run(server, case, o, progress))
    finally:
        server.close()
    outcome.command = server.command
    files = write_all(o.output, case, requests, outcome,
                      None if server.managed else server.base_url, bisect)
    return ReproResult(case, requests, outcome, files)
