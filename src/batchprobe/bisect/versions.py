"""Which released versions lie between two: from the package index, or given."""

from __future__ import annotations

import re
import subprocess
import sys

from packaging.version import InvalidVersion, Version

from batchprobe.errors import ConfigError, EngineInstallFailed

_AVAILABLE = re.compile(r"^Available versions:\s*(.*)$", re.MULTILINE)
INDEX_TIMEOUT_S = 120.0


def parse_version(field: str, text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion as exc:
        raise ConfigError(field, f"{text!r} is not a version (e.g. 0.4.0)") from exc


def index_versions(package: str) -> list[str]:
    """Every release of ``package`` the package index lists (pip's own index settings)."""
    argv = [sys.executable, "-m", "pip", "index", "versions", package, "--pre"]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=INDEX_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineInstallFailed(f"cannot ask the package index for {package}: {exc}") from exc
    found = _AVAILABLE.search(done.stdout)
    if done.returncode != 0 or found is None:
        detail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineInstallFailed(f"the package index lists no versions of {package}: {detail}")
    return [v.strip() for v in found.group(1).split(",") if v.strip()]


def between(released: list[str], good: str, bad: str) -> list[str]:
    """The versions from the older end to the newer, both ends included, sorted; releases
    that do not parse are left out, and pre-releases unless an end is one."""
    ends = {parse_version("good", good): good, parse_version("bad", bad): bad}
    if len(ends) == 1:
        raise ConfigError("bad", f"is the same version as --good ({good}); give two versions")
    low, high = min(ends), max(ends)
    pre = low.is_prerelease or high.is_prerelease
    picked = dict(ends)
    for text in released:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if low < version < high and (pre or not version.is_prerelease):
            picked.setdefault(version, text)
    return [picked[v] for v in sorted(picked)]
