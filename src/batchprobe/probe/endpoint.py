"""Where an arm sends its requests, and who provides that server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Literal, Protocol

from batchprobe.engines import default_registry, diagnose
from batchprobe.errors import BatchprobeError, EngineDied, EngineError, EngineStalled
from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.models import ArmResult, ArmSpec

_EXIT_WAIT_S = 2.0

CacheControl = Literal["request_field", "restart", "none"]


def _no_diagnosis(error_bodies: list[str]) -> list[Diagnosis]:
    return []


@dataclass(frozen=True)
class EngineProcess:
    """The process behind a managed endpoint: how to find it, and how it ended."""

    pid: int
    pgid: int
    launch_token: str
    exit_code: Callable[[float], int | None]
    """The exit status, waiting up to that many seconds; None while it runs."""
    log_tail: Callable[[], str]
    argv: tuple[str, ...] = ()
    """The command line it was launched with."""


@dataclass(frozen=True)
class Endpoint:
    """A server ready for one arm.

    ``cache_control`` says how prefix caches are kept cold between arms: ``restart`` when the
    provider starts a fresh server per arm; the per-request switch is detected by the probe.
    """

    base_url: str
    model: str | None = None
    engine_version: str | None = None
    cache_control: CacheControl = "none"
    log_path: str | None = None
    is_alive: Callable[[], bool] | None = None
    diagnose: Callable[[list[str]], list[Diagnosis]] = field(default=_no_diagnosis)
    process: EngineProcess | None = None
    request_ids: bool = True  # send x-request-id (see Capabilities.request_id_header)


class EndpointProvider(Protocol):
    """Gives each arm a ready server, and explains a server that could not be given."""

    def __call__(self, spec: ArmSpec) -> AbstractContextManager[Endpoint]: ...

    def explain(self, exc: BatchprobeError) -> list[Diagnosis]: ...

    def explain_findings(self, findings: list[str]) -> list[Diagnosis]:
        """The engine's known issues its hard findings ('KIND: message') show: a bug that
        leaves no trace in a log, known by its symptom on an affected version."""
        ...

    def kv_pool(self, tokens: int) -> bool:
        """Whether an arm can get a server launched with one KV pool of ``tokens`` (a URL's
        server is as it is)."""
        ...


class UrlProvider:
    """Every arm talks to the same already-running server."""

    def __init__(self, base_url: str, model: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model

    @contextmanager
    def _provide(self) -> Iterator[Endpoint]:
        yield Endpoint(base_url=self.base_url, model=self.model, diagnose=known_from_bodies)

    def __call__(self, spec: ArmSpec) -> AbstractContextManager[Endpoint]:
        return self._provide()

    def explain(self, exc: BatchprobeError) -> list[Diagnosis]:
        return []

    def explain_findings(self, findings: list[str]) -> list[Diagnosis]:
        return []  # a URL's engine and version are not known

    def kv_pool(self, tokens: int) -> bool:
        return False


def known_from_bodies(error_bodies: list[str]) -> list[Diagnosis]:
    """Known issues of any engine recognisable from error bodies alone (no log to read)."""
    return [
        d
        for engine in default_registry()
        for d in diagnose(engine.name, None, "", error_bodies)
        if d.known
    ]


def url_provider(base_url: str, model: str | None = None) -> UrlProvider:
    return UrlProvider(base_url, model)


def engine_died(ep: Endpoint, arm: ArmResult | None, when: str) -> EngineDied | None:
    """EngineDied with the exit code and log tail when the managed engine has exited (kept on
    ``arm``, the arm it served, when one had started)."""
    if ep.process is None:
        return None
    # It stopped answering: give an exiting process a moment to be done.
    code = ep.process.exit_code(_EXIT_WAIT_S)
    if code is None:
        return None
    if arm is not None:
        arm.engine_exit_code = code
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    where = f"; log: {ep.log_path}" if ep.log_path else ""
    return EngineDied(f"the engine {how} {when}{where}", log_tail=ep.process.log_tail())


def server_lost(
    ep: Endpoint, arm: ArmResult | None, when: str, exc: EngineError
) -> EngineError:
    """What to raise when the server stopped answering (``exc``) during an arm: EngineDied
    with its exit code when the managed process exited, else ``exc`` itself, a stall with the
    live process's log tail."""
    died = engine_died(ep, arm, when)
    if died is not None:
        return died
    if isinstance(exc, EngineStalled) and ep.process is not None:
        exc.log_tail = ep.process.log_tail()
    return exc
