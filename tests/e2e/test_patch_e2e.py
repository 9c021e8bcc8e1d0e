"""Issue 4 end to end: vllm-mlx 0.3.0 + tiny gemma-4 fails the probe, and passes it patched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.engines import Installation
from proctools import procs_with

from ._run import batchprobe_run

pytestmark = pytest.mark.engine

# Random weights make recall meaningless, so the verdict rests on errors, greedy equality
# and decode throughput. The baseline is batching@1, not simple@1: on this tiny model the
# step overhead of each engine dominates, and vllm-mlx's simple engine steps ~3x faster than
# its batching engine, so against simple@1 the speedup at 4 sessions swings between ~1x and
# ~3x from run to run; against batching@1 only concurrency differs (measured ~2.8x).
ARGS = ["--engine", "vllm-mlx==0.3.0", "--sessions", "4", "--workloads", "decode",
        "--max-tokens", "96", "--arms", "batching@1,batching@4", "--shapes", "burst"]


def _keep(verdict_file: Path, name: str) -> None:
    """Keep the verdict as a CI artefact (artifacts/ in the checkout, or $BATCHPROBE_ARTIFACTS)."""
    root = Path(os.environ.get("BATCHPROBE_ARTIFACTS", Path(__file__).parents[2] / "artifacts"))
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(verdict_file, root / name)


def test_gemma4_attention_patch_turns_fail_into_pass(
    vllm_mlx_030: Installation, tiny_gemma4_dir: Path, tmp_path: Path
) -> None:
    model = ["--model", str(tiny_gemma4_dir)]
    code, broken, out = batchprobe_run([*ARGS, *model], tmp_path / "unpatched.json")
    _keep(tmp_path / "unpatched.json", "verdict-vllm-mlx-0.3.0-unpatched.json")
    assert code == 1 and broken["verdict"]["outcome"] == "FAIL", out
    assert broken["patches_applied"] == []
    assert "vllm-mlx-gemma4-shared-kv" in {d["issue_id"] for d in broken["diagnoses"]}

    code, fixed, out = batchprobe_run(
        [*ARGS, *model, "--patch", "gemma4-attention"], tmp_path / "patched.json"
    )
    _keep(tmp_path / "patched.json", "verdict-vllm-mlx-0.3.0-patched.json")
    assert fixed["patches_applied"] == ["gemma4-attention"]
    assert all(a["metrics"]["errors_by_kind"] == {} for a in fixed["arms"]), out
    assert fixed["verdict"]["correct"] is True
    assert fixed["verdict"]["outcome"] == "PASS", fixed["verdict"]["reasons"]
    assert code == 0
    assert not procs_with(str(tiny_gemma4_dir))


def test_unknown_patch_is_a_usage_error_naming_the_known_ones(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["run", "--engine", "vllm-mlx==0.3.0", "--model", str(tmp_path), "--patch", "nope"]
    )
    assert result.exit_code == 2
    assert "patch" in result.output and "gemma4-attention" in result.output
