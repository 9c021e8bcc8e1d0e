"""Issue 5 against a real engine: `batchprobe run --base-url` on an mlx_lm.server we start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchprobe.engines import Installation

from ._run import batchprobe_run

pytestmark = pytest.mark.engine
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def mlx_lm_server(
    mlx_lm_env: Installation, tiny_gemma3_dir: Path, tmp_path: Path
) -> Iterator[str]:
    port = _free_port()
    log = (tmp_path / "mlx_lm.log").open("wb")
    proc = subprocess.Popen(
        [str(mlx_lm_env.python), "-m", "mlx_lm.server", "--model", str(tiny_gemma3_dir),
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "mlx_lm.log").read_text()
            try:
                with _OPENER.open(url + "/health", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_base_url_probe_of_real_mlx_lm_server(
    mlx_lm_server: str, tiny_gemma3_dir: Path, tmp_path: Path
) -> None:
    code, verdict, out = batchprobe_run(
        ["--base-url", mlx_lm_server, "--model", str(tiny_gemma3_dir), "--sessions", "4",
         "--haystack-tokens", "128", "--max-tokens", "32"],
        tmp_path / "verdict.json",
    )
    assert verdict["status"] == "ok", out
    assert [a["spec"]["name"] for a in verdict["arms"]] == ["serial", "concurrent"]
    for arm in verdict["arms"]:
        m = arm["metrics"]
        assert m["errors_by_kind"] == {} and m["ok_sessions"] == 8, arm["spec"]["name"]
        assert m["decode_tokens_per_s"] > 0 and m["ttft_s"]["p50"] > 0
    comparison = verdict["comparisons"][0]
    assert comparison["greedy_compared"] == 8
    assert comparison["greedy_match_rate"] is not None
    assert comparison["decode_speedup"] is not None
    # No per-request cache switch and no restart: the verdict must say so.
    assert any("prefix cache not controlled" in w for w in verdict["warnings"])
    assert code in (0, 1, 2)
