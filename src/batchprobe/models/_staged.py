"""One way to build a model folder with a script: into a staging folder beside the target,
renamed over it only when the script succeeded, so no half-written model is ever found; and
one way to keep such a folder in the cache, rebuilt when a file of it went missing or changed
size (a truncated copy, a file deleted by hand)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from batchprobe.engines._envs import _locked
from batchprobe.errors import ConfigError

MANIFEST = ".batchprobe-files.json"
"""Written last into a finished folder: each file's name and size."""


def check_space(folder: Path, needed: int, what: str) -> None:
    """ConfigError("cache") when ``folder`` (created if missing) has less than ``needed`` free."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise ConfigError(
            "cache",
            f"{folder} has {free // 2**20} MiB free; {what} needs {needed // 2**20} MiB "
            "(free some space or set BATCHPROBE_CACHE_DIR)",
        )


def run_into(target: Path, argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    """Run ``argv`` with a staging folder as its last argument; on success the folder's files
    become world-readable and the folder replaces ``target`` (None is returned). On failure
    the staging folder is removed, ``target`` is untouched, and the finished process is
    returned for the caller to name the error."""
    staging = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    done = subprocess.run(
        [*argv, str(staging)],
        check=False, capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        return done
    sizes = {}
    for written in sorted(staging.iterdir()):
        written.chmod(0o644)
        sizes[written.name] = written.stat().st_size
    (staging / MANIFEST).write_text(json.dumps(sizes, indent=1))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return None


def damage(folder: Path) -> str | None:
    """What is wrong with a folder ``run_into`` wrote (None: complete as written)."""
    try:
        sizes = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return "it was never finished" if folder.exists() else "it is not built"
    except (OSError, ValueError) as exc:
        return f"its file list is unreadable ({exc})"
    for name, size in sizes.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} has {path.stat().st_size} bytes, {size} written"
    return None


def cached(target: Path, cache: Path, build: Callable[[Path], object]) -> Path:
    """``target`` in ``cache``, built by ``build(target)`` on first use and again whenever
    :func:`damage` finds it damaged, under a lock, once."""
    if damage(target) is None:
        return target
    with _locked(cache, target.name):
        if damage(target) is not None:
            build(target)
    return target
