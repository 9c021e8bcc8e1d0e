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


def run_step(
    argv: Sequence[str], log: Path, *, cwd: Path | None = None, on_line: OnStep | None = None
) -> None:
    """Run one step, appending its output to ``log`` (and handing each line to ``on_line``, as
    it comes); EngineInstallFailed if it fails."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            with subprocess.Popen(
                list(argv),
                stdout=out if on_line is None else subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                env=env,
            ) as proc:
                for line in proc.stdout if proc.stdout is not None else ():
                    out.write(line)
                    if on_line is not None:
                        on_line(line.decode("utf-8", "replace").rstrip())
                code = proc.wait()
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
