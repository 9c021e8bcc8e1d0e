"""The model-tools environment: the python that unpacks GGUFs into checkpoints and builds the
tiny task models.

Like an engine's environment it lives in the cache, is keyed by a hash of its recipe (so a
changed pin builds a new one beside the old), is built under a file lock and counts as
installed only when its marker, written last, exists. batchprobe itself needs none of these
packages. Fresh cost here: 39 s measured, on loaded cores.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

from batchprobe.engines._envs import MARKER, InstallMarker, _build_venv, _locked, read_marker
from batchprobe.files import write_atomic
from batchprobe.paths import cache_dir as default_cache_dir

NAME = "model-tools"
REQUIREMENTS = (
    "gguf==0.19.0",
    "numpy==2.4.6",
    "safetensors==0.8.0",
    "scipy==1.17.1",
    "tokenizers==0.23.3",
)
STEPS = (("{python}", "-m", "pip", "install", "--quiet", *REQUIREMENTS),)


def recipe_hash() -> str:
    return hashlib.sha256("\n".join(REQUIREMENTS).encode()).hexdigest()[:12]


def tools_python(cache_dir: Path | None = None) -> Path:
    """The environment's python, built on first use."""
    cache = default_cache_dir(cache_dir)
    root = cache / "envs" / f"{NAME}-{recipe_hash()}"
    python = root / "bin" / "python"
    with _locked(cache, root.name):
        if read_marker(root) is not None:
            return python
        logs = cache / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"install-{root.name}.log"
        log.write_text("")
        shutil.rmtree(root, ignore_errors=True)  # no marker: a half-finished build
        started = time.monotonic()
        _build_venv(root, STEPS, log, lambda _: None)
        marker = InstallMarker(
            name=NAME,
            version=recipe_hash(),
            seconds=round(time.monotonic() - started, 1),
            steps=[list(s) for s in STEPS],
        )
        write_atomic(root / MARKER, marker.model_dump_json(indent=2))
    return python
