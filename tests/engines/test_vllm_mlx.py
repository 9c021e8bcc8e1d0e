"""vllm-mlx on the tiny gemma-4: the seed bug, its diagnosis, and the fixed version."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from batchprobe.engines import Installation, RunningEngine, diagnose, launch
from batchprobe.paths import CACHE_ENV, cache_dir

from .helpers import post_json

pytestmark = pytest.mark.engine
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _concurrent(
    eng: RunningEngine, n: int, max_tokens: int = 8, preamble: str = ""
) -> list[dict[str, Any]]:
    def one(i: int) -> dict[str, Any]:
        return post_json(
            eng.base_url + "/v1/completions",
            {
                "model": eng.model_id,
                "prompt": f"{preamble}the code for vault {i} is",
                "max_tokens": max_tokens,
                "temperature": 0,
            },
        )

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_0_3_0_batching_errors_and_is_diagnosed(
    vllm_mlx_030: Installation, tiny_gemma4_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "vllm-mlx.log"
    with launch("vllm-mlx==0.3.0", tiny_gemma4_dir, "batching", 2, log_path=log) as eng:
        replies = _concurrent(eng, 2)
        assert eng.is_alive()
    assert [r["choices"][0]["finish_reason"] for r in replies] == ["error", "error"]
    assert all(r["choices"][0]["text"] == "" for r in replies)
    found = diagnose("vllm-mlx", "0.3.0", log.read_text(), [])
    assert found[0].issue_id == "vllm-mlx-gemma4-shared-kv" and found[0].fixed_in == "0.4.0"


def test_0_6_0_batching_answers(
    vllm_mlx_060: Installation, tiny_gemma4_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "vllm-mlx.log"
    with launch("vllm-mlx==0.6.0", tiny_gemma4_dir, "batching", 2, log_path=log) as eng:
        replies = _concurrent(eng, 2)
    assert all(r["choices"][0]["finish_reason"] in ("length", "stop") for r in replies)
    assert all(r["choices"][0]["text"] for r in replies)
    assert diagnose("vllm-mlx", "0.6.0", log.read_text(), []) == []


def test_0_6_0_simple_engine_refuses_overlap_by_design(
    vllm_mlx_060: Installation, tiny_gemma4_dir: Path, tmp_path: Path
) -> None:
    bodies: list[str] = []

    def one(eng: RunningEngine, i: int) -> None:
        body = {"model": eng.model_id, "prompt": f"code {i}", "max_tokens": 200, "temperature": 0}
        request = urllib.request.Request(
            eng.base_url + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            _OPENER.open(request, timeout=120).read()
        except urllib.error.HTTPError as exc:
            bodies.append(f"HTTP {exc.code}: {exc.read().decode()}")

    with (
        launch("vllm-mlx==0.6.0", tiny_gemma4_dir, "simple", 1, log_path=tmp_path / "l.log") as eng,
        ThreadPoolExecutor(4) as pool,
    ):
        list(pool.map(lambda i: one(eng, i), range(4)))
    assert bodies and all(b.startswith("HTTP 503") for b in bodies)
    found = diagnose("vllm-mlx", "0.6.0", "", bodies)
    assert [d.issue_id for d in found] == ["vllm-mlx-simple-busy-503"] and not found[0].is_bug


def test_prefix_cache_never_outlives_a_launch(
    vllm_mlx_060: Installation, tiny_gemma4_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # vllm-mlx saves its prefix cache under ~/.cache/vllm-mlx on shutdown and loads it at
    # start-up: without a home of the launch's own, the second launch would start warm.
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv(CACHE_ENV, str(cache_dir()))  # batchprobe's own cache stays put
    monkeypatch.setenv("HOME", str(home))
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    for log in logs:
        with launch("vllm-mlx==0.6.0", tiny_gemma4_dir, "batching", 2, log_path=log,
                    prefix_cache=True) as eng:
            replies = _concurrent(eng, 2, preamble="a long shared preamble " * 40)
            assert all(r["choices"][0]["text"] for r in replies)
    first, second = (log.read_text() for log in logs)
    saved = re.search(r"Saved prefix cache to (\S+)", first)
    assert saved, first[-2000:]
    assert not Path(saved.group(1)).is_relative_to(home)
    assert not Path(saved.group(1)).exists()  # the launch's state went with it
    assert "No prefix cache entries found on disk" in second
    assert not re.search(r"Loaded \d+ prefix cache entries", second)
    assert not (home / ".cache" / "vllm-mlx").exists()
