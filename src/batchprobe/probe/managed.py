"""Arms served by an engine batchprobe launches itself: a fresh server per arm."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from batchprobe.engines import (
    EngineRef,
    RunningEngine,
    diagnose,
    diagnose_findings,
    find_installation,
    get_engine,
    install,
    launch,
)
from batchprobe.errors import BatchprobeError, ConfigError, EngineError
from batchprobe.models import resolve_model
from batchprobe.patches import shim_dir, shim_env
from batchprobe.probe.endpoint import Endpoint, EngineProcess
from batchprobe.results.diagnosis import Diagnosis
from batchprobe.results.models import ArmSpec


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


class EngineProvider:
    """Launches ``ref`` serving ``model`` in each arm's mode; restarts between arms.

    A restart per arm keeps every prefix cache cold, so no arm is flattered (or has a
    batched-prefill bug hidden) by the KV cache of the one before.
    """

    def __init__(
        self,
        ref: EngineRef,
        model: str,
        *,
        log_dir: Path,
        cache_dir: Path | None = None,
        ready_timeout: float,
        patches: Sequence[str] = (),
        engine_args: Sequence[str] = (),
        serve_cmd: Sequence[str] | None = None,
        auto_install: bool = False,
        on_install_step: Callable[[str], None] | None = None,
    ) -> None:
        self.ref = ref
        self.model = model
        self.log_dir = log_dir
        self.cache_dir = cache_dir
        self.ready_timeout = ready_timeout
        self.patches = list(patches)
        self.engine_args = list(engine_args)
        self.serve_cmd = serve_cmd
        self.auto_install = auto_install
        self.on_install_step = on_install_step
        self.logs: list[Path] = []

    def _log_path(self, spec: ArmSpec) -> Path:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", spec.name) + ".log")
        self.logs.append(path)
        return path

    def _installing(self, text: str) -> None:
        if self.on_install_step is not None:
            self.on_install_step(f"installing {self.ref}: {text}")

    @contextmanager
    def _provide(self, spec: ArmSpec) -> Iterator[Endpoint]:
        if self.auto_install and find_installation(self.ref, cache_dir=self.cache_dir) is None:
            # Inside the run, so a failed build still leaves a verdict file (engine_install_failed).
            install(self.ref, cache_dir=self.cache_dir, on_step=self._installing)
        if self.on_install_step is not None:
            self.on_install_step(f"launching {self.ref} for {spec.name} (N={spec.concurrency})")
        with launch(
            self.ref,
            self.model,
            spec.mode or "batching",
            spec.concurrency,
            log_path=self._log_path(spec),
            cache_dir=self.cache_dir,
            ready_timeout=self.ready_timeout,
            extra_env=shim_env(self.patches) if self.patches else None,
            pythonpath_prepend=[shim_dir()] if self.patches else None,
            serve_cmd=self.serve_cmd,
            prefix_cache=spec.prefix_cache,
            extra_args=self.engine_args,
            kv_tokens=spec.kv_tokens,
        ) as engine:
            yield self._endpoint(engine)

    def _endpoint(self, engine: RunningEngine) -> Endpoint:
        def explain_errors(bodies: list[str]) -> list[Diagnosis]:
            return diagnose(engine.name, engine.version, _read(engine.log_path), bodies)

        return Endpoint(
            base_url=engine.base_url,
            model=engine.model_id,
            engine_version=f"{engine.name} {engine.version}",
            cache_control="restart",
            log_path=str(engine.log_path),
            is_alive=engine.is_alive,
            diagnose=explain_errors,
            request_ids=engine.capabilities.request_id_header,
            process=EngineProcess(
                pid=engine.pid,
                pgid=engine.pgid,
                launch_token=engine.launch_token,
                exit_code=engine.exit_code,
                log_tail=engine.log_tail,
                argv=tuple(engine.argv),
            ),
        )

    def __call__(self, spec: ArmSpec) -> AbstractContextManager[Endpoint]:
        return self._provide(spec)

    def kv_pool(self, tokens: int) -> bool:
        """Whether the engine can be launched with one KV pool of ``tokens``."""
        if self.serve_cmd is not None:
            return False
        return get_engine(self.ref.name).kv_pool_args(tokens) is not None

    def explain(self, exc: BatchprobeError) -> list[Diagnosis]:
        """Diagnose an engine that failed to start or died, from its latest log."""
        if not isinstance(exc, EngineError) or not self.logs:
            return []
        return diagnose(self.ref.name, self.ref.version, _read(self.logs[-1]))

    def explain_findings(self, findings: list[str]) -> list[Diagnosis]:
        """The known issues the findings show, with every launch's log for those that need
        a line of it too (read only when there is a finding to explain)."""
        if not findings:
            return []
        log = "\n".join(_read(path) for path in self.logs)
        return diagnose_findings(self.ref.name, self.ref.version, findings, log)


DEFAULT_ENGINE = "llama.cpp"


def engine_target(
    engine: str | None, model: str | None, cache_dir: Path | None
) -> tuple[EngineRef, str]:
    """The engine and the model path to launch; the default run is llama.cpp + gemma3-270m.

    Without ``model`` an engine's own default model is used (gemma3-270m, as a GGUF or as its
    unpacked checkpoint, where the engine runs it fast enough for the default plan).
    """
    ref = EngineRef.parse(DEFAULT_ENGINE if engine is None else engine)
    spec = get_engine(ref.name)
    if model is None:
        if spec.default_model is None:
            raise ConfigError("--model", f"required with --engine {ref.name} (a path or alias)")
        model = spec.default_model
    return ref, str(resolve_model(model, cache_dir, model_format=spec.model_format))
