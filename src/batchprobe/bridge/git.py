"""Git, driven through argv lists only, and commits made without touching a work tree.

``commit_files`` builds a commit with plumbing (a throwaway index file, ``hash-object``,
``write-tree``, ``commit-tree``), so the user's work tree, index and current branch are
exactly as they were found.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from batchprobe.errors import BridgeError

__all__ = ["GIT_TIMEOUT_S", "check_remote_name", "commit_files", "git", "git_bytes"]

GIT_TIMEOUT_S = 300.0
_REMOTE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def git_bytes(
    repo: Path, *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> bytes:
    """Run ``git -C repo ARGS`` and return stdout; BridgeError with git's own words on failure."""
    argv = ["git", "-C", str(repo), *args]
    # Never wait for a password prompt: a bridge command must fail, not hang.
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    try:
        done = subprocess.run(
            argv, input=stdin, capture_output=True, env=full_env, timeout=GIT_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except FileNotFoundError as exc:
        raise BridgeError("git is not installed (or not on PATH)") from exc
    except subprocess.TimeoutExpired as exc:
        raise BridgeError(f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        detail = lines[-1] if lines else f"exit {done.returncode}"
        raise BridgeError(f"git {args[0]} failed: {detail}")
    return done.stdout


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """Like ``git_bytes`` but decoded and stripped."""
    return git_bytes(repo, *args, env=env).decode(errors="replace").strip()


def check_remote_name(remote: str) -> str:
    """A remote name that git cannot mistake for an option."""
    if _REMOTE.fullmatch(remote) is None:
        raise BridgeError(f"remote {remote!r} is not a plain remote name (letters, digits, _ . -)")
    return remote


def commit_files(
    repo: Path,
    parent: str,
    files: Mapping[str, bytes],
    *,
    drop: str,
    message: str,
    env: Mapping[str, str] | None = None,
) -> str:
    """A commit on ``parent`` whose tree drops everything under ``drop`` and adds ``files``.

    Returns the new commit id; no ref, index or work tree of the repository changes.
    """
    with tempfile.TemporaryDirectory(prefix="batchprobe-bridge-") as scratch:
        index_env = {**(env or {}), "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(repo, "read-tree", parent, env=index_env)
        stale = git_bytes(repo, "ls-files", "-z", "--", drop, env=index_env)
        if stale:
            git_bytes(
                repo, "update-index", "--force-remove", "-z", "--stdin", env=index_env, stdin=stale
            )
        entries = bytearray()
        for path, content in sorted(files.items()):
            blob = git_bytes(repo, "hash-object", "-w", "--stdin", stdin=content).decode().strip()
            entries += f"100644 {blob}\t{path}".encode() + b"\0"
        git_bytes(
            repo, "update-index", "--add", "-z", "--index-info", env=index_env, stdin=bytes(entries)
        )
        tree = git(repo, "write-tree", env=index_env)
    return git(repo, "commit-tree", tree, "-p", parent, "-m", message, env=env)
