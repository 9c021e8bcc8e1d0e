"""How a launcher applies patches inside an engine process.

Put ``shim_dir()`` first on the engine's PYTHONPATH and add ``shim_env(names)`` to its
environment: Python then runs the ``sitecustomize`` module found there at start-up, which
applies each named patch as soon as the module it targets is imported and re-applies it after
the engine's own competing patch runs. In a process without the patched library it does
nothing.
"""

from __future__ import annotations

from pathlib import Path

from batchprobe.patches.registry import get_patch

__all__ = ["PATCHES_ENV", "shim_dir", "shim_env"]

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
