"""The git bus: a request is a branch carrying a manifest; results come back on it.

Client: ``request`` pushes ``batchprobe-bridge/<preset>-<nonce>`` with the manifest at
``.batchprobe-bridge/request.json``; ``check``/``wait_for_results``/``fetch_results``
poll the branch with ``git fetch`` until the runner's results commit appears.
Runner: ``publish_results`` commits ``.batchprobe-bridge/results/`` back and pushes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from batchprobe.bridge.git import check_remote_name, commit_files, git, git_bytes
from batchprobe.bridge.manifest import Manifest, new_manifest
from batchprobe.bridge.summary import SUMMARY_NAME, Summary, read_summary, write_summary
from batchprobe.errors import BridgeError

__all__ = [
    "BRANCH_PREFIX",
    "REQUEST_PATH",
    "RESULTS_PATH",
    "BranchState",
    "Receipt",
    "branch_name",
    "check",
    "check_branch",
    "fetch_results",
    "publish_results",
    "request",
    "wait_for_results",
]

BRIDGE_DIR = ".batchprobe-bridge"
REQUEST_PATH = f"{BRIDGE_DIR}/request.json"
RESULTS_PATH = f"{BRIDGE_DIR}/results"
BRANCH_PREFIX = "batchprobe-bridge/"
_BRANCH = re.compile(r"batchprobe-bridge/[a-z][a-z0-9-]{1,40}-[0-9a-f]{16}")
_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}")
# Results commits carry a fixed identity: the runner's machine may have none configured.
RUNNER_IDENTITY = {
    "GIT_AUTHOR_NAME": "batchprobe-bridge",
    "GIT_AUTHOR_EMAIL": "batchprobe-bridge@localhost",
    "GIT_COMMITTER_NAME": "batchprobe-bridge",
    "GIT_COMMITTER_EMAIL": "batchprobe-bridge@localhost",
}


class Receipt(BaseModel):
    """What ``request`` pushed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    branch: str
    commit: str
    remote: str
    manifest: Manifest


class BranchState(BaseModel):
    """A request branch as last fetched: still pending, or done with its summary."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    branch: str
    commit: str
    state: Literal["pending", "done"]
    summary: Summary | None = None


def branch_name(manifest: Manifest) -> str:
    return f"{BRANCH_PREFIX}{manifest.preset}-{manifest.nonce}"


def check_branch(branch: str) -> str:
    """A request branch name, or BridgeError saying what one looks like."""
    if _BRANCH.fullmatch(branch) is None:
        raise BridgeError(
            f"branch {branch[:80]!r} is not a request branch (batchprobe-bridge/<preset>-<16 hex>)"
        )
    return branch


def _resolve_commit(repo: Path, ref: str) -> str:
    if _REF.fullmatch(ref) is None or ".." in ref:
        raise BridgeError(f"ref {ref[:80]!r} is not a plain branch, tag or commit name")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except BridgeError as exc:
        raise BridgeError(f"ref {ref!r} does not name a commit in {repo}") from exc


def _identity(repo: Path) -> str:
    # "Name <email> timestamp zone": the requester as git would record them.
    ident = git(repo, "var", "GIT_AUTHOR_IDENT")
    return ident.rsplit(" ", 2)[0]


def request(
    repo: Path,
    preset: str,
    params: Mapping[str, str],
    *,
    remote: str = "origin",
    ref: str | None = None,
) -> Receipt:
    """Validate, commit the manifest on a new request branch, push it. Touches no work tree."""
    check_remote_name(remote)
    base = _resolve_commit(repo, ref or "HEAD")
    manifest = new_manifest(preset, params, ref=base, requested_by=_identity(repo))
    branch = branch_name(manifest)
    content = (manifest.model_dump_json(indent=2) + "\n").encode()
    commit = commit_files(
        repo, base, {REQUEST_PATH: content}, drop=BRIDGE_DIR,
        message=f"batchprobe-bridge: request {manifest.preset} ({manifest.nonce})",
    )  # fmt: skip
    # An empty old value makes update-ref refuse to overwrite an existing branch.
    git(repo, "update-ref", f"refs/heads/{branch}", commit, "")
    git(repo, "push", "--quiet", remote, f"{commit}:refs/heads/{branch}")
    return Receipt(branch=branch, commit=commit, remote=remote, manifest=manifest)


def check(repo: Path, branch: str, *, remote: str = "origin") -> BranchState:
    """Fetch the request branch once and say whether its results have arrived."""
    check_branch(branch)
    check_remote_name(remote)
    tracking = f"refs/remotes/{remote}/{branch}"
    try:
        git(repo, "fetch", "--quiet", "--no-tags", remote, f"+refs/heads/{branch}:{tracking}")
    except BridgeError as exc:
        raise BridgeError(f"cannot fetch {branch} from {remote}: {exc}") from exc
    commit = git(repo, "rev-parse", "--verify", "--quiet", f"{tracking}^{{commit}}")
    summary_path = f"{RESULTS_PATH}/{SUMMARY_NAME}"
    if not git(repo, "ls-tree", "--name-only", commit, "--", summary_path):
        return BranchState(branch=branch, commit=commit, state="pending")
    raw = git_bytes(repo, "cat-file", "blob", f"{commit}:{summary_path}")
    summary = read_summary(raw, f"{summary_path} on {branch}")
    return BranchState(branch=branch, commit=commit, state="done", summary=summary)


def wait_for_results(
    repo: Path,
    branch: str,
    *,
    remote: str = "origin",
    wait_s: float = 0.0,
    interval_s: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> BranchState:
    """Poll ``check`` until the results are there or ``wait_s`` has passed."""
    deadline = time.monotonic() + wait_s
    state = check(repo, branch, remote=remote)
    while state.state == "pending" and time.monotonic() < deadline:
        sleep(max(0.0, min(interval_s, deadline - time.monotonic())))
        state = check(repo, branch, remote=remote)
    return state


def fetch_results(repo: Path, state: BranchState, dest: Path) -> list[Path]:
    """Copy the results tree of a done request into ``dest``; return the files written."""
    if state.state != "done":
        raise BridgeError(f"{state.branch} has no results yet")
    listing = git_bytes(
        repo, "ls-tree", "-r", "-z", "--name-only", state.commit, "--", RESULTS_PATH
    )
    root = dest.resolve()
    written: list[Path] = []
    for name in filter(None, listing.decode().split("\0")):
        target = (root / name.removeprefix(RESULTS_PATH + "/")).resolve()
        if root not in target.parents:
            raise BridgeError(f"result path {name!r} would leave {dest}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(git_bytes(repo, "cat-file", "blob", f"{state.commit}:{name}"))
        written.append(target)
    return written


def _result_files(results_dir: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for path in sorted(results_dir.rglob("*")):
        # Plain files only: a symlink could smuggle a file from elsewhere on the runner.
        if path.is_file() and not path.is_symlink():
            files[f"{RESULTS_PATH}/{path.relative_to(results_dir).as_posix()}"] = path.read_bytes()
    return files


def publish_results(repo: Path, results_dir: Path, branch: str, *, remote: str = "origin") -> str:
    """Commit ``results_dir`` to ``branch`` as ``.batchprobe-bridge/results/`` and push it.

    When the executor never ran (an earlier workflow step failed), a ``not_run`` summary is
    written first so the client still learns that, and why to look at the workflow log.
    """
    check_branch(branch)
    check_remote_name(remote)
    if not (results_dir / SUMMARY_NAME).is_file():
        stamp = datetime.now(timezone.utc)
        write_summary(
            results_dir,
            Summary(
                status="not_run", started_at=stamp, finished_at=stamp,
                error="the executor did not run; see the workflow log",
            ),
        )  # fmt: skip
    parent = git(repo, "rev-parse", "--verify", "HEAD^{commit}")
    summary = read_summary((results_dir / SUMMARY_NAME).read_bytes(), str(results_dir))
    commit = commit_files(
        repo, parent, _result_files(results_dir), drop=RESULTS_PATH, env=RUNNER_IDENTITY,
        message=f"batchprobe-bridge: results ({summary.status}) for {branch}",
    )  # fmt: skip
    git(repo, "push", "--quiet", remote, f"{commit}:refs/heads/{branch}")
    return commit
