"""The renderers: one module per output format, looked up by name.

A renderer turns a typed :class:`Report` into one document (``render``) and names the suffix
of the file written beside the verdict. Every lookup builds a fresh registry from the
built-ins, so a third party extends it by building its own :class:`RendererRegistry`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from batchprobe.errors import ConfigError, OutputError
from batchprobe.files import write_atomic
from batchprobe.results.models import Report

BUILTIN_MODULES = (
    "batchprobe.report.console",
    "batchprobe.report.html",
    "batchprobe.report.markdown",
    "batchprobe.report.junit",
    "batchprobe.report.csv",
    "batchprobe.report.jsonl",
)


class Renderer(Protocol):
    name: str
    suffix: str  # the file beside the verdict: verdict.json -> verdict<suffix>

    def render(self, report: Report) -> str: ...


class RendererRegistry:
    def __init__(self, renderers: Iterable[Renderer]) -> None:
        self._renderers = {r.name: r for r in renderers}

    def get(self, name: str) -> Renderer:
        renderer = self._renderers.get(name.strip().lower())
        if renderer is None:
            raise ConfigError("--report", f"unknown format {name!r}; choose from "
                              f"{', '.join(self.names())}")
        return renderer

    def names(self) -> list[str]:
        return sorted(self._renderers)


def builtin_renderers() -> RendererRegistry:
    return RendererRegistry(importlib.import_module(m).RENDERER for m in BUILTIN_MODULES)


def parse_formats(text: str, registry: RendererRegistry | None = None) -> list[Renderer]:
    """``html,md,junit`` -> their renderers (a usage error naming the unknown ones)."""
    registry = registry or builtin_renderers()
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError("--report", f"no format given; choose from {', '.join(registry.names())}")
    return [registry.get(n) for n in names]


def beside(verdict: Path, renderer: Renderer) -> Path:
    """Where a report goes by default: next to the verdict, ``verdict.json`` -> ``verdict.html``."""
    return verdict.with_name(verdict.stem + renderer.suffix)


def write_output(path: Path, text: str) -> Path:
    """Write one output file (a report, a comparison) atomically, in a folder that exists: a
    reader sees the old file or the new one, never half of one. :class:`OutputError` naming
    the path and the reason when it cannot be written (the old file, if any, stays whole)."""
    try:
        write_atomic(path, text, make_parents=False)
    except OSError as exc:
        raise OutputError.from_os(path, exc) from exc
    return path


def write_rendered(report: Report, renderer: Renderer, path: Path) -> Path:
    return write_output(path, renderer.render(report))


def write_beside(report: Report, renderers: Iterable[Renderer], verdict: Path) -> list[Path]:
    """Write each format next to the verdict file; the paths written. Every format is tried:
    one that cannot be written does not stop the others, and the first failure is raised
    (:class:`OutputError`) once all were tried."""
    written: list[Path] = []
    failed: list[OutputError] = []
    for renderer in renderers:
        try:
            written.append(write_rendered(report, renderer, beside(verdict, renderer)))
        except OutputError as exc:
            failed.append(exc)
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise OutputError(first.path, first.reason + more) from first
    return written
