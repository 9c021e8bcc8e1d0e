"""The tiny gemma-4 builder: deterministic, well-formed, loadable by tokenizers and mlx-vlm."""

from __future__ import annotations

import json
import math
import struct
import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from batchprobe.models.tiny_gemma4 import build

from .conftest import VLLM_MLX_MLX_VLM, mlx_vlm_python


def read_safetensors_header(path: Path) -> dict[str, Any]:
    with path.open("rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header: dict[str, Any] = json.loads(fh.read(size))
    return header


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path: Path) -> None:
    a, b, c = (
        build(tmp_path / n / "tiny-gemma4", seed=s) for n, s in (("a", 0), ("b", 0), ("c", 1))
    )
    for name in sorted(p.name for p in a.iterdir()):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()
    assert read_safetensors_header(a / "model.safetensors") == read_safetensors_header(
        c / "model.safetensors"
    )


def test_config_has_sliding_shared_kv_and_vision(tmp_path: Path) -> None:
    config = json.loads((build(tmp_path / "tiny-gemma4") / "config.json").read_text())
    text = config["text_config"]
    assert config["model_type"] == "gemma4"
    assert (text["num_hidden_layers"], text["hidden_size"], text["sliding_window"]) == (4, 64, 8)
    assert text["num_kv_shared_layers"] == 2
    assert text["layer_types"] == ["sliding_attention", "full_attention"] * 2
    assert config["vision_config"]["model_type"] == "gemma4_vision"


def test_safetensors_layout_is_contiguous_and_complete(tmp_path: Path) -> None:
    path = build(tmp_path / "tiny-gemma4") / "model.safetensors"
    header = read_safetensors_header(path)
    header.pop("__metadata__")
    spans = sorted(tuple(entry["data_offsets"]) for entry in header.values())
    assert spans[0][0] == 0
    assert all(prev[1] == nxt[0] for prev, nxt in pairwise(spans))
    for entry in header.values():
        start, end = entry["data_offsets"]
        assert end - start == 4 * math.prod(entry["shape"])
    (size,) = struct.unpack("<Q", path.read_bytes()[:8])
    assert path.stat().st_size == 8 + size + spans[-1][1]
    assert any(name.startswith("vision_tower.") for name in header)


@pytest.mark.engine
def test_tokenizer_and_model_load_in_mlx_vlm(tiny_gemma4: Path) -> None:
    code = f"""
import json
from tokenizers import Tokenizer
from mlx_vlm import load
t = Tokenizer.from_file("{tiny_gemma4}/tokenizer.json")
ids = t.encode("the code is 7 zzz").ids
model, processor = load("{tiny_gemma4}")  # strict: every weight present, none extra
prompt = processor.tokenizer.apply_chat_template(
    [{{"role": "user", "content": "hello"}}], tokenize=False, add_generation_prompt=True)
print(json.dumps({{"ids": ids, "decoded": t.decode(ids), "prompt": prompt,
                   "vision": model.vision_tower is not None}}))
"""
    done = subprocess.run(
        [str(mlx_vlm_python(VLLM_MLX_MLX_VLM)), "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ids"][-1] == 3  # an out-of-vocabulary word becomes <unk>
    assert result["decoded"] == "the code is 7"  # <unk> is special: skipped on decode
    assert result["prompt"].startswith("<bos><start_of_turn>user hello")
    assert result["vision"] is True
