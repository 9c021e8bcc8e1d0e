"""The pipeline's layers: the sending side never imports the judge (nor the orchestration that
asks it), and the judge never imports the probe, so it stays a function of the verdict file."""

from __future__ import annotations

import subprocess
import sys

import pytest

_IMPORTED = """
import importlib, pkgutil, sys
import batchprobe.{package} as package
for info in pkgutil.iter_modules(package.__path__):
    importlib.import_module(f"batchprobe.{package}." + info.name)
print(" ".join(sorted(m for m in sys.modules if m.startswith("batchprobe."))))
"""


def _imported(package: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", _IMPORTED.format(package=package)],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize(("package", "never"), [
    ("send", ("batchprobe.judge", "batchprobe.probe")),
    ("judge", ("batchprobe.probe", "batchprobe.send", "batchprobe.engines")),
])
def test_a_layer_never_imports_what_comes_after_it(package: str, never: tuple[str, ...]) -> None:
    imported = _imported(package)
    assert len([m for m in imported if m.startswith(f"batchprobe.{package}.")]) >= 8
    assert not sorted(m for m in imported if m.startswith(never))
