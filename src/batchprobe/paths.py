"""Where batchprobe keeps engine environments, built binaries and models."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "BATCHPROBE_CACHE_DIR"


def cache_dir(override: Path | None = None) -> Path:
    """``override``, else $BATCHPROBE_CACHE_DIR, else ~/.cache/batchprobe (created)."""
    if override is not None:
        root = override
    elif os.environ.get(CACHE_ENV):
        root = Path(os.environ[CACHE_ENV])
    else:
        root = Path.home() / ".cache" / "batchprobe"
    root.mkdir(parents=True, exist_ok=True)
    return root


def huggingface_home() -> Path:
    """Where Hugging Face libraries keep their cache here: $HF_HOME, else its XDG default."""
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "huggingface"
