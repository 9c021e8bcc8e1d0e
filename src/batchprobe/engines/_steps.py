"""Running install steps: argv only, output to a log file, failures with the log tail."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from batchprobe.errors import EngineInstallFailed

OnStep = Callable[[str], None]


def tail(path: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of a text file ('' when it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 256 * 1024))
            data = handle.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def run_step(argv: Sequence[str], log: Path, *, cwd: Path | None = None) -> None:
    """Run one step, appending its output to ``log``; EngineInstallFailed if it fails."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            code = subprocess.call(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                env=env,
            )
        except OSError as exc:
            raise EngineInstallFailed(f"cannot run {argv[0]}: {exc}", log_tail=tail(log)) from exc
    if code != 0:
        raise EngineInstallFailed(
            f"step failed (exit {code}): {' '.join(argv)}; full log: {log}", log_tail=tail(log)
        )


def capture(argv: Sequence[str], timeout: float = 60.0) -> str:
    """stdout+stderr of a short command (version queries); '' if it cannot run."""
    try:
        done = subprocess.run(
            list(argv),
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr
