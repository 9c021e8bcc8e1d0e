"""Which of the run's patches took effect, from what the shim logged in each engine process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from batchprobe.patches import get_patch, patch_outcomes
from batchprobe.results.models import Report


def _lines(paths: list[Path]) -> Iterator[str]:
    for path in paths:
        try:
            with path.open(encoding="utf-8", errors="replace") as log:
                yield from log
        except FileNotFoundError:
            continue


def record_patches(report: Report) -> list[str]:
    """Set ``patches_applied`` to the patches an engine process of the run says it applied;
    returns a warning for each one asked for that changed nothing (why is in the engine's log)."""
    asked = report.config.patches
    logs = [Path(arm.log_path) for arm in report.arms if arm.log_path]
    if not asked or not logs:
        report.patches_applied = []
        return []
    outcomes = patch_outcomes(asked, _lines(logs))
    report.patches_applied = [name for name, how in outcomes.items() if how == "applied"]
    where = ", ".join(str(p) for p in dict.fromkeys(logs))
    warnings = []
    for name, how in outcomes.items():
        if how == "not applied":
            warnings.append(
                f"patch {name} did not apply in the engine, so it changed nothing (why: {where})")
        elif how == "not reached":
            warnings.append(f"patch {name} changed nothing: the engine never loaded the code it "
                            f"patches (it needs {get_patch(name).requires})")
    return warnings
