"""One way to build a model folder with a script: into a staging folder beside the target,
renamed over it only when the script succeeded, so no half-written model is ever found."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from batchprobe.errors import ConfigError


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
    for written in staging.iterdir():
        written.chmod(0o644)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return None
