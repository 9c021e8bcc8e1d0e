"""A tiny random gemma3_text model (MLX/HF layout) for tests and demos, built offline.

2 layers, hidden 64, one sliding-window and one global layer, a 512-word WordLevel
tokenizer. Random weights: greedy text is deterministic but meaningless, so it
checks crashes and greedy equivalence, never recall. The same directory loads in
mlx-lm (`mlx_lm.server --model DIR`) and in transformers (`Gemma3ForCausalLM`).

The weights are written by ``_tiny_gemma3_script.py`` under the python of an
engine environment that has numpy, safetensors and tokenizers (by default the
mlx-lm one, installed when missing), so batchprobe itself needs none of them.
"""

from __future__ import annotations

from pathlib import Path

from batchprobe.engines import install
from batchprobe.errors import ConfigError
from batchprobe.models._staged import run_into

SCRIPT = Path(__file__).with_name("_tiny_gemma3_script.py")
BUILDER_ENGINE = "mlx-lm"


def builder_python(cache_dir: Path | None = None) -> Path:
    """The python that writes the weights: the mlx-lm environment's (installed if missing)."""
    inst = install(BUILDER_ENGINE, cache_dir=cache_dir)
    if inst.python is None:
        raise ConfigError("engine", f"{BUILDER_ENGINE} has no python environment")
    return inst.python


def build(
    path: Path, seed: int = 0, *, python: Path | None = None, cache_dir: Path | None = None,
    family: str = "gemma3",
) -> Path:
    """Write the model into ``path`` (replaced if present) and return it.

    ``family`` "llama" writes the same tiny model as a llama (every layer global attention).
    """
    target = Path(path)
    interpreter = python or builder_python(cache_dir)
    done = run_into(target, [str(interpreter), str(SCRIPT), str(seed), family])
    if done is not None:
        raise ConfigError("model", f"building the tiny {family} failed:\n{done.stderr[-2000:]}")
    return target
