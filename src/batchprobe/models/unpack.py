"""Gemma 3 270M as a Hugging Face checkpoint, unpacked from the GGUF batchprobe installs.

mlx-lm, vllm-mlx and transformers cannot load a GGUF; the checkpoint made here from the same
weights (dequantised to float32, every conversion transform undone: see
``_unpack_gguf_script.py``) is the same model for them. It is built once into the cache, keyed
by a hash of the unpacker, and appears under its final name only when complete.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from batchprobe.errors import ConfigError
from batchprobe.models import _toolenv
from batchprobe.models._staged import cached, check_space, run_into

SCRIPT = Path(__file__).with_name("_unpack_gguf_script.py")
# float32 weights (268 M values) plus a 16 MB tokenizer, with room to spare.
NEEDED_BYTES = 1_200 * 1024 * 1024
_BAD_GGUF, _NO_SPACE = 3, 4


def recipe_hash() -> str:
    """Changes with the unpacker or its environment's pins: either builds a new checkpoint."""
    recipe = SCRIPT.read_bytes() + _toolenv.recipe_hash().encode()
    return hashlib.sha256(recipe).hexdigest()[:12]


def unpack(gguf: Path, target: Path, *, cache_dir: Path | None = None,
           needed_bytes: int = NEEDED_BYTES) -> Path:
    """Write the checkpoint of ``gguf`` into ``target`` (replaced if present) and return it.

    ConfigError("model") for a GGUF that is corrupt, truncated or not Gemma 3;
    ConfigError("cache") when the folder lacks the space. Either way nothing is left at
    ``target`` or beside it.
    """
    if not gguf.is_file():
        raise ConfigError("model", f"{gguf} is not a file")
    check_space(target.parent, needed_bytes, "unpacking gemma3-270m")
    python = _toolenv.tools_python(cache_dir)
    done = run_into(target, [str(python), str(SCRIPT), str(gguf)])
    if done is not None:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        if done.returncode == _NO_SPACE:
            raise ConfigError("cache", f"{target.parent}: {lines[-1]}")
        if done.returncode == _BAD_GGUF:
            raise ConfigError("model", lines[-1])
        raise ConfigError("model", f"unpacking {gguf} failed:\n{done.stderr[-2000:]}")
    return target


def cached_checkpoint(gguf: Path, cache: Path) -> Path:
    """The cache's checkpoint of ``gguf``, unpacked on first use and again when a file of it
    went missing or changed size (under a lock, once)."""
    target = cache / "models" / f"gemma-3-270m-hf-{recipe_hash()}"
    return cached(target, cache, lambda folder: unpack(gguf, folder, cache_dir=cache))
