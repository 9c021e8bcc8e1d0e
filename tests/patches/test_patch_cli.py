"""--patch at the CLI: an unknown patch is a usage error (the patch turning vllm-mlx 0.3.0's FAIL into a PASS on the real engine is
the corpus case vllm-mlx-gemma4-shared-kv, run by test_corpus_cases)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from batchprobe.cli import main


def test_unknown_patch_is_a_usage_error_naming_the_known_ones(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["run", "--engine", "vllm-mlx==0.3.0", "--model", str(tmp_path), "--patch", "nope"]
    )
    assert result.exit_code == 2
    assert "patch" in result.output and "gemma4-attention" in result.output
