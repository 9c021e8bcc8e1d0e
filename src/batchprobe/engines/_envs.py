"""Engine environments under the cache: one per engine version, found, installed, listed.

An environment counts as installed only when its marker file exists; the marker
is written last (atomically), so an install interrupted half-way is detected,
wiped and redone rather than mistaken for a finished one. A file lock keeps two
processes from building the same environment at once.
"""

from __future__ import annotations

import fcntl
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from glob import glob
from pathlib import Path

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, ValidationError

from batchprobe.engines._base import Engine
from batchprobe.engines._llama_build import build_llama_server
from batchprobe.engines._ref import EngineRef
from batchprobe.engines._registry import EngineRegistry, get_engine
from batchprobe.engines._steps import OnStep, capture, run_step
from batchprobe.engines._types import Installation, current_platform
from batchprobe.errors import ConfigError, EngineInstallFailed, EngineNotInstalled
from batchprobe.files import write_atomic
from batchprobe.paths import cache_dir as default_cache_dir

MARKER = ".batchprobe-complete"


class InstallMarker(BaseModel):
    """Written last into a finished environment."""

    model_config = ConfigDict(extra="forbid")

    name: str
    version: str
    platform: str = ""
    seconds: float | None = None
    steps: list[list[str]] = []


def _quiet(_: str) -> None:
    """Default progress callback: say nothing."""


def resolve(ref: EngineRef | str, registry: EngineRegistry | None = None) -> tuple[Engine, str]:
    """The engine and the exact version a reference means (its default when unversioned)."""
    parsed = EngineRef.parse(ref) if isinstance(ref, str) else ref
    engine = get_engine(parsed.name, registry)
    version = parsed.version or engine.default_version
    if version is None:
        return engine, ""
    return engine, version


def install_command(engine: Engine, version: str) -> list[str]:
    """The CLI argv that installs this engine version."""
    target = f"{engine.name}=={version}" if version else engine.name
    return ["batchprobe", "engines", "install", target]


def read_marker(root: Path) -> InstallMarker | None:
    """The marker of a finished environment at ``root``, or None."""
    try:
        return InstallMarker.model_validate_json((root / MARKER).read_text())
    except (FileNotFoundError, ValidationError):
        return None


def find_installation(
    ref: EngineRef | str, *, cache_dir: Path | None = None, registry: EngineRegistry | None = None
) -> Installation | None:
    """The finished installation a reference names, or None."""
    engine, version = resolve(ref, registry)
    kind = engine.install_recipe(version, current_platform()).kind
    if kind == "none":
        return Installation(name=engine.name, version=version or "user")
    if kind == "external":
        return _external(engine, version)
    root = engine.install_root(version, default_cache_dir(cache_dir))
    return engine.installation(version, root) if read_marker(root) else None


def require_installation(
    ref: EngineRef | str, *, cache_dir: Path | None = None, registry: EngineRegistry | None = None
) -> Installation:
    """Like :func:`find_installation`, but EngineNotInstalled names the install command."""
    found = find_installation(ref, cache_dir=cache_dir, registry=registry)
    if found is not None:
        return found
    engine, version = resolve(ref, registry)
    command = install_command(engine, version)
    raise EngineNotInstalled(
        f"{engine.name}=={version} is not installed; run: {' '.join(command)}",
        install_command=command,
    )


def _external(engine: Engine, version: str) -> Installation | None:
    binary = engine.find_binary()
    if binary is None:
        return None
    probe = Installation(name=engine.name, version=version or "unknown", executable=binary)
    try:
        actual = engine.parse_version(capture(engine.version_argv(probe)))
    except ValueError:
        actual = "unknown"
    if version and not _same_version(version, actual):
        return None
    return probe.model_copy(update={"version": actual})


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def installed_versions(engine: Engine, cache_dir: Path | None = None) -> list[str]:
    """Versions of ``engine`` with a finished environment in the cache."""
    pattern = engine.install_root("*", default_cache_dir(cache_dir))
    versions = []
    for root in sorted(glob(str(pattern))):
        marker = read_marker(Path(root))
        if marker is not None and marker.name == engine.name:
            versions.append(marker.version)
    return versions


@contextmanager
def _locked(cache: Path, key: str) -> Iterator[None]:
    locks = cache / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / f"{key}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def install(
    ref: EngineRef | str,
    *,
    cache_dir: Path | None = None,
    registry: EngineRegistry | None = None,
    force: bool = False,
    on_step: OnStep | None = None,
) -> Installation:
    """Create (or reuse) the environment for an engine version; returns the installation."""
    engine, version = resolve(ref, registry)
    platform = current_platform()
    recipe = engine.install_recipe(version, platform)
    if recipe.kind in ("none", "external"):
        found = find_installation(
            EngineRef(name=engine.name, version=version or None),
            cache_dir=cache_dir,
            registry=registry,
        )
        if found is None:
            raise EngineInstallFailed(f"{engine.name} is not managed by batchprobe: {recipe.note}")
        return found
    if not version:
        raise ConfigError("engine", f"{engine.name} needs a version: {engine.name}==VERSION")
    cache = default_cache_dir(cache_dir)
    root = engine.install_root(version, cache)
    with _locked(cache, f"{engine.name}-{version}"):
        if read_marker(root) is not None and not force:
            return engine.installation(version, root)
        return _build(engine, version, root, cache, on_step or _quiet)


def _build(engine: Engine, version: str, root: Path, cache: Path, on_step: OnStep) -> Installation:
    platform = current_platform()
    recipe = engine.install_recipe(version, platform)
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"install-{engine.name}-{version}.log"
    log.write_text("")
    # Whatever is here lacks a marker (or is being forced): a half-finished install.
    shutil.rmtree(root, ignore_errors=True)
    started = time.monotonic()
    if recipe.kind == "llama-server":
        build_llama_server(str(engine.package), version, root, platform, log, on_step)
    else:
        _build_venv(root, recipe.steps, log, on_step)
    inst = engine.installation(version, root)
    _check_version(engine, inst, version, log)
    marker = InstallMarker(
        name=engine.name,
        version=version,
        platform=platform,
        seconds=round(time.monotonic() - started, 1),
        steps=[list(s) for s in recipe.steps],
    )
    write_atomic(root / MARKER, marker.model_dump_json(indent=2))
    return inst


def _build_venv(root: Path, steps: tuple[tuple[str, ...], ...], log: Path, on_step: OnStep) -> None:
    on_step(f"creating virtual environment {root}")
    run_step([sys.executable, "-m", "venv", str(root)], log)
    python = str(root / "bin" / "python")
    for step in steps:
        argv = [python if arg == "{python}" else arg for arg in step]
        on_step(" ".join(argv[1:]) if argv[0] == python else " ".join(argv))
        run_step(argv, log)


def _check_version(engine: Engine, inst: Installation, version: str, log: Path) -> None:
    if engine.package is None or inst.python is None:
        return
    out = capture(engine.version_argv(inst))
    try:
        actual = engine.parse_version(out)
    except ValueError as exc:
        raise EngineInstallFailed(f"cannot read {engine.name}'s version: {exc}") from exc
    if not _same_version(actual, version):
        raise EngineInstallFailed(f"asked for {engine.name}=={version}, got {actual}; see {log}")

