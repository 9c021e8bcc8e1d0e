"""Folders that fail writes the way real ones do: a full disk and a read-only filesystem.

Both are small tmpfs mounts (the tests run as root, as CI does on Linux, and root ignores
permission bits, so a chmod'ed folder proves nothing). Where mounting is not allowed, the
same errors come from elsewhere: ``/dev/full`` answers every write with ENOSPC, and a
read-only folder is faked by making the atomic helper's open fail with EROFS.
"""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

NO_MOUNT_ENV = "BATCHPROBE_TEST_NO_MOUNT"  # set it to exercise the fallbacks where mount works


def _mount(folder: Path, options: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    if os.environ.get(NO_MOUNT_ENV):
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True, check=False)
    return done.returncode == 0


def _umount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def fill(folder: Path) -> None:
    """Use up every free byte of the filesystem holding ``folder``."""
    with (folder / f"filler-{uuid.uuid4().hex}").open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


def _dev_full_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every atomic write's data goes to /dev/full (ENOSPC), the fallback of a full disk."""
    from batchprobe import files

    real_open = os.open

    def open_full(path: object, flags: int, mode: int = 0o777) -> int:
        if Path(str(path)).name.endswith(".tmp"):
            os.close(real_open(path, flags, mode))  # type: ignore[arg-type]
            return real_open("/dev/full", os.O_WRONLY)
        return real_open(path, flags, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(files.os, "open", open_full)


def _read_only_writes(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Every open for writing in ``folder`` fails with EROFS, the fallback of a read-only mount."""
    import builtins
    import io

    real_open, real_io_open = os.open, io.open
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | getattr(os, "O_TMPFILE", 0)

    def refuse(path: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    def in_folder(path: object) -> bool:
        candidate = Path(os.fsdecode(path))  # type: ignore[arg-type]
        return candidate == folder or candidate.parent == folder

    def os_open(path: object, flags: int, mode: int = 0o777, **kw: object) -> int:
        if flags & writing and in_folder(path):
            refuse(path)
        return real_open(path, flags, mode, **kw)  # type: ignore[arg-type]

    def io_open(file: object, mode: str = "r", *args: object, **kw: object) -> object:
        if isinstance(file, (str, bytes, os.PathLike)) and set(mode) & set("wax+") \
                and in_folder(file):
            refuse(file)
        return real_io_open(file, mode, *args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(io, "open", io_open)
    monkeypatch.setattr(builtins, "open", io_open)


class FullDisk:
    """A folder on a 256 KiB tmpfs; :meth:`fill` uses up its space (or, where nothing can be
    mounted, sends every atomic write to /dev/full)."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch, mounted: bool) -> None:
        self.path = path
        self._monkeypatch = monkeypatch
        self._mounted = mounted

    def fill(self) -> None:
        if self._mounted:
            fill(self.path)
        else:
            _dev_full_writes(self._monkeypatch)


@contextmanager
def full_disk(base: Path, monkeypatch: pytest.MonkeyPatch, *, filled: bool = True
              ) -> Iterator[FullDisk]:
    """A :class:`FullDisk`, already full unless ``filled`` is false."""
    folder = base / "full"
    mounted = _mount(folder, "size=256k")
    disk = FullDisk(folder, monkeypatch, mounted)
    try:
        if filled:
            disk.fill()
        yield disk
    finally:
        if mounted:
            _umount(folder)


@contextmanager
def read_only_folder(base: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on a read-only tmpfs."""
    folder = base / "ro"
    if not _mount(folder, "ro,size=64k"):
        _read_only_writes(monkeypatch, folder)
        yield folder
        return
    try:
        yield folder
    finally:
        _umount(folder)
