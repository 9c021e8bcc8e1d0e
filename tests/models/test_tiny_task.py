"""The constructed tiny models that do the probe's tasks (llama, gemma3, gemma4): built
deterministically, cached, and refused clearly (a family without one, a GGUF of a family that
has none, a cache without space), never half-written."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.errors import ConfigError
from batchprobe.models import resolve_model
from batchprobe.models.tiny_task import GGUF_NAME, build_task, recipe_hash

from .staging import nothing_left


def test_a_family_without_a_task_model_is_named_with_the_allowed_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        build_task("qwen3", tmp_path / "m")
    assert info.value.field == "family" and "'qwen3'" in str(info.value)
    assert "allowed: llama, gemma3, gemma4, gemma4-wide" in str(info.value)
    result = CliRunner().invoke(main, ["models", "build-tiny", "gemma5", str(tmp_path / "x"), "--task"])
    assert result.exit_code == 2 and "gemma5" in result.output
    # A task-only family without --task says how to build it.
    result = CliRunner().invoke(main, ["models", "build-tiny", "gemma4-wide", str(tmp_path / "y")])
    assert result.exit_code == 2 and "family: 'gemma4-wide' has no random-weight model" in result.output
    assert "--task" in result.output and "allowed: gemma3, gemma4, llama" in result.output
    assert not (tmp_path / "y").exists()
    nothing_left(tmp_path / "m")


def test_a_cache_without_space_is_refused_before_any_work(tmp_path: Path) -> None:
    target = tmp_path / "out" / "tiny"
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(ConfigError) as info:
        build_task("llama", target, needed_bytes=free + 2**30)
    assert info.value.field == "cache" and "MiB free" in str(info.value)
    nothing_left(target)


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.engine  # the model-tools environment (< 1 min once); two builds of ~10 s
def test_the_build_is_deterministic_and_the_alias_is_cached(tmp_path: Path) -> None:
    first = build_task("llama", tmp_path / "a")
    second = CliRunner().invoke(main, ["models", "build-tiny", "llama", str(tmp_path / "b"), "--task"])
    assert second.exit_code == 0, second.output
    assert _digests(first) == _digests(tmp_path / "b")
    names = set(_digests(first))
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
            GGUF_NAME} <= names
    config = json.loads((first / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["num_hidden_layers"] == 2
    tokens = json.loads((first / "tokenizer.json").read_text())
    added = {t["content"] for t in tokens["added_tokens"]}
    assert {"ACCESS_CODE=", "VAULT_CODE?", "Count upwards from ", "<|assistant|>"} <= added
    # The alias builds into the cache once, under the recipe's hash: the same files.
    gguf = resolve_model("tiny-llama")
    assert gguf.name == GGUF_NAME and gguf.parent.name == f"tiny-llama-task-{recipe_hash()}"
    assert resolve_model("tiny-llama", model_format="hf") == gguf.parent
    assert _digests(gguf.parent) == _digests(first)


def _tensor_names(folder: Path) -> set[str]:
    raw = (folder / "model.safetensors").read_bytes()  # a u64 header length, then its JSON
    return set(json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")]))


def _checkpoint_built_twice(family: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """The family's build (the same bytes twice, no GGUF) and its config."""
    first = build_task(family, tmp_path / "a")
    assert _digests(first) == _digests(build_task(family, tmp_path / "b"))
    assert GGUF_NAME not in _digests(first)
    return first, json.loads((first / "config.json").read_text())


def _alias_is_the_build(alias: str, first: Path) -> None:
    """The alias has no GGUF and builds into the cache under the recipe's hash: the same files."""
    with pytest.raises(ConfigError) as info:
        resolve_model(alias, model_format="gguf")
    assert info.value.field == "model" and "no GGUF" in str(info.value)
    folder = resolve_model(alias, model_format="hf")
    assert folder.name == f"{alias}-task-{recipe_hash()}" and _digests(folder) == _digests(first)


@pytest.mark.engine  # two builds of ~10 s in the model-tools environment
def test_the_gemma3_build_keeps_gemma3s_parts_and_has_no_gguf(tmp_path: Path) -> None:
    first, config = _checkpoint_built_twice("gemma3", tmp_path)
    assert config["model_type"] == "gemma3_text" and config["tie_word_embeddings"] is False
    # A sliding-window first layer, its window far shorter than a recall prompt (~1000 tokens).
    assert config["layer_types"] == ["sliding_attention", "full_attention"]
    assert config["sliding_window_pattern"] == 2 and config["sliding_window"] <= 256
    names = _tensor_names(first)
    assert {"model.layers.0.self_attn.q_norm.weight", "model.layers.1.post_feedforward_layernorm.weight",
            "lm_head.weight"} <= names
    _alias_is_the_build("tiny-gemma3", first)


@pytest.mark.engine  # two builds of ~10 s in the model-tools environment
def test_the_gemma4_build_keeps_shared_kv_and_a_vision_tower(tmp_path: Path) -> None:
    first, config = _checkpoint_built_twice("gemma4", tmp_path)
    text = config["text_config"]
    assert config["model_type"] == "gemma4" and config["vision_config"]["model_type"] == "gemma4_vision"
    # Four layers, the last two reading the KV of the first two: the seed bug's architecture.
    assert text["num_hidden_layers"] == 4 and text["num_kv_shared_layers"] == 2
    assert text["layer_types"] == ["sliding_attention", "full_attention"] * 2
    assert text["sliding_window"] <= 256 and text["tie_word_embeddings"] is True
    names = _tensor_names(first)
    assert {"model.language_model.layers.3.self_attn.q_proj.weight",
            "model.language_model.embed_tokens_per_layer.weight",
            "model.embed_vision.embedding_projection.weight"} <= names
    assert any(n.startswith("model.vision_tower.") for n in names)
    # The processor places image tokens by these names: they are in the vocabulary.
    tokens = json.loads((first / "tokenizer.json").read_text())
    added = {t["content"]: t["id"] for t in tokens["added_tokens"]}
    assert added["<image_soft_token>"] == config["image_token_id"] < text["vocab_size"]
    # vllm-mlx 0.2.x and 0.3.0 route a model to their multimodal engine by its path ("gemma4").
    _alias_is_the_build("tiny-gemma4", first)


def test_the_builder_knows_the_probes_marker_and_bias_words() -> None:
    """The builder runs without batchprobe (its own python): its words are the probe's."""
    import ast

    from batchprobe.models.tiny_task import SCRIPT
    from batchprobe.send.discover import BIAS_WORDS
    from batchprobe.workload.needle import NEEDLE_KEY
    from batchprobe.workload.shapes.conversation import KEYS

    tree = ast.parse(SCRIPT.read_text())
    lists = {t.id: ast.literal_eval(node.value) for node in tree.body
             if isinstance(node, ast.Assign) for t in node.targets
             if isinstance(t, ast.Name) and isinstance(node.value, ast.List)}
    assert lists["BIAS_WORDS"] == list(BIAS_WORDS)
    assert lists["KEYS"] == [f"{k}=" for k in (NEEDLE_KEY, *KEYS)]


@pytest.mark.engine  # one build of ~10 s in the model-tools environment
def test_the_wide_gemma4_is_gemma4_with_a_window_as_long_as_its_context(tmp_path: Path) -> None:
    wide = build_task("gemma4-wide", tmp_path / "wide")
    narrow = build_task("gemma4", tmp_path / "narrow")
    config, narrow_config = (json.loads((m / "config.json").read_text()) for m in (wide, narrow))
    text = config["text_config"]
    # Wider than any prompt the probe sends: its sliding layers never wrap.
    assert text["sliding_window"] == text["max_position_embeddings"] >= 8192
    assert {**text, "sliding_window": narrow_config["text_config"]["sliding_window"]} == (
        narrow_config["text_config"])
    # The same weights and tokenizer (the staging manifest lists config.json's size too).
    differ = {".batchprobe-files.json", "config.json"}
    assert {k: v for k, v in _digests(wide).items() if k not in differ} == {
        k: v for k, v in _digests(narrow).items() if k not in differ}
    _alias_is_the_build("tiny-gemma4-wide", wide)
