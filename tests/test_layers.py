"""The pipeline's layers: the sending side never imports the judge (nor the orchestration that
asks it), the judge never imports the probe, so it stays a function of the verdict file, and
no two modules of the orchestration import each other (the sweep and the pressure wave share
the run's state, not the run)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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


def _imports(module: Path, package: str) -> set[str]:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    return {n.module.rsplit(".", 1)[-1] for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(f"{package}.")}


def test_no_import_circle_in_the_orchestration() -> None:
    folder = Path(__file__).parents[1] / "src" / "batchprobe" / "probe"
    graph = {m.stem: _imports(m, "batchprobe.probe") for m in folder.glob("*.py")}
    assert {"run", "sweep_run", "state", "pressure"} <= set(graph)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n}))
                   for n in graph.get(start, set()))

    circles = sorted(m for m in graph if m != "__init__" and reaches(m, m, {m}))
    assert not circles
