"""Issue 5 against a real engine: `batchprobe run --base-url` on an mlx_lm.server we start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from batchprobe.engines import Installation, launch

from ._run import batchprobe_run, expected_exit

pytestmark = pytest.mark.engine


@pytest.fixture
def mlx_lm_server(
    mlx_lm_env: Installation, tiny_gemma3_dir: Path, tmp_path: Path
) -> Iterator[str]:
    """mlx_lm.server on 127.0.0.1, started and stopped by batchprobe's engine lifecycle."""
    log = tmp_path / "mlx_lm.log"
    with launch("mlx-lm", tiny_gemma3_dir, "batching", 8, log_path=log) as engine:
        yield engine.base_url


def test_base_url_probe_of_real_mlx_lm_server(
    mlx_lm_server: str, tiny_gemma3_dir: Path, tmp_path: Path
) -> None:
    code, verdict, out = batchprobe_run(
        ["--quick", "--base-url", mlx_lm_server, "--model", str(tiny_gemma3_dir), "--sessions", "4",
         "--haystack-tokens", "128", "--max-tokens", "32", "--shapes", "burst"],
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
    assert code == expected_exit(verdict), out
