"""``bridge doctor``: is this repository ready to send (or serve) bridge requests?"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from batchprobe.bridge.git import check_remote_name, git
from batchprobe.bridge.gitbus import BRANCH_PREFIX, REQUEST_PATH
from batchprobe.bridge.params import PathParam
from batchprobe.bridge.presets import PRESETS, Preset
from batchprobe.bridge.workflow import WORKFLOW_MARKER, WORKFLOW_PATH, job_timeout_minutes
from batchprobe.errors import BatchprobeError, BridgeError

__all__ = ["Check", "doctor"]


class Check(BaseModel):
    """One finding. ``info`` findings never fail the doctor."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    status: Literal["ok", "fail", "info"]
    detail: str


def _remote(repo: Path, remote: str) -> Check:
    url = git(repo, "remote", "get-url", check_remote_name(remote))
    return Check(name="remote", status="ok", detail=f"{remote} is {url}")


def _push_rights(repo: Path, remote: str) -> Check:
    probe = f"refs/heads/{BRANCH_PREFIX}doctor-{secrets.token_hex(8)}"
    git(repo, "push", "--dry-run", "--quiet", remote, f"HEAD:{probe}")
    return Check(name="push", status="ok", detail=f"a dry-run push to {remote} is accepted")


def _workflow(repo: Path) -> Check:
    top = Path(git(repo, "rev-parse", "--show-toplevel"))
    path = top / WORKFLOW_PATH
    if not path.is_file():
        raise BridgeError(f"{WORKFLOW_PATH} is missing; run `batchprobe bridge init-workflow`")
    text = path.read_text(encoding="utf-8")
    needed = (WORKFLOW_MARKER, f'"{BRANCH_PREFIX}**"', REQUEST_PATH, "cancel-in-progress: false")
    missing = [piece for piece in needed if piece not in text]
    if missing:
        raise BridgeError(f"{WORKFLOW_PATH} lacks {missing}; regenerate it with init-workflow")
    found = re.search(r"timeout-minutes: (\d+)", text)
    minutes = int(found.group(1)) if found else 0
    if minutes < job_timeout_minutes():
        raise BridgeError(
            f"{WORKFLOW_PATH} job timeout {minutes} min is below {job_timeout_minutes()} min "
            "(longest preset plus setup); regenerate it with init-workflow"
        )
    return Check(name="workflow", status="ok", detail=f"{WORKFLOW_PATH} is current")


def _preset_check(preset: Preset, env: Mapping[str, str]) -> Check:
    try:
        preset.render(preset.validate_params(_sample_params(preset)), None)
    except (BatchprobeError, ValidationError, KeyError) as exc:
        return Check(name=f"preset {preset.name}", status="fail", detail=str(exc))
    missing = [name for name in preset.env_names() if not env.get(name)]
    where = f"; here {', '.join(missing)} unset (needed on the runner)" if missing else ""
    return Check(
        name=f"preset {preset.name}", status="info" if missing else "ok", detail=f"valid{where}"
    )


def _sample_params(preset: Preset) -> dict[str, str]:
    """Defaults, plus the prefix itself for path parameters that have none."""
    sample: dict[str, str] = {}
    for key, spec in preset.params.items():
        if spec.default_text() is None and isinstance(spec, PathParam):
            sample[key] = spec.prefix
    return sample


def doctor(repo: Path, *, remote: str = "origin", env: Mapping[str, str]) -> list[Check]:
    """Every check, each ok/fail/info; git and file problems become ``fail`` findings."""
    steps: list[tuple[str, Callable[[], Check]]] = [
        ("remote", lambda: _remote(repo, remote)),
        ("push", lambda: _push_rights(repo, remote)),
        ("workflow", lambda: _workflow(repo)),
    ]
    checks: list[Check] = []
    for name, step in steps:
        try:
            checks.append(step())
        except BridgeError as exc:
            checks.append(Check(name=name, status="fail", detail=str(exc)))
    checks.extend(_preset_check(preset, env) for preset in PRESETS.values())
    return checks
