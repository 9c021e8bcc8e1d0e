"""The git bus over a local bare remote: request, publish, status, fetch."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from batchprobe.bridge.git import check_remote_name, git
from batchprobe.bridge.gitbus import (
    REQUEST_PATH,
    RESULTS_PATH,
    check,
    check_branch,
    fetch_results,
    publish_results,
    request,
    wait_for_results,
)
from batchprobe.bridge.summary import SUMMARY_NAME
from batchprobe.errors import BridgeError

from .gitutil import run_git


def _snapshot(repo: Path) -> dict[str, str]:
    """Everything a request must leave alone: HEAD, branch, index, work tree state."""
    index = (repo / ".git" / "index").read_bytes()
    return {
        "head": run_git(repo, "rev-parse", "HEAD"),
        "branch": run_git(repo, "symbolic-ref", "HEAD"),
        "index": hashlib.sha256(index).hexdigest(),
        "status": run_git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        "diff": run_git(repo, "diff"),
        "cached": run_git(repo, "diff", "--cached"),
        "readme": (repo / "README").read_text(),
    }


def _dirty(repo: Path) -> None:
    (repo / "README").write_text("edited, not staged\n")
    (repo / "staged.txt").write_text("staged\n")
    run_git(repo, "add", "staged.txt")
    (repo / "untracked.txt").write_text("untracked\n")


def test_request_pushes_a_branch_and_leaves_the_work_tree_alone(clone: Path, remote: Path) -> None:
    _dirty(clone)
    before = _snapshot(clone)
    receipt = request(clone, "pytest-path", {"path": "tests/test_ok.py"})
    assert _snapshot(clone) == before
    assert receipt.branch == f"batchprobe-bridge/pytest-path-{receipt.manifest.nonce}"
    pushed = run_git(remote, "rev-parse", f"refs/heads/{receipt.branch}")
    assert pushed == receipt.commit
    manifest = json.loads(run_git(remote, "show", f"{receipt.commit}:{REQUEST_PATH}"))
    assert manifest["params"] == {"path": "tests/test_ok.py"}
    assert manifest["ref"] == before["head"]
    assert manifest["requested_by"] == "Bridge Tester <tester@example.org>"
    # The request commit sits on the user's HEAD and adds only the manifest.
    assert run_git(remote, "rev-parse", f"{receipt.commit}^") == before["head"]
    changed = run_git(remote, "diff-tree", "--no-commit-id", "--name-only", "-r", receipt.commit)
    assert changed.splitlines() == [REQUEST_PATH]
    assert run_git(clone, "rev-parse", f"refs/heads/{receipt.branch}") == receipt.commit


def test_request_validates_before_touching_git(clone: Path, remote: Path) -> None:
    with pytest.raises(BridgeError, match=r"params.path"):
        request(clone, "pytest-path", {"path": "../etc"})
    assert run_git(remote, "for-each-ref") == run_git(remote, "for-each-ref", "refs/heads/main")


def test_request_from_another_ref_and_bad_refs(clone: Path) -> None:
    first = run_git(clone, "rev-parse", "HEAD")
    (clone / "README").write_text("two\n")
    run_git(clone, "commit", "--quiet", "-am", "second")
    receipt = request(clone, "env-probe", {}, ref=first)
    assert receipt.manifest.ref == first
    with pytest.raises(BridgeError, match="does not name a commit"):
        request(clone, "env-probe", {}, ref="no-such-branch")
    with pytest.raises(BridgeError, match="not a plain"):
        request(clone, "env-probe", {}, ref="--upload-pack=x")
    with pytest.raises(BridgeError, match="not a plain remote"):
        request(clone, "env-probe", {}, remote="-oops")


def test_request_reports_a_push_failure(clone: Path) -> None:
    with pytest.raises(BridgeError, match="git push failed"):
        request(clone, "env-probe", {}, remote="nowhere")


def test_results_round_trip_through_the_remote(clone: Path, remote: Path, tmp_path: Path) -> None:
    receipt = request(clone, "env-probe", {})
    assert check(clone, receipt.branch).state == "pending"
    runner = tmp_path / "runner"
    run_git(tmp_path, "clone", "--quiet", "--branch", receipt.branch, str(remote), str(runner))
    results = tmp_path / "results"
    (results / "logs").mkdir(parents=True)
    (results / "logs" / "00.log").write_text("log\n")
    (results / "env.json").write_text("{}\n")
    (results / "link").symlink_to(tmp_path / "home")  # never published
    summary = {"status": "ok", "preset": "env-probe", "result_paths": ["env.json"],
               "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:01Z"}  # fmt: skip
    (results / SUMMARY_NAME).write_text(json.dumps(summary))
    commit = publish_results(runner, results, receipt.branch)
    assert run_git(remote, "rev-parse", f"refs/heads/{receipt.branch}") == commit
    state = wait_for_results(clone, receipt.branch, wait_s=5, interval_s=0.1)
    assert state.state == "done" and state.summary is not None
    assert state.summary.result_paths == ["env.json"]
    dest = tmp_path / "out"
    files = fetch_results(clone, state, dest)
    assert sorted(p.relative_to(dest).as_posix() for p in files) == [
        "env.json", "logs/00.log", SUMMARY_NAME
    ]  # fmt: skip
    assert (dest / "logs" / "00.log").read_text() == "log\n"


def test_publish_without_a_summary_reports_not_run(
    clone: Path, remote: Path, tmp_path: Path
) -> None:
    receipt = request(clone, "env-probe", {})
    runner = tmp_path / "runner"
    run_git(tmp_path, "clone", "--quiet", "--branch", receipt.branch, str(remote), str(runner))
    publish_results(runner, tmp_path / "empty-results", receipt.branch)
    state = check(clone, receipt.branch)
    assert state.summary is not None and state.summary.status == "not_run"
    assert "workflow log" in (state.summary.error or "")
    # A second publish replaces the first results, it does not pile up.
    (tmp_path / "empty-results" / "x.txt").write_text("x")
    run_git(runner, "pull", "--quiet", "origin", receipt.branch)
    publish_results(runner, tmp_path / "empty-results", receipt.branch)
    listing = run_git(remote, "ls-tree", "-r", "--name-only", receipt.branch, RESULTS_PATH)
    assert listing.splitlines() == [f"{RESULTS_PATH}/{SUMMARY_NAME}", f"{RESULTS_PATH}/x.txt"]


def test_wait_gives_up_after_the_deadline(clone: Path) -> None:
    receipt = request(clone, "env-probe", {})
    naps: list[float] = []
    state = wait_for_results(clone, receipt.branch, wait_s=0.3, interval_s=0.1, sleep=naps.append)
    assert state.state == "pending"
    assert naps and all(0 <= nap <= 0.1 for nap in naps)
    with pytest.raises(BridgeError, match="no results yet"):
        fetch_results(clone, state, Path("unused"))


@pytest.mark.parametrize(
    "branch", ["main", "batchprobe-bridge/x-123", "batchprobe-bridge/env-probe-0123456789abcdeX",
               "-batchprobe-bridge/env-probe-0123456789abcdef", "batchprobe-bridge/../x-0123456789abcdef"],
)  # fmt: skip
def test_only_request_branches_are_accepted(branch: str) -> None:
    with pytest.raises(BridgeError, match="not a request branch"):
        check_branch(branch)


def test_status_of_a_missing_branch_is_an_error(clone: Path) -> None:
    with pytest.raises(BridgeError, match="cannot fetch"):
        check(clone, "batchprobe-bridge/env-probe-0123456789abcdef")


def test_git_errors_carry_gits_words(tmp_path: Path) -> None:
    with pytest.raises(BridgeError, match="git rev-parse failed"):
        git(tmp_path, "rev-parse", "HEAD")
    assert check_remote_name("origin") == "origin"
