"""Atomic file writing: a reader sees the old file or the new one, never half of one.

The one helper for verdicts, summaries, install markers, launch records and assembled
models: a temporary file in the same folder, fsync, rename, fsync of the folder. The new
file gets the mode an ordinary ``open(path, "w")`` would give it (0666 less the umask),
not the 0600 of ``tempfile.mkstemp``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "write_atomic"]

_MODE = 0o666  # the umask applies, as for any file a program creates


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # some platforms cannot open a folder; the rename itself is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``; whatever is written there replaces ``path`` when
    the block ends without an exception (and is removed when it raises)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        yield staging
        if staging.is_file():
            with staging.open("rb+") as handle:
                os.fsync(handle.fileno())
        os.replace(staging, path)
        _fsync_dir(path.parent)
    finally:
        # After the rename this is a no-op; before it, no temporary file is left behind.
        staging.unlink(missing_ok=True)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path) as staging:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
