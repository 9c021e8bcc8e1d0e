"""`engines doctor`: what this machine can install and run, and whether installs still work."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from batchprobe.engines._envs import installed_versions
from batchprobe.engines._launches import reap_stale, stale_launches
from batchprobe.engines._llama_build import missing_tools
from batchprobe.engines._registry import EngineRegistry, default_registry
from batchprobe.engines._steps import capture
from batchprobe.engines._types import current_platform
from batchprobe.paths import cache_dir as default_cache_dir


class DoctorCheck(BaseModel):
    """One line of the doctor's report."""

    model_config = ConfigDict(extra="forbid")

    subject: str
    ok: bool
    detail: str


def _tool_checks(cache: Path) -> list[DoctorCheck]:
    missing = missing_tools()
    free_gib = shutil.disk_usage(cache).free / 2**30
    return [
        DoctorCheck(
            subject="platform",
            ok=True,
            detail=f"{current_platform()} (python {sys.version.split()[0]})",
        ),
        DoctorCheck(subject="cache", ok=free_gib > 5, detail=f"{cache} ({free_gib:.0f} GiB free)"),
        DoctorCheck(
            subject="llama.cpp build tools",
            ok=not missing,
            detail="cmake, ninja, c++ found" if not missing else f"missing: {', '.join(missing)}",
        ),
    ]


def _install_checks(registry: EngineRegistry, cache: Path) -> list[DoctorCheck]:
    checks = []
    for engine in registry:
        for version in installed_versions(engine, cache):
            inst = engine.installation(version, engine.install_root(version, cache))
            try:
                detail = engine.parse_version(capture(engine.version_argv(inst)))
                ok = True
            except ValueError as exc:
                detail, ok = f"broken: {exc}", False
            checks.append(
                DoctorCheck(
                    subject=f"{engine.name}=={version}",
                    ok=ok,
                    detail=f"{inst.root} reports {detail}" if ok else detail,
                )
            )
        binary = engine.find_binary()
        if binary is not None:
            checks.append(DoctorCheck(subject=engine.name, ok=True, detail=f"found {binary}"))
    return checks


def _launch_checks(cache: Path, reap: bool) -> list[DoctorCheck]:
    """Engines whose batchprobe is gone but which still run (or were just reaped)."""
    checks = []
    for stale in reap_stale(cache) if reap else stale_launches(cache):
        record = stale.record
        pids = ", ".join(str(p) for p in stale.pids)
        where = f"{record.engine} launch {record.token} (owner pid {record.owner_pid} is gone)"
        checks.append(
            DoctorCheck(
                subject="stale launch",
                ok=reap,
                detail=f"{where}: reaped pids {pids}"
                if reap
                else f"{where}: pids {pids} still run; `batchprobe engines doctor --reap` stops "
                f"them; argv: {' '.join(record.argv)}",
            )
        )
    return checks


def doctor(
    cache_dir: Path | None = None, registry: EngineRegistry | None = None, *, reap: bool = False
) -> list[DoctorCheck]:
    """Checks of the machine, of every installed engine environment, and of stale launches
    (engines left running by a batchprobe that died); ``reap`` stops those."""
    cache = default_cache_dir(cache_dir)
    return (
        _tool_checks(cache)
        + _install_checks(registry or default_registry(), cache)
        + _launch_checks(cache, reap)
    )
