"""batchprobe: is an LLM engine's continuous batching both parallel and correct?"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
