"""Real engines on this CPU: launch, answer, tear down with no process left.

Environments and models come through batchprobe's own API and are cached, so a fresh
CI machine installs them once (llama-server's build is the long one, ~7-9 min on 2 cores).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from batchprobe.engines import Installation, diagnose, group_members, launch
from batchprobe.errors import EngineFailedToStart
from proctools import pid_alive

from .helpers import get_text, post_json

pytestmark = pytest.mark.engine


def _complete(base_url: str, model_id: str, prompt: str, max_tokens: int = 8) -> str:
    reply = post_json(
        base_url + "/v1/completions",
        {"model": model_id, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
    )
    text: str = reply["choices"][0]["text"]
    return text


def test_mlx_lm_tiny_gemma3_answers_and_tears_down(
    mlx_lm_env: Installation, tiny_gemma3_dir: Path, tmp_path: Path
) -> None:
    with launch("mlx-lm", tiny_gemma3_dir, "batching", 4, log_path=tmp_path / "mlx.log") as eng:
        assert eng.version == mlx_lm_env.version
        first = _complete(eng.base_url, eng.model_id, "the access code is")
        assert first.split() and first == _complete(
            eng.base_url, eng.model_id, "the access code is"
        )
        members = group_members(eng.pid)
    assert members and not any(pid_alive(p) for p in members)


def test_keyboard_interrupt_stops_a_real_engine(
    mlx_lm_env: Installation, tiny_gemma3_dir: Path, tmp_path: Path
) -> None:
    members: list[int] = []
    log = tmp_path / "mlx.log"
    with (
        pytest.raises(KeyboardInterrupt),
        launch("mlx-lm", tiny_gemma3_dir, "simple", 1, log_path=log) as eng,
    ):
        members = group_members(eng.pid)
        raise KeyboardInterrupt
    assert members and not any(pid_alive(p) for p in members)


def test_bad_model_path_fails_to_start_with_log_tail(
    mlx_lm_env: Installation, tmp_path: Path
) -> None:
    missing = tmp_path / f"no-such-model-{uuid.uuid4().hex[:8]}"
    with (
        pytest.raises(EngineFailedToStart) as info,
        launch("mlx-lm", missing, "simple", 1, log_path=tmp_path / "bad.log", ready_timeout=120),
    ):
        pytest.fail("must not become ready")
    assert info.value.log_tail and info.value.reproduce
    assert str(missing) in info.value.reproduce
    assert "generation thread died" in str(info.value)  # failed fast, not by timeout
    found = diagnose("mlx-lm", mlx_lm_env.version, (tmp_path / "bad.log").read_text(), [])
    assert found and found[0].issue_id == "unknown"


@pytest.mark.parametrize("mode", ["simple", "batching"])
def test_transformers_serve_both_modes(
    transformers_env: Installation, tiny_gemma3_dir: Path, tmp_path: Path, mode: str
) -> None:
    with launch("transformers", tiny_gemma3_dir, mode, 4, log_path=tmp_path / "tf.log") as eng:
        assert eng.model_id == str(tiny_gemma3_dir)
        assert _complete(eng.base_url, eng.model_id, "the access code is").split()
        members = group_members(eng.pid)
    assert members and not any(pid_alive(p) for p in members)


@pytest.mark.parametrize("mode", ["simple", "batching"])
def test_llama_cpp_gemma3_270m_both_modes(
    llama_env: Installation, gemma3_270m: Path, tmp_path: Path, mode: str
) -> None:
    with launch("llama.cpp", gemma3_270m, mode, 4, log_path=tmp_path / "llama.log") as eng:
        reply = post_json(
            eng.base_url + "/v1/completions",
            {
                "model": eng.model_id,
                "prompt": "ACCESS_CODE=7Q2XK9\nThe weather is fine.\nACCESS_CODE=",
                "max_tokens": 8,
                "temperature": 0,
                "cache_prompt": False,
            },
        )
        assert reply["usage"]["completion_tokens"] > 0
        assert "7Q2XK9" in reply["choices"][0]["text"]  # the base model copies the needle
        status, metrics = get_text(eng.base_url + "/metrics")
        assert status == 200 and "llamacpp:" in metrics
        status, slots = get_text(eng.base_url + "/slots")
        assert slots.count('"id"') == (1 if mode == "simple" else 4)
        members = group_members(eng.pid)
    assert members and not any(pid_alive(p) for p in members)


def test_llama_cpp_bad_model_exits_early(llama_env: Installation, tmp_path: Path) -> None:
    bad = tmp_path / "garbage.gguf"
    bad.write_bytes(b"not a gguf file at all")
    log = tmp_path / "bad.log"
    with (
        pytest.raises(EngineFailedToStart) as info,
        launch("llama.cpp", bad, "simple", 1, log_path=log),
    ):
        pytest.fail("must not become ready")
    assert info.value.log_tail and "garbage.gguf" in info.value.log_tail
