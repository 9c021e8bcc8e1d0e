"""A local model named by the user, checked before any engine loads it, so that a truncated or
corrupt checkpoint is one line naming its file instead of an engine's traceback:

- a folder batchprobe built (it holds the file list ``run_into`` wrote) still has every file
  at the size it was written;
- every ``*.safetensors`` file's header reads as JSON and its tensors end inside the file;
- every ``*.gguf`` file starts with the GGUF magic.

Only the headers are read: a checkpoint of many gigabytes is checked in milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path

from batchprobe.errors import ConfigError
from batchprobe.models._staged import MANIFEST, damage

GGUF_MAGIC = b"GGUF"
MAX_HEADER = 100 * 2**20
"""The largest safetensors header read (the format's own limit)."""


def check_local_model(path: Path) -> None:
    """ConfigError("model") naming the first file of ``path`` (a file or a folder) that is
    truncated or not what its name says."""
    if path.is_dir() and (path / MANIFEST).exists() and (problem := damage(path)) is not None:
        raise ConfigError("model", f"{path} is incomplete: {problem}; build it again")
    files = sorted(path.glob("*.safetensors")) + sorted(path.glob("*.gguf")) if path.is_dir() else [path]
    for file in files:
        problem = _problem(file)
        if problem is not None:
            raise ConfigError("model", f"{file} {problem}")


def _problem(file: Path) -> str | None:
    if file.suffix == ".safetensors":
        return _safetensors_problem(file)
    if file.suffix == ".gguf":
        with file.open("rb") as handle:
            head = handle.read(len(GGUF_MAGIC))
        return None if head == GGUF_MAGIC else f"is not a GGUF file (it starts with {head!r})"
    return None


def _safetensors_problem(file: Path) -> str | None:
    size = file.stat().st_size
    with file.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            return f"is truncated: {size} bytes, shorter than a safetensors header"
        length = int.from_bytes(prefix, "little")
        if length > min(size - 8, MAX_HEADER):
            return (f"is truncated or not safetensors: its header says {length} bytes, the "
                    f"file has {size}")
        try:
            header = json.loads(handle.read(length))
        except (UnicodeDecodeError, ValueError):
            return "is corrupt: its safetensors header is not JSON"
    end = _data_end(header)
    if end is None:
        return "is corrupt: its safetensors header does not list tensors with data offsets"
    if 8 + length + end > size:
        return f"is truncated: its tensors end at byte {8 + length + end}, the file has {size}"
    return None


def _data_end(header: object) -> int | None:
    """Where the last tensor's data ends, past the header; None for a header of another shape."""
    if not isinstance(header, dict):
        return None
    end = 0
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(x, int) for x in offsets)):
            return None
        end = max(end, offsets[1])
    return end
