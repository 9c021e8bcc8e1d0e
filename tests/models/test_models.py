"""Model aliases and the tiny gemma3 and llama builders."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from batchprobe.engines import Installation, install
from batchprobe.errors import ConfigError
from batchprobe.models import resolve_model, tiny_gemma3, tiny_llama


@pytest.fixture(scope="module")
def builder() -> Installation:
    return install("mlx-lm")


@pytest.mark.engine  # assembles the 253 MB GGUF into the cache
def test_gemma3_270m_alias_materialises_a_verified_gguf_once() -> None:
    path = resolve_model("gemma3-270m")
    assert path.suffix == ".gguf" and path.stat().st_size > 200_000_000
    assert path.read_bytes()[:4] == b"GGUF"
    mtime = path.stat().st_mtime_ns
    assert resolve_model("gemma3-270m") == path and path.stat().st_mtime_ns == mtime


def test_paths_pass_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_model("m") == tmp_path / "m"  # existing: made absolute
    assert resolve_model("google/gemma-3-270m") == Path("google/gemma-3-270m")  # engine decides
    with pytest.raises(ConfigError) as info:
        resolve_model("  ")
    assert info.value.field == "model" and "gemma3-270m" in str(info.value)


@pytest.mark.engine  # builds with the mlx-lm environment
def test_tiny_gemma3_is_deterministic_per_seed(tmp_path: Path, builder: Installation) -> None:
    a = tiny_gemma3.build(tmp_path / "a", seed=0, python=builder.python)
    b = tiny_gemma3.build(tmp_path / "b", seed=0, python=builder.python)
    c = tiny_gemma3.build(tmp_path / "c", seed=1, python=builder.python)
    weights = [(p / "model.safetensors").read_bytes() for p in (a, b, c)]
    assert weights[0] == weights[1] != weights[2]
    config = json.loads((a / "config.json").read_text())
    assert config["model_type"] == "gemma3_text" and config["architectures"] == [
        "Gemma3ForCausalLM"
    ]
    assert not list(tmp_path.glob(".*tmp*"))  # no staging directory left behind


@pytest.mark.engine  # builds with the mlx-lm environment
def test_tiny_gemma3_tokenizer_is_a_tokenizers_wordlevel(
    tmp_path: Path, builder: Installation
) -> None:
    path = tiny_gemma3.build(tmp_path / "m", python=builder.python)
    code = (
        "import sys; from tokenizers import Tokenizer; "
        "t = Tokenizer.from_file(sys.argv[1]); print(t.encode('the code is 7Q2XK9').tokens)"
    )
    out = subprocess.run(
        [str(builder.python), "-c", code, str(path / "tokenizer.json")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "['the', 'code', 'is', '<unk>']"


@pytest.mark.engine  # builds with the mlx-lm environment
def test_rebuilding_replaces_the_directory(tmp_path: Path, builder: Installation) -> None:
    target = tmp_path / "m"
    target.mkdir()
    (target / "stale.bin").write_text("old")
    tiny_gemma3.build(target, python=builder.python)
    assert not (target / "stale.bin").exists() and (target / "tokenizer.json").is_file()


_GREEDY = """
import sys
from mlx_lm import load, generate
model, tok = load(sys.argv[1])
for prompt in ("the code for vault one is", "my server log says error at port ten"):
    print(repr(generate(model, tok, prompt, max_tokens=8, verbose=False)))
print(type(model.make_cache()[0]).__name__ if hasattr(model, "make_cache") else "KVCache")
"""


@pytest.mark.engine
def test_tiny_llama_loads_in_mlx_lm_and_its_answer_depends_on_the_prompt(
    tmp_path: Path, builder: Installation
) -> None:
    path = tiny_llama.build(tmp_path / "tiny-llama", python=builder.python)
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == "llama" and "sliding_window" not in config
    done = subprocess.run([str(builder.python), "-c", _GREEDY, str(path)],
                          capture_output=True, text=True, check=True, timeout=300)  # fmt: skip
    first, second, cache = done.stdout.splitlines()[-3:]
    # Sharp attention: two prompts give two answers (a prompt answered from another's KV shows).
    assert first != second and len(first) > 4
    assert cache == "KVCache"  # every layer global: no sliding-window cache
