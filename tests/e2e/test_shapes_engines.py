"""Every traffic shape against real engines: no false alarm on a healthy engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from batchprobe.engines import Installation
from batchprobe.workload.shapes import SHAPE_NAMES

from ._run import batchprobe_run

pytestmark = pytest.mark.engine

TINY = ["--quick", "--sessions", "4", "--haystack-tokens", "128", "--max-tokens", "16"]


def _no_false_fail(verdict: dict[str, Any], out: str) -> None:
    assert verdict["status"] == "ok", out
    # Parallelism is judged as before; what the shapes must not bring is a correctness alarm.
    assert verdict["verdict"]["correct"] is not False, verdict["verdict"]["reasons"]
    # No hard finding anywhere; the reasons name each shape a random model leaves unjudged.
    hard = [f["message"] for f in verdict["findings"] if f["severity"] == "hard"]
    assert not hard, hard
    ran = [s["shape"] for s in verdict["shapes"] if s["ran"]]
    assert ran == list(SHAPE_NAMES), verdict["shapes"]
    for arm in verdict["arms"]:
        assert arm["metrics"]["errors_by_kind"] == {}, arm["spec"]["name"]
        assert [w["shape"] for w in arm["waves"]] == list(SHAPE_NAMES)


def test_mlx_lm_tiny_gemma3_every_shape_no_false_fail(
    mlx_lm_env: Installation, tiny_gemma3_dir: Path, tmp_path: Path
) -> None:
    # mlx-lm 0.32.2 (its latest release) kills its generation thread on the conversation
    # shape's exact prompt-cache hit, a real bug (the corpus case mlx-lm-exact-cache-hit shows
    # it caught unpatched): every shape runs here with batchprobe's patch for it.
    code, verdict, out = batchprobe_run(
        ["--engine", "mlx-lm", "--model", str(tiny_gemma3_dir), *TINY,
         "--patch", "mlx-lm-exact-cache-hit"],
        tmp_path / "verdict.json",
    )  # fmt: skip
    _no_false_fail(verdict, out)
    assert verdict["patches_applied"] == ["mlx-lm-exact-cache-hit"]
    # A random model cannot count: its items are not judged, and the verdict says so.
    assert any("not judged" in r for r in verdict["verdict"]["reasons"])
    assert code == {"PASS": 0, "FAIL": 1}.get(verdict["verdict"]["outcome"], 2)


def test_vllm_mlx_060_tiny_gemma4_every_shape_no_false_fail(
    vllm_mlx_060: Installation, tiny_gemma4_dir: Path, tmp_path: Path
) -> None:
    code, verdict, out = batchprobe_run(
        ["--engine", "vllm-mlx==0.6.0", "--model", str(tiny_gemma4_dir), *TINY],
        tmp_path / "verdict.json",
    )
    _no_false_fail(verdict, out)
    widest = verdict["arms"][-1]
    assert widest["spec"]["prefix_cache"] is True  # launched with its cache for repeat
    repeat = next(w for w in widest["waves"] if w["shape"] == "repeat")
    assert repeat["prefix_cache"].startswith("on")
    assert all(not a["spec"]["prefix_cache"] for a in verdict["arms"][:-1])
    ragged = next(s for s in verdict["shapes"] if s["shape"] == "ragged")
    assert any("sliding window (8 tokens)" in n for n in ragged["notes"]), ragged
    assert code == {"PASS": 0, "FAIL": 1}.get(verdict["verdict"]["outcome"], 2)
