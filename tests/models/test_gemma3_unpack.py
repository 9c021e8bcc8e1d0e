"""Gemma 3 270M unpacked from its GGUF into a Hugging Face checkpoint, checked against llama.cpp.

The same weights through two conversions must be the same model: the tokenizer gives
llama.cpp's ids on the probe's own prompts, greedy answers agree, and the checkpoint finds
its needles serially on transformers serve (default haystack). (mlx-lm runs it too, at ~5
GFLOPS here, 25-50 s a prompt: mlx-lm's default model is tiny-llama, and gemma-3's layout on
mlx-lm is the tiny-gemma3 tests'.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from batchprobe.engines import Installation, launch
from batchprobe.models._toolenv import tools_python
from batchprobe.probe.managed import engine_target
from batchprobe.results.items import WorkItem
from batchprobe.workload.decode import build_decode_items
from batchprobe.workload.recall import build_recall_items
from batchprobe.workload.scoring import score_recall
from engines.helpers import post_json

pytestmark = pytest.mark.engine

_ENCODE = (
    "import json, sys\nfrom tokenizers import Tokenizer\n"
    "tok = Tokenizer.from_file(sys.argv[1])\n"
    "print(json.dumps([tok.encode(p, add_special_tokens=False).ids for p in json.load(sys.stdin)]))"
)


def _recall(haystack: int, sessions: int, style: str = "completion") -> list[WorkItem]:
    return build_recall_items(run_id="u19", sessions=sessions, haystack_tokens=haystack,
                              prompt_style=style, max_tokens=16, seed=3)


def _probe_prompts() -> list[str]:
    prompts = [i.prompt for s in ("completion", "chat") for i in _recall(300, 4, s)]
    prompts += [i.prompt for s in ("completion", "chat")
                for i in build_decode_items(run_id="u19", sessions=4, max_tokens=64,
                                            prompt_style=s, seed=3)]
    return prompts + ["<start_of_turn>user\nHi  there\n\n\n<end_of_turn>", "é中文 ✓ \t tab"]


def _hf_ids(checkpoint: Path, prompts: list[str]) -> list[list[int]]:
    done = subprocess.run(
        [str(tools_python()), "-c", _ENCODE, str(checkpoint / "tokenizer.json")],
        input=json.dumps(prompts), capture_output=True, text=True, check=True,
    )
    ids: list[list[int]] = json.loads(done.stdout)
    return ids


def _answers(base_url: str, model_id: str, items: list[WorkItem], **extra: object) -> list[str]:
    body = {"model": model_id, "max_tokens": 12, "temperature": 0, **extra}
    return [post_json(base_url + "/v1/completions", {**body, "prompt": item.prompt}, timeout=600)
            ["choices"][0]["text"] for item in items]


def _recall_rate(items: list[WorkItem], answers: list[str]) -> float:
    codes = {item.session: item.expected_code or "" for item in items}
    hits = [score_recall(a, i.session, codes).hit for i, a in zip(items, answers, strict=True)]
    return sum(hits) / len(hits)


def test_tokenizer_ids_equal_llama_cpp(
    llama_env: Installation, gemma3_270m: Path, gemma3_270m_hf: Path, tmp_path: Path
) -> None:
    prompts = _probe_prompts()
    with launch("llama.cpp", gemma3_270m, "simple", 1, log_path=tmp_path / "l.log") as eng:
        want = [post_json(eng.base_url + "/tokenize", {"content": p})["tokens"] for p in prompts]
    got = _hf_ids(gemma3_270m_hf, prompts)
    for prompt, a, b in zip(prompts, got, want, strict=True):
        assert a == b, prompt[:80]


def test_greedy_answers_equal_llama_cpp(
    llama_env: Installation, transformers_env: Installation, gemma3_270m: Path,
    gemma3_270m_hf: Path, tmp_path: Path,
) -> None:
    items = _recall(256, 10)
    with launch("llama.cpp", gemma3_270m, "simple", 1, log_path=tmp_path / "l.log") as eng:
        reference = _answers(eng.base_url, eng.model_id, items, cache_prompt=False)
    with launch("transformers", gemma3_270m_hf, "simple", 1, log_path=tmp_path / "t.log") as eng:
        unpacked = _answers(eng.base_url, eng.model_id, items)
    same = sum(a.strip() == b.strip() for a, b in zip(reference, unpacked, strict=True))
    assert same >= 9, list(zip(reference, unpacked, strict=True))
    assert _recall_rate(items, reference) >= 0.9  # the comparison is over real answers


def test_transformers_serial_recall_at_the_default_haystack(
    transformers_env: Installation, gemma3_270m_hf: Path, tmp_path: Path
) -> None:
    items = _recall(1000, 5)  # five prompts at the default haystack: >= 90% is all five
    with launch("transformers", gemma3_270m_hf, "simple", 1, log_path=tmp_path / "t.log") as eng:
        assert _recall_rate(items, _answers(eng.base_url, eng.model_id, items)) >= 0.9


def test_each_engine_gets_the_form_it_loads(gemma3_270m: Path, gemma3_270m_hf: Path) -> None:
    assert engine_target("llama.cpp", None, None)[1] == str(gemma3_270m)
    assert engine_target("llama-cpp-python", "gemma3-270m", None)[1] == str(gemma3_270m)
    for engine in ("transformers", "mlx-lm", "vllm-mlx"):
        assert engine_target(engine, "gemma3-270m", None)[1] == str(gemma3_270m_hf)
    assert engine_target("transformers", None, None)[1] == str(gemma3_270m_hf)
    assert json.loads((gemma3_270m_hf / "config.json").read_text())["tie_word_embeddings"]
