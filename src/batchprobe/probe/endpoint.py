"""Where an arm sends its requests, and who provides that server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Literal

from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.models import ArmSpec

CacheControl = Literal["request_field", "restart", "none"]


def _no_diagnosis(error_bodies: list[str]) -> list[Diagnosis]:
    return []


@dataclass(frozen=True)
class Endpoint:
    """A server ready for one arm.

    ``cache_control`` says how prefix caches are kept cold between arms: ``restart`` when the
    provider starts a fresh server per arm; ``request_field`` is detected by the probe itself.
    """

    base_url: str
    model: str | None = None
    engine_version: str | None = None
    cache_control: CacheControl = "none"
    is_alive: Callable[[], bool] | None = None
    log_tail: Callable[[], str] | None = None
    diagnose: Callable[[list[str]], list[Diagnosis]] = field(default=_no_diagnosis)


EndpointProvider = Callable[[ArmSpec], AbstractContextManager[Endpoint]]


def url_provider(base_url: str, model: str | None = None) -> EndpointProvider:
    """Every arm talks to the same already-running server."""

    @contextmanager
    def provide(spec: ArmSpec) -> Iterator[Endpoint]:
        yield Endpoint(base_url=base_url.rstrip("/"), model=model)

    return provide
