"""An engine launch: its process group, its launch token, its watchdog; stopped as one.

The engine must never outlive batchprobe, however batchprobe ends:

* a normal stop (or an exception, or Ctrl-C) stops the group and every process marked
  with the launch token (``BATCHPROBE_LAUNCH``, inherited across ``setsid``): SIGTERM,
  wait, SIGKILL;
* SIGKILL of batchprobe (OOM killer, CI cancel): on Linux the leader gets SIGKILL from the
  kernel (``PR_SET_PDEATHSIG``), and on every platform the watchdog, which holds a pipe
  from batchprobe, sees end of file and stops the group and the marked processes.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from batchprobe.engines._types import LOOPBACK
from batchprobe.errors import EngineFailedToStart
from batchprobe.processes import KILL_GRACE_S, LAUNCH_ENV, TERM_GRACE_S, stop_launch

_PR_SET_PDEATHSIG = 1


def reserve_port(host: str = LOOPBACK) -> int:
    """A port that was free on ``host`` a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def new_launch_token() -> str:
    """A token unique to one launch, marking every process of it."""
    return f"{os.getpid()}-{secrets.token_hex(6)}"


def _death_signal() -> Callable[[], None] | None:
    """A pre-exec hook that has the kernel SIGKILL the child when its parent dies (Linux).

    The parent is the *thread* that forks: ``launch`` holds that thread for the engine's
    whole life (the ``with`` block), so this fires only when batchprobe itself is gone.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: nothing is loaded after fork
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def _start_failure(argv: Sequence[str], exc: OSError) -> EngineFailedToStart:
    reason = exc.strerror or str(exc)
    return EngineFailedToStart(
        f"cannot start {argv[0]!r}: {reason}; argv: {shlex.join(argv)}", reproduce=list(argv)
    )


class Launch:
    """One engine process group plus its watchdog. ``stop()`` ends both, idempotently."""

    def __init__(self, proc: subprocess.Popen[bytes], token: str, watchdog: _Watchdog) -> None:
        self.proc = proc
        self.token = token
        self._watchdog = watchdog

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def pgid(self) -> int:
        return self.proc.pid  # start_new_session makes the leader's pid the group id

    def stop(self, grace: float = TERM_GRACE_S) -> None:
        try:
            stop_launch(self.pgid, self.token, proc=self.proc, grace=grace)
        finally:
            self._watchdog.close()


class _Watchdog:
    def __init__(self, token: str, grace: float, log_path: Path) -> None:
        # Its own stop may take the whole grace and kill grace: never cut it short.
        self._wait_s = grace + KILL_GRACE_S + 5.0
        read_end, self._write = os.pipe()  # both non-inheritable: the engine never holds them
        argv = [sys.executable, "-m", "batchprobe._watchdog", token, repr(grace)]
        try:
            with log_path.open("ab") as log:
                self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                    argv, stdin=read_end, stdout=subprocess.DEVNULL, stderr=log,
                    start_new_session=True,  # no terminal signal reaches it
                )  # fmt: skip
        except OSError:
            os.close(self._write)
            raise
        finally:
            os.close(read_end)

    def tell_group(self, pgid: int) -> None:
        try:
            os.write(self._write, f"pgid {pgid}\n".encode())
        except BrokenPipeError:
            pass  # the watchdog is gone; the token and PR_SET_PDEATHSIG still cover the engine

    def close(self) -> None:
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
        try:
            self.proc.wait(timeout=self._wait_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_launch(
    argv: Sequence[str],
    log_path: Path,
    env: Mapping[str, str],
    *,
    grace: float = TERM_GRACE_S,
    cwd: Path | None = None,
) -> Launch:
    """Start ``argv`` as the leader of a new session, output to ``log_path``, watched.

    The watchdog starts first, so no moment exists where the engine runs unwatched.
    A program that cannot be started raises EngineFailedToStart naming the argv.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    token = new_launch_token()
    with log_path.open("wb") as log:
        log.write(f"# argv: {list(argv)}\n# launch: {token}\n".encode())
    watchdog = _Watchdog(token, grace, log_path)
    try:
        with log_path.open("ab") as log:
            # The child holds its own copy of the descriptor; ours can close at once.
            proc = subprocess.Popen(
                list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**env, LAUNCH_ENV: token}, cwd=cwd, start_new_session=True,
                preexec_fn=_death_signal(),  # noqa: PLW1509 - the hook only calls prctl
            )  # fmt: skip
    except OSError as exc:
        watchdog.close()
        raise _start_failure(argv, exc) from exc
    except BaseException:
        watchdog.close()
        raise
    watchdog.tell_group(proc.pid)
    return Launch(proc, token, watchdog)
