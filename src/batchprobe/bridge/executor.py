"""The runner side: validate a manifest, run its preset's commands, always write a summary.

Each command runs from an argv list (never a shell) in its own process group with its
output in its own log file, under what is left of the preset's time budget. On a timeout,
an interrupt, or simply when the command exits, the whole group is sent SIGTERM and then
SIGKILL, so nothing a command started (an engine server, say) outlives it.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType

from pydantic import BaseModel, ConfigDict

from batchprobe.bridge.manifest import (
    Manifest,
    build_commands,
    check_paths,
    effective_params,
    load_manifest,
)
from batchprobe.bridge.presets import ExecContext, get_preset
from batchprobe.bridge.summary import CommandResult, Status, Summary, write_summary
from batchprobe.errors import BridgeError, ManifestError, ProbeInterrupted
from batchprobe.processes import stop_group

__all__ = ["ExecutorSettings", "execute"]

LOG_DIR = "logs"


class ExecutorSettings(BaseModel):
    """How to run: interpreter, environment, working directory and the kill grace."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    python: str
    """Interpreter for the ``batchprobe`` and ``python`` programs of the templates."""
    env: dict[str, str]
    """The runner's environment: resolves ``${ENV:NAME}`` and is passed to the commands."""
    cwd: Path
    """The checkout the commands run in (path parameters are relative to it)."""
    grace_s: float = 10.0
    """Between SIGTERM and SIGKILL of a command's process group."""
    max_seconds: float | None = None
    """A runner-wide cap on any preset's time budget (the lower of the two applies)."""

    def budget_s(self, preset_timeout_s: int) -> float:
        if self.max_seconds is None:
            return float(preset_timeout_s)
        return min(float(preset_timeout_s), self.max_seconds)


def _now() -> datetime:
    return datetime.now(timezone.utc)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Turn SIGTERM (a cancelled workflow) into ProbeInterrupted so cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: FrameType | None) -> None:
        raise ProbeInterrupted(f"received signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_command(
    index: int, argv: list[str], shown_argv: list[str], budget_s: float, results_dir: Path,
    settings: ExecutorSettings,
) -> CommandResult:  # fmt: skip
    log_rel = f"{LOG_DIR}/{index:02d}.log"
    log_path = results_dir / log_rel
    log_path.parent.mkdir(parents=True, exist_ok=True)
    result = CommandResult(index=index, argv=shown_argv, log=log_rel)
    started = time.monotonic()
    with log_path.open("wb") as log:
        # shlex.join only renders the command for a human; nothing parses it.
        log.write(f"$ {shlex.join(shown_argv)}\n".encode())
        log.flush()
        try:
            process = subprocess.Popen(
                argv, cwd=settings.cwd, env=settings.env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            log.write(f"could not start: {exc}\n".encode())
            result.duration_s = time.monotonic() - started
            return result
        try:
            result.exit_code = process.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            log.write(f"\n[batchprobe bridge] timed out after {budget_s:.0f} s\n".encode())
        finally:
            stop_group(process, grace=settings.grace_s)
    result.duration_s = round(time.monotonic() - started, 3)
    return result


def _run_all(
    manifest: Manifest, commands: list[list[str]], results_dir: Path, settings: ExecutorSettings
) -> tuple[Status, list[CommandResult], str | None]:
    """Run the commands in order; the first failure, timeout or interrupt skips the rest."""
    preset = get_preset(manifest.preset)
    shown = build_commands(manifest)
    budget_s = settings.budget_s(preset.timeout_s)
    deadline = time.monotonic() + budget_s
    results: list[CommandResult] = []
    status: Status = "ok"
    error: str | None = None
    for index, argv in enumerate(commands):
        remaining = deadline - time.monotonic()
        if status == "ok" and remaining <= 0:
            status, error = "timed_out", f"time budget of {budget_s:g} s spent"
        if status != "ok":
            results.append(CommandResult(index=index, argv=shown[index], skipped=True))
            continue
        try:
            result = _run_command(index, argv, shown[index], remaining, results_dir, settings)
        except (ProbeInterrupted, KeyboardInterrupt) as exc:
            result = CommandResult(index=index, argv=shown[index], log=f"{LOG_DIR}/{index:02d}.log")
            status, error = "interrupted", f"command {index} interrupted ({exc or 'SIGINT'})"
        else:
            if result.timed_out:
                status = "timed_out"
                error = f"command {index} timed out (time budget {budget_s:g} s)"
            elif result.exit_code is None:
                status, error = "failed", f"command {index} could not start; see {result.log}"
            elif result.exit_code != 0:
                status = "failed"
                error = f"command {index} exited {result.exit_code}; see {result.log}"
        results.append(result)
    return status, results, error


def _validate(
    manifest_path: Path, results_dir: Path, settings: ExecutorSettings
) -> tuple[Manifest, list[list[str]]]:
    manifest = load_manifest(manifest_path)
    check_paths(manifest, settings.cwd)
    context = ExecContext(
        python=settings.python, env=dict(settings.env), results_dir=str(results_dir.resolve())
    )
    return manifest, build_commands(manifest, context)


def execute(manifest_path: Path, results_dir: Path, settings: ExecutorSettings) -> Summary:
    """Validate and run one request; ``summary.json`` in ``results_dir`` is always written."""
    started = _now()
    results_dir.mkdir(parents=True, exist_ok=True)
    try:
        manifest, commands = _validate(manifest_path, results_dir, settings)
    except BridgeError as exc:
        summary = Summary(
            status="rejected", error=str(exc), started_at=started, finished_at=_now(),
            error_field=exc.field if isinstance(exc, ManifestError) else None,
        )  # fmt: skip
        write_summary(results_dir, summary)
        return summary
    preset = get_preset(manifest.preset)
    with _sigterm_interrupts():
        status, results, error = _run_all(manifest, commands, results_dir, settings)
    summary = Summary(
        status=status, preset=manifest.preset, params=effective_params(manifest),
        nonce=manifest.nonce, ref=manifest.ref, error=error, timeout_s=preset.timeout_s,
        commands=results, started_at=started, finished_at=_now(),
        result_paths=[name for name in preset.outputs if (results_dir / name).is_file()],
    )  # fmt: skip
    write_summary(results_dir, summary)
    return summary
