"""Readiness: poll the engine's endpoint, failing fast if the process exits."""

from __future__ import annotations

import http.client
import re
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from batchprobe.engines._steps import tail
from batchprobe.errors import EngineExitedEarly, EngineFailedToStart

POLL_S = 0.25
LOG_SCAN_S = 1.0
# Loopback only: never route a readiness probe through an HTTP proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class _ModelEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str


class _ModelsReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    data: list[_ModelEntry]


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """(status, body) of a GET; status 0 when nothing answered."""
    try:
        with _OPENER.open(url, timeout=timeout) as reply:
            return int(reply.status), reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (OSError, http.client.HTTPException):
        return 0, b""


class Readiness:
    """One launch's readiness wait: the process, where to poll, and how to explain failure."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        argv: list[str],
        log_path: Path,
        timeout: float,
        fatal_patterns: tuple[str, ...] = (),
    ) -> None:
        self.proc = proc
        self.argv = argv
        self.log_path = log_path
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.fatal = [re.compile(p) for p in fatal_patterns]
        self.next_scan = time.monotonic() + LOG_SCAN_S

    def _check_log(self) -> None:
        if not self.fatal or time.monotonic() < self.next_scan:
            return
        self.next_scan = time.monotonic() + LOG_SCAN_S
        log_tail = tail(self.log_path, 200)
        for line in log_tail.splitlines():
            if any(r.search(line) for r in self.fatal):
                raise EngineFailedToStart(
                    f"engine reported a fatal start-up error: {line.strip()[:300]}; "
                    f"log: {self.log_path}; reproduce with: {shlex.join(self.argv)}",
                    log_tail=tail(self.log_path),
                    reproduce=self.argv,
                )

    def wait_for(self, url: str) -> bytes:
        """Poll ``url`` until it answers 200; the body of that answer."""
        while True:
            code = self.proc.poll()
            if code is not None:
                raise EngineExitedEarly(
                    f"engine exited with code {code} before it was ready; log: {self.log_path}",
                    log_tail=tail(self.log_path),
                    reproduce=self.argv,
                )
            status, body = http_get(url)
            if status == 200:
                return body
            self._check_log()
            if time.monotonic() >= self.deadline:
                raise EngineFailedToStart(
                    f"engine not ready after {self.timeout:.0f}s ({url}); "
                    f"log: {self.log_path}; reproduce with: {shlex.join(self.argv)}",
                    log_tail=tail(self.log_path),
                    reproduce=self.argv,
                )
            time.sleep(POLL_S)

    def listed_models(self, base_url: str) -> list[str]:
        """The model ids /v1/models lists once ready ([] if the reply is not the usual shape)."""
        body = self.wait_for(f"{base_url}/v1/models")
        try:
            return [entry.id for entry in _ModelsReply.model_validate_json(body).data]
        except ValidationError:
            return []
