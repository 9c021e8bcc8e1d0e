"""How a launcher applies patches inside an engine process.

Put ``shim_dir()`` first on the engine's PYTHONPATH and add ``shim_env(names)`` to its
environment: Python then runs the ``sitecustomize`` module found there at start-up, which
applies each named patch as soon as the module it targets is imported and re-applies it after
the engine's own competing patch runs. In a process without the patched library it does
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from batchprobe.patches.registry import get_patch

__all__ = ["PATCHES_ENV", "PatchOutcome", "patch_outcomes", "shim_dir", "shim_env"]

PATCHES_ENV = "BATCHPROBE_PATCHES"


def shim_dir() -> Path:
    """The directory holding the ``sitecustomize.py`` shim (shipped inside batchprobe)."""
    return Path(__file__).resolve().parent / "_sitedir"


def shim_env(names: list[str]) -> dict[str, str]:
    """Environment variables that tell the shim which patches to apply.

    Validates every name (ConfigError naming the known patches). PYTHONPATH is not included:
    the launcher prepends ``shim_dir()`` to whatever PYTHONPATH the engine already has.
    """
    checked = [get_patch(name).name for name in names]
    return {PATCHES_ENV: ",".join(dict.fromkeys(checked))} if checked else {}


PatchOutcome = Literal["applied", "not applied", "not reached"]
# The lines the shim logs when a patch's target is first imported (sitecustomize.py's
# ``_apply_logged``; it runs without batchprobe, so it cannot import these).
_OUTCOME = re.compile(r"batchprobe shim: (?P<name>[\w-]+) (?P<how>applied|did not apply)\b")


def patch_outcomes(names: Iterable[str], lines: Iterable[str]) -> dict[str, PatchOutcome]:
    """How each patch of ``names`` fared in the engine processes whose log ``lines`` are:
    ``applied`` when a process says so, ``not applied`` when one tried and none applied it,
    ``not reached`` when none imported its target (it changed nothing)."""
    seen: dict[str, set[str]] = {name: set() for name in names}
    for line in lines:
        if "batchprobe shim: " not in line:
            continue
        for match in _OUTCOME.finditer(line):
            if match["name"] in seen:
                seen[match["name"]].add(match["how"])
    return {
        name: "applied" if "applied" in hows else "not applied" if hows else "not reached"
        for name, hows in seen.items()
    }
