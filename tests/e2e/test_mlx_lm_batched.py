"""mlx-lm's batch generator serves the concurrent arm: requests carry no seed.

`mlx_lm.server` puts a request on its batched path only when it has no seed (`_is_batchable`:
`args.seed is None`); a seeded request is served alone by `_serve_single`, one after the other.
Its log says neither, so the evidence is concurrent decoding: on the batched path the sessions'
decode windows (first to last token) overlap; on the one-at-a-time path they cannot. The same run
with `--request-seed` is the control that shows the measure can tell the two apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from batchprobe.engines import Installation

from ._run import batchprobe_run, expected_exit, sessions

pytestmark = pytest.mark.engine

# mlx-lm's latest release kills its generation thread on the conversation shape's exact
# prompt-cache hit (the corpus case mlx-lm-exact-cache-hit): this test is about seeds, so it
# runs with batchprobe's patch for that bug.
ARGS = ["--workloads", "decode", "--sessions", "4", "--max-tokens", "48", "--arms", "batching@4",
        "--patch", "mlx-lm-exact-cache-hit"]


def _overlapping_pairs(arm_sessions: list[dict[str, Any]]) -> int:
    windows = [
        (s["first_token_s"], s["last_token_s"])
        for s in arm_sessions
        if s["first_token_s"] is not None and s["last_token_s"] > s["first_token_s"]
    ]
    return sum(
        1
        for i, (a0, a1) in enumerate(windows)
        for b0, b1 in windows[i + 1 :]
        if a0 < b1 and b0 < a1
    )


def test_mlx_lm_concurrent_arm_is_batched_without_a_seed(
    mlx_lm_env: Installation, tiny_gemma3_dir: Path, tmp_path: Path
) -> None:
    model = ["--engine", "mlx-lm", "--model", str(tiny_gemma3_dir)]
    code, plain, out = batchprobe_run([*model, *ARGS], tmp_path / "plain.json")
    assert plain["status"] == "ok", out
    assert code == expected_exit(plain), out
    arm = plain["arms"][0]
    assert arm["request_body"] is not None and "seed" not in arm["request_body"]
    assert arm["request_body"]["temperature"] == 0.0
    batched = sessions(plain, "batching@4")
    assert all(s["error"] is None for s in batched), out
    # 4 sessions decoding together: every pair of windows overlaps (6 pairs).
    assert _overlapping_pairs(batched) >= 5, batched
    print(f"no seed: {_overlapping_pairs(batched)}/6 decode windows overlap, "
          f"{arm['metrics']['decode_tokens_per_s']:.1f} tok/s")  # fmt: skip

    _, seeded, out = batchprobe_run([*model, *ARGS, "--request-seed", "0"], tmp_path / "seed.json")
    assert seeded["status"] == "ok", out
    assert seeded["arms"][0]["request_body"]["seed"] == 0
    one_at_a_time = sessions(seeded, "batching@4")
    assert all(s["error"] is None for s in one_at_a_time), out
    assert _overlapping_pairs(one_at_a_time) == 0, one_at_a_time
    print(f"seeded: 0/6 overlap, {seeded['arms'][0]['metrics']['decode_tokens_per_s']:.1f} tok/s")
