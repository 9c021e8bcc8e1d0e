"""The gemma4-attention patch on real mlx-vlm (mlx[cpu]) with the tiny gemma-4 model."""

from __future__ import annotations

import pytest

from .conftest import SUPPORTED, UNSUPPORTED, VLLM_MLX_MLX_VLM, HarnessRunner

pytestmark = pytest.mark.engine


@pytest.mark.parametrize("version", SUPPORTED)
def test_batched_greedy_equals_single_sequence(run_harness: HarnessRunner, version: str) -> None:
    result = run_harness(version, "equivalence")
    assert result["applied"] is True
    single = result["single"]
    assert len(set(single[1])) > 3, "the tiny model must produce varied greedy text"
    assert result["batched"] == single  # one left-padded batch of 2
    assert result["merged"] == single  # per-request caches merged into one batch cache


def test_equivalence_check_catches_a_rope_offset_bug(run_harness: HarnessRunner) -> None:
    # mlx-vlm 0.7.10's batch caches advance `offset` in place: taking it by reference instead of
    # snapshotting it shifts RoPE, and the same comparison then fails.
    result = run_harness(VLLM_MLX_MLX_VLM, "equivalence")
    assert result["unsnapshotted"] != result["single"]


@pytest.mark.parametrize("version", SUPPORTED)
def test_oversized_mask_breaks_stock_mlx_vlm(run_harness: HarnessRunner, version: str) -> None:
    result = run_harness(version, "mask-stock")
    assert result["applied"] is False
    assert "broadcast" in result["error"]


@pytest.mark.parametrize("version", SUPPORTED)
def test_oversized_mask_is_trimmed_by_the_patch(run_harness: HarnessRunner, version: str) -> None:
    result = run_harness(version, "mask-patched")
    assert result["applied"] is True
    assert result["error"] is None
    assert result["mask_width"] > 8  # wider than the sliding window's keys
    assert result["oversized"] == result["reference"]
    assert result["max_abs_logit_diff"] < 1e-4


def test_patch_is_idempotent_and_replaces_a_competing_patch(run_harness: HarnessRunner) -> None:
    result = run_harness(VLLM_MLX_MLX_VLM, "idempotence")
    assert result["first"] is True
    assert result["second"] is True
    assert result["unchanged_by_second"] is True
    assert result["marker"] is True
    assert result["third_after_foreign"] is True
    assert result["foreign_replaced"] is True
    assert result["_stderr"].count("replaced") == 2  # the second call logged no replacement


@pytest.mark.parametrize("version", UNSUPPORTED)
def test_unsupported_mlx_vlm_is_refused_with_a_warning(
    run_harness: HarnessRunner, version: str
) -> None:
    result = run_harness(version, "unsupported")
    assert result == {
        "result": False,
        "unchanged": True,
        "marker": None,
        "_stderr": result["_stderr"],
    }
    warning = [line for line in result["_stderr"].splitlines() if line.startswith("WARNING")]
    assert warning and f"mlx-vlm {version}" in warning[0]
    assert ">= 0.5.0" in warning[0]
