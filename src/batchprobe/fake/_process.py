"""The fake server as a separate process: for benchmarks and for tests that signal processes."""

from __future__ import annotations

import select
import subprocess
import sys
import threading
from types import TracebackType

from typing_extensions import Self

from batchprobe.errors import EngineFailedToStart
from batchprobe.processes import stop_group

_LISTENING = "listening on "
_STOP_WAIT_S = 5.0


class FakeServerProcess:
    """``batchprobe fake-server ARGS`` on a free loopback port, in its own process group.

    ``base_url`` is read from the server's first stdout line. Leaving the block stops the
    whole group: SIGTERM, then SIGKILL.
    """

    def __init__(self, *args: str, start_timeout: float = 30.0) -> None:
        self.argv = [
            sys.executable, "-m", "batchprobe", "fake-server",
            "--host", "127.0.0.1", "--port", "0", *args,
        ]  # fmt: skip
        self.start_timeout = start_timeout
        self.base_url = ""
        self._proc: subprocess.Popen[str] | None = None
        self._drain: threading.Thread | None = None

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("the fake server process is not running")
        return self._proc.pid

    def __enter__(self) -> Self:
        proc = self._proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        if proc.stdout is None:
            raise RuntimeError("stdout=PIPE gave no pipe")
        ready, _, _ = select.select([proc.stdout], [], [], self.start_timeout)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith(_LISTENING):
            self.stop()
            raise EngineFailedToStart(
                f"the fake server did not start: {line!r}", reproduce=self.argv
            )
        self.base_url = line[len(_LISTENING) :].strip()
        # Keep reading its stdout so a chatty server never blocks on a full pipe.
        self._drain = threading.Thread(target=proc.stdout.read, daemon=True)
        self._drain.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        # The whole group, even when the leader has exited: nothing it started survives.
        stop_group(proc, grace=_STOP_WAIT_S)
        if self._drain is not None:
            self._drain.join(timeout=_STOP_WAIT_S)
        if proc.stdout is not None:
            proc.stdout.close()
