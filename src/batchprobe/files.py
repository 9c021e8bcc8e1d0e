"""Atomic file writing: a reader sees the old file or the new one, never half of one.

The one helper for every file batchprobe writes whole: verdicts, reports (HTML, markdown,
JUnit, CSV, JSON Lines, console text), comparisons, summaries, install markers, launch
records and assembled models. A temporary file in the same folder, fsync, rename, fsync of the
folder. The new file gets the mode an ordinary ``open(path, "w")`` would give it (0666 less
the umask), not the 0600 of ``tempfile.mkstemp``. (The one file appended to instead,
``$GITHUB_STEP_SUMMARY``, belongs to the CI runner and holds other steps' text.)

The temporary file is ``.NAME.<8 hex>.tmp`` beside the target ``NAME``. A writer killed
between the write and the rename (SIGKILL, the OOM killer, a power cut) leaves it behind;
the next write of the same target removes such leftovers, by this rule:

* only names of exactly that pattern for that target (``.verdict.json.`` + 8 lowercase hex
  digits + ``.tmp``), only plain files (never a link or a folder), only in the target's folder;
* only those not modified for :data:`STALE_AFTER_S` seconds. The name holds no writer pid, and
  a writer that is alive keeps its file fresh: it writes the whole file at once and renames it
  right after its fsync (an assembled model streams its chunks in, then checks them). A
  second writer of the same target within that time keeps the first one's file; a file from
  a clock ahead of this one's is kept too. Removing a leftover is best effort: one that
  cannot be removed stays, and the write goes on.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["STALE_AFTER_S", "atomic_path", "remove_stale", "write_atomic"]

_MODE = 0o666  # the umask applies, as for any file a program creates
STALE_AFTER_S = 30.0
"""A leftover temporary file untouched for this long is a dead writer's (see above)."""


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


def _staging_name(name: str) -> str:
    return f".{name}.{secrets.token_hex(4)}.tmp"


def remove_stale(path: Path, *, now: float | None = None) -> list[Path]:
    """Remove the leftover temporary files of ``path`` (the rule above); those removed."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{8}}\.tmp")
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        if not pattern.fullmatch(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if entry.is_file(follow_symlinks=False) and now - info.st_mtime > STALE_AFTER_S:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue  # gone already, or not ours to remove: the write goes on
    return removed


@contextmanager
def atomic_path(path: Path, *, make_parents: bool = True) -> Iterator[Path]:
    """A temporary path beside ``path``; whatever is written there replaces ``path`` when
    the block ends without an exception (and is removed when it raises).

    ``make_parents`` creates the folder when missing; without it a missing folder is the
    ``FileNotFoundError`` of the first write (an output asked for in a folder that is not
    there). Leftovers of a killed writer of ``path`` are removed first (the rule above)."""
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    staging = path.with_name(_staging_name(path.name))
    try:
        yield staging
        if staging.is_file():
            with staging.open("rb+") as handle:
                os.fsync(handle.fileno())
        os.replace(staging, path)
        _fsync_dir(path.parent)
    finally:
        # After the rename this is a no-op; before it, no temporary file is left behind.
        try:
            staging.unlink(missing_ok=True)
        except OSError:
            pass  # a folder gone read-only: the write's own error is the one to report


def write_atomic(path: Path, data: str | bytes, *, make_parents: bool = True) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path, make_parents=make_parents) as staging:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
