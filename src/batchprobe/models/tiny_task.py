"""Tiny models that do the probe's tasks: constructed, not trained.

A 2-layer llama of 2.2 M parameters whose weights are written by hand (an offset-head layer,
then a recall head and a count head; see ``_tiny_task_build.py``) over a character vocabulary
with the probe's marker words. It finds every needle and counts every count on the probe's
own items, over completions and chat, on llama.cpp, transformers and mlx-lm, so every answer
is judged. The gemma3 family is the same construction in gemma-3's layout, its first layer
a sliding-window one of 128 tokens (``_tiny_task_gemma3.py``), for the engines' rotating
caches; the gemma4 family carries it over to gemma-4's layout, the last two of four layers
reading the KV of the first two, with a tiny vision tower (``_tiny_task_gemma4.py``), for the
engines' Gemma-4 paths; gemma4-wide is the same with a window as long as its context. Deterministic: the same files from the same recipe, in about 10 s on 2 cores, under
the model-tools python (numpy, scipy, safetensors, tokenizers, gguf), cached by a hash of the
recipe. A llama folder also holds ``model.gguf``, whose MLP is widened with zero units so
llama.cpp spends ~3 ms a token on it: a reply then streams token by token, as a real model's
does, and a stream can be joined or dropped mid-way.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from batchprobe.errors import ConfigError
from batchprobe.models import _toolenv
from batchprobe.models._staged import cached, check_space, run_into

_HERE = Path(__file__).parent
SCRIPT = _HERE / "_tiny_task_build.py"
SOURCES = (SCRIPT, _HERE / "_tiny_task_kernels.py", _HERE / "_tiny_task_gguf.py",
           _HERE / "_tiny_task_gemma3.py", _HERE / "_tiny_task_gemma4.py", _HERE / "tiny_gemma4.py")
# gemma4-wide: gemma4 with a sliding window as long as its context, for the bugs of the
# full-attention and shared-KV paths without the rotating caches' (vllm-mlx #384).
TASK_FAMILIES = ("llama", "gemma3", "gemma4", "gemma4-wide")
GGUF_NAME = "model.gguf"
# 8.7 MB of float32 weights, the GGUF's 110 MB (its MLP widened), with room to spare.
NEEDED_BYTES = 200 * 1024 * 1024


def recipe_hash() -> str:
    """Changes with the builder or its environment's pins: either builds a new model."""
    recipe = b"".join(p.read_bytes() for p in SOURCES) + _toolenv.recipe_hash().encode()
    return hashlib.sha256(recipe).hexdigest()[:12]


def _family(family: str) -> str:
    if family not in TASK_FAMILIES:
        raise ConfigError(
            "family",
            f"{family!r} has no model that does the tasks; allowed: {', '.join(TASK_FAMILIES)}",
        )
    return family


def build_task(family: str, target: Path, *, cache_dir: Path | None = None,
               needed_bytes: int = NEEDED_BYTES) -> Path:
    """Write the ``family`` task model into ``target`` (replaced if present) and return it.

    ConfigError("family") for a family without one, ConfigError("cache") when the folder
    lacks the space; a failed build leaves nothing at ``target`` or beside it.
    """
    _family(family)
    check_space(target.parent, needed_bytes, f"the tiny {family} task model")
    python = _toolenv.tools_python(cache_dir)
    done = run_into(target, [str(python), str(SCRIPT), family])
    if done is not None:
        raise ConfigError("model", f"building the tiny {family} task model failed:\n"
                                   f"{done.stderr[-2000:]}")
    return target


def cached_task_model(family: str, cache: Path) -> Path:
    """The cache's ``family`` task model folder, built on first use and again when a file of
    it went missing or changed size (under a lock, once)."""
    target = cache / "models" / f"tiny-{_family(family)}-task-{recipe_hash()}"
    return cached(target, cache, lambda folder: build_task(family, folder, cache_dir=cache))
