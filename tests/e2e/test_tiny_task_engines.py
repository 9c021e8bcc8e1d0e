"""The constructed tiny models on real engines: each does the probe's tasks alone on every
engine that loads it, so a run on it judges every answer (Gemma 3 270M leaves dozens not
judged)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ._run import batchprobe_run, expected_exit, sessions

pytestmark = pytest.mark.engine


def _passed(answers: list[dict[str, Any]], workload: str) -> tuple[int, int]:
    mine = [s for s in answers if s["workload"] == workload]
    ok = [s for s in mine if s["error"] is None and s["check"] is not None and s["check"]["passed"]]
    return len(ok), len(mine)


@pytest.mark.parametrize(("model", "engine", "style", "n"), [
    ("tiny-llama", "llama.cpp", "completion", 8), ("tiny-llama", "llama.cpp", "chat", 8),
    ("tiny-llama", "transformers", "chat", 8),
    ("tiny-llama", "mlx-lm", "chat", 3),  # MLX on this CPU: ~6 s a request
    # gemma-3's layout, its first layer a sliding window far shorter than the prompts
    ("tiny-gemma3", "transformers", "completion", 8), ("tiny-gemma3", "transformers", "chat", 8),
    ("tiny-gemma3", "mlx-lm", "completion", 3),
    # gemma-4's shared KV and vision tower: vllm-mlx serves it through mlx-vlm, and tokenizes a
    # completion there without <s>
    ("tiny-gemma4", "vllm-mlx", "completion", 4), ("tiny-gemma4", "vllm-mlx", "chat", 4),
    ("tiny-gemma4", "mlx-lm", "chat", 3),
])  # fmt: skip
def test_serial_recall_and_counts_on_the_probes_own_items(
    tiny_llama_task: Path, tiny_gemma3_task: Path, tiny_gemma4_task: Path, tmp_path: Path,
    model: str, engine: str, style: str, n: int,
) -> None:
    args = ["--engine", engine, "--model", model, "--arms", "simple@1", "--shapes", "burst",
            "--sessions", str(n), "--prompt-style", style]  # fmt: skip
    code, verdict, out = batchprobe_run(args, tmp_path / "verdict.json")
    assert verdict["status"] == "ok", out
    answers = sessions(verdict, "simple@1")
    assert {s["situation"]["api"] for s in answers} == {"chat" if style == "chat" else "completions"}
    for workload in ("recall", "decode"):
        ok, total = _passed(answers, workload)
        print(f"{model} {engine} {style} {workload}: {ok}/{total}")
        assert total == n and ok >= 0.95 * total, [s["text"][:40] for s in answers]
    assert code == expected_exit(verdict), out


def test_a_sweep_on_llama_cpp_judges_every_answer(tiny_llama_task: Path, tmp_path: Path) -> None:
    """Every shape at depths 1 and 4, then the KV-pressure wave: every concurrent answer is
    judged (no reference fails its own check), and the verdict is the engine's: parallel, and
    FAIL on llama.cpp 0.3.36's unified pool alone (llama.cpp #23652)."""
    started = time.monotonic()
    code, verdict, out = batchprobe_run(
        ["--engine", "llama.cpp", "--model", "tiny-llama", "--sweep", "1,4"], tmp_path / "v.json"
    )
    print(f"tiny-llama sweep: {time.monotonic() - started:.0f}s")
    assert verdict["status"] == "ok", out
    assert all(s["ran"] for s in verdict["shapes"]), verdict["shapes"]
    steps = [a for a in verdict["arms"] if a["spec"]["role"] == "step"]
    answered = [s for a in steps for s in a["sessions"] if not s["hung_up"] and s["error"] is None]
    kinds = {f["kind"] for f in verdict["findings"]}
    print(f"judged {verdict['verdict']['judged_answers']} of {len(answered)}; findings {kinds}")
    assert "not_judged" not in kinds, out
    assert verdict["verdict"]["judged_answers"] >= 0.95 * len(answered)
    assert all(s["correct"] for s in verdict["envelope"]["steps"]), verdict["envelope"]["steps"]
    hard = {(f["arm"], f["kind"]) for f in verdict["findings"] if f["severity"] == "hard"}
    assert hard == {("pressure@4", "kv_pool")}, out
    assert verdict["verdict"]["outcome"] == "FAIL" and verdict["verdict"]["parallel"] is True, out
    assert code == expected_exit(verdict), out
