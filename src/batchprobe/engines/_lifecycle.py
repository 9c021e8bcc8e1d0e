"""Launch a managed engine for one configuration and always stop it again."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from batchprobe.engines._base import Engine
from batchprobe.engines._envs import require_installation, resolve
from batchprobe.engines._launches import forget_launch, reap_stale, record_launch
from batchprobe.engines._process import Launch, reserve_port, start_launch
from batchprobe.engines._ready import Readiness
from batchprobe.engines._ref import EngineRef
from batchprobe.engines._registry import EngineRegistry
from batchprobe.engines._steps import tail
from batchprobe.engines._types import (
    LOOPBACK,
    Capabilities,
    Installation,
    LaunchSpec,
    Mode,
    check_mode,
)
from batchprobe.engines.serve_cmd import ServeCmd
from batchprobe.errors import ConfigError
from batchprobe.paths import cache_dir as default_cache_dir
from batchprobe.processes import TERM_GRACE_S

DEFAULT_READY_TIMEOUT_S = 300.0
MAX_CONCURRENCY = 4096


@dataclass(frozen=True, eq=False)
class RunningEngine:
    """A launched, ready engine. Valid only inside the ``launch`` block."""

    name: str
    version: str
    mode: Mode
    concurrency: int
    base_url: str
    model_id: str
    argv: list[str]
    log_path: Path
    capabilities: Capabilities
    process: subprocess.Popen[bytes]
    launch_token: str
    """Marks every process of this launch (``BATCHPROBE_LAUNCH``), setsid'd ones included."""

    @property
    def pid(self) -> int:
        """The server's pid, which is also its process-group id."""
        return self.process.pid

    @property
    def pgid(self) -> int:
        return self.process.pid

    def is_alive(self) -> bool:
        """True while the server process has not exited."""
        return self.process.poll() is None

    def exit_code(self, wait: float = 0.0) -> int | None:
        """The server's exit status once it has exited (negative: killed by that signal),
        waiting up to ``wait`` seconds for it; None while it runs."""
        try:
            return self.process.wait(timeout=wait) if wait > 0 else self.process.poll()
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the server log."""
        return tail(self.log_path, lines)


def _environment(
    engine: Engine,
    inst: Installation,
    spec: LaunchSpec,
    extra_env: Mapping[str, str] | None,
    pythonpath_prepend: Sequence[Path] | None,
) -> dict[str, str]:
    env = dict(os.environ)
    # The probe's own interpreter settings must not leak into the engine's venv.
    for name in ("PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
        env.pop(name, None)
    if inst.root is not None and inst.python is not None:
        env["VIRTUAL_ENV"] = str(inst.root)
        env["PATH"] = os.pathsep.join([str(inst.root / "bin"), env.get("PATH", "")])
    # Unbuffered output keeps the log (and its tail in errors) current.
    env["PYTHONUNBUFFERED"] = "1"
    env.update(engine.launch_env(inst, spec))
    env.update(extra_env or {})
    if pythonpath_prepend:
        parts = [str(p) for p in pythonpath_prepend]
        if env.get("PYTHONPATH"):
            parts.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def _pick_engine(
    ref: EngineRef | str, registry: EngineRegistry | None, serve_cmd: Sequence[str] | None
) -> tuple[Engine, str]:
    engine, version = resolve(ref, registry)
    if serve_cmd is not None:
        if engine.name != "serve-cmd":
            raise ConfigError("serve_cmd", f"only for engine serve-cmd, not {engine.name!r}")
        return ServeCmd(serve_cmd), version
    return engine, version


def _scratch(cache_dir: Path | None) -> tuple[Path, Path]:
    """The cache (stale launches of dead owners reaped) and its scratch folder."""
    cache = default_cache_dir(cache_dir)
    reap_stale(cache)
    scratch = cache / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    return cache, scratch


@contextmanager
def launch(
    ref: EngineRef | str,
    model: str | Path,
    mode: str,
    concurrency: int,
    *,
    log_path: Path,
    cache_dir: Path | None = None,
    ready_timeout: float = DEFAULT_READY_TIMEOUT_S,
    extra_env: Mapping[str, str] | None = None,
    pythonpath_prepend: Sequence[Path] | None = None,
    registry: EngineRegistry | None = None,
    serve_cmd: Sequence[str] | None = None,
    stop_grace: float = TERM_GRACE_S,
    prefix_cache: bool = False,
    extra_args: Sequence[str] = (),
    kv_tokens: int | None = None,
) -> Iterator[RunningEngine]:
    """Start the engine for one configuration, wait until it is ready, stop it on exit.

    Raises EngineNotInstalled (with the install command), EngineExitedEarly or
    EngineFailedToStart (with the log tail and the argv to reproduce). However the block
    ends, the whole launch is stopped: its process group and every process marked with its
    launch token, SIGTERM then SIGKILL after ``stop_grace`` s; a watchdog (and
    ``PR_SET_PDEATHSIG``) does the same if this process dies first. The launch is recorded
    under the cache (``launches/``) for ``engines doctor``, and gets an empty ``state_dir``
    under ``scratch/``, removed when it stops. ``prefix_cache`` keeps the engine's default
    prefix cache; ``extra_args``, ``extra_env`` and ``pythonpath_prepend`` reach the engine;
    ``kv_tokens`` launches it with one KV pool of that many tokens (a ConfigError for an
    engine without the option).
    """
    engine, version = _pick_engine(ref, registry, serve_cmd)
    checked_mode = check_mode(mode)
    if kv_tokens is not None and engine.kv_pool_args(kv_tokens) is None:
        raise ConfigError("kv_tokens", f"{engine.name} has no launch option that sizes its KV pool")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ConfigError(
            "concurrency", f"{concurrency} is out of range; allowed: 1..{MAX_CONCURRENCY}"
        )
    inst = require_installation(
        EngineRef(name=engine.name, version=version or None), cache_dir=cache_dir, registry=registry
    )
    cache, scratch = _scratch(cache_dir)
    with tempfile.TemporaryDirectory(prefix="launch-", dir=scratch,
                                     ignore_cleanup_errors=True) as state_dir:
        spec = LaunchSpec(
            model=str(model),
            mode=checked_mode,
            concurrency=concurrency,
            port=reserve_port(LOOPBACK),
            prefix_cache=prefix_cache,
            kv_tokens=kv_tokens,
            state_dir=Path(state_dir),
        )
        argv = [*engine.launch_argv(inst, spec), *extra_args]
        env = _environment(engine, inst, spec, extra_env, pythonpath_prepend)
        started = start_launch(argv, log_path, env, grace=stop_grace)
        try:
            record_launch(cache, token=started.token, engine=f"{engine.name} {inst.version}",
                          pid=started.proc.pid, argv=argv, log_path=log_path)  # fmt: skip
            yield _ready(engine, inst.version, spec, argv, log_path, ready_timeout, started)
        finally:
            try:
                started.stop(grace=stop_grace)
            finally:
                forget_launch(cache, started.token)


def _ready(
    engine: Engine, version: str, spec: LaunchSpec, argv: list[str], log_path: Path,
    ready_timeout: float, started: Launch,
) -> RunningEngine:
    """Wait for a started engine to answer, and describe it."""
    proc = started.proc
    base_url = f"http://{LOOPBACK}:{spec.port}"
    ready = Readiness(proc, argv, log_path, ready_timeout, engine.fatal_startup_patterns)
    ready.wait_for(base_url + engine.readiness_path)
    return RunningEngine(
        name=engine.name,
        version=version,
        mode=spec.mode,
        concurrency=spec.concurrency,
        base_url=base_url,
        model_id=engine.served_model_id(spec, ready.listed_models(base_url)),
        argv=argv,
        log_path=log_path,
        capabilities=engine.capabilities,
        process=proc,
        launch_token=started.token,
    )
