"""Plans: which arms a run has. An arm is written ``name@N`` (``batching@8``)."""

from __future__ import annotations

import re
from typing import Literal

from batchprobe.errors import ConfigError
from batchprobe.results.models import ArmSpec

Mode = Literal["simple", "batching"]
MODES: tuple[Mode, ...] = ("simple", "batching")
_ARM = re.compile(r"^(?P<name>[a-z][a-z0-9_-]*)@(?P<n>[0-9]+)$")


def baseline_arm(managed: bool) -> ArmSpec:
    """A sweep's serial cold baseline: its own launch in simple mode, or the URL's server,
    after the sweep, sending alone only the references the judge asks for."""
    if managed:
        return ArmSpec(name="simple@1", concurrency=1, mode="simple", role="reference")
    return ArmSpec(name="serial", concurrency=1, role="reference")


def url_arms(sessions: int) -> list[ArmSpec]:
    """The default plan for a URL: everything one at a time, then everything at once."""
    return [ArmSpec(name="serial", concurrency=1), ArmSpec(name="concurrent", concurrency=sessions)]


def engine_arms(sessions: int) -> list[ArmSpec]:
    """The default plan for a managed engine.

    ``batching@1`` beside ``simple@1`` separates a configuration bug (batching mode broken even
    alone) from a concurrency bug (broken only with several sessions in flight).
    """
    return [
        ArmSpec(name="simple@1", concurrency=1, mode="simple"),
        ArmSpec(name="batching@1", concurrency=1, mode="batching"),
        ArmSpec(name=f"batching@{sessions}", concurrency=sessions, mode="batching"),
    ]


def parse_arms(text: str, *, managed: bool) -> list[ArmSpec]:
    """Parse ``--arms``. With a managed engine the name is the mode: simple or batching."""
    arms: list[ArmSpec] = []
    for raw in (part.strip() for part in text.split(",")):
        match = _ARM.match(raw)
        if match is None:
            raise ConfigError("--arms", f"'{raw}' is not NAME@N (e.g. serial@1,concurrent@8)")
        name, n = match["name"], int(match["n"])
        if n < 1:
            raise ConfigError("--arms", f"'{raw}': N must be at least 1")
        mode: Mode | None = None
        if managed:
            mode = next((m for m in MODES if m == name), None)
            if mode is None:
                raise ConfigError("--arms", f"'{raw}': mode must be one of {', '.join(MODES)}")
        arms.append(ArmSpec(name=raw, concurrency=n, mode=mode))
    if len({a.name for a in arms}) != len(arms):
        raise ConfigError("--arms", "each arm may appear once")
    return arms
