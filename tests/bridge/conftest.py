"""Fixtures for the bridge: local bare remotes and clones with a git identity from env vars."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .gitutil import run_git

IDENTITY = {
    "GIT_AUTHOR_NAME": "Bridge Tester",
    "GIT_AUTHOR_EMAIL": "tester@example.org",
    "GIT_COMMITTER_NAME": "Bridge Tester",
    "GIT_COMMITTER_EMAIL": "tester@example.org",
}


@pytest.fixture(autouse=True)
def git_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No global or system git config, a fixed identity: passes on a bare machine."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(bare)], check=True)
    return bare


@pytest.fixture
def clone(tmp_path: Path, remote: Path) -> Path:
    """A user's clone with one commit pushed to ``remote``."""
    work = tmp_path / "work"
    subprocess.run(
        ["git", "clone", "--quiet", str(remote), str(work)], check=True, capture_output=True
    )
    run_git(work, "checkout", "--quiet", "-b", "main")
    (work / "tests").mkdir()
    (work / "tests" / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    (work / "README").write_text("hello\n")
    run_git(work, "add", ".")
    run_git(work, "commit", "--quiet", "-m", "initial")
    run_git(work, "push", "--quiet", "origin", "main")
    return work
