"""batchprobe's start-up shim, run by Python's ``site`` inside an engine process.

Active only when BATCHPROBE_PATCHES names patches (comma-separated). For each name, it loads
``batchprobe/patches/<name with _>.py`` by file path (batchprobe is not installed in the
engine's environment) and uses its three attributes:

    TARGET_MODULE      when this module is first imported, ``apply()`` runs;
    COMPETING_PATCHES  (module, function) pairs: the engine's own patch functions, wrapped so
                       that ``apply()`` runs again after each call and ours wins;
    apply()            applies the patch, returns False when it could not.

Nothing is imported eagerly, so a process that never imports the target (a helper subprocess,
an engine without mlx-vlm) pays nothing and cannot break. Whatever ``sitecustomize`` this one
shadows is run afterwards. Logs go to stderr, which is the engine's log file, under the
"batchprobe" logger only: the engine's own logging configuration is left alone.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

_ENV = "BATCHPROBE_PATCHES"
_HERE = Path(__file__).resolve().parent
_PATCH_DIR = _HERE.parent
_log = logging.getLogger("batchprobe.shim")

Hook = Callable[[ModuleType], None]


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs hooks right after a named module has executed, on its first import."""

    def __init__(self) -> None:
        self._hooks: dict[str, list[Hook]] = {}

    def after(self, module_name: str, hook: Hook) -> None:
        self._hooks.setdefault(module_name, []).append(hook)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        hooks = self._hooks.pop(fullname, None)
        if hooks is None:
            return None
        spec = _find_with_others(self, fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader: Any = spec.loader
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            for hook in hooks:
                hook(module)

        # Loaders from the path finders are made per module, so this touches no other import.
        loader.exec_module = exec_module
        return spec


def _find_with_others(
    me: AfterImport, fullname: str, path: Sequence[str] | None, target: ModuleType | None
) -> importlib.machinery.ModuleSpec | None:
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if finder is me or find_spec is None:
            continue
        spec: importlib.machinery.ModuleSpec | None = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def load_patch(name: str) -> ModuleType | None:
    """The patch module for ``name``, loaded by file path; None (logged) when there is none."""
    stem = name.strip().replace("-", "_")
    source = _PATCH_DIR / f"{stem}.py"
    spec = importlib.util.spec_from_file_location(f"_batchprobe_patch_{stem}", source)
    if not stem.isidentifier() or not source.is_file() or spec is None or spec.loader is None:
        _log.error("batchprobe shim: no patch named %r (looked for %s)", name, source)
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:  # not a patch module: it needs batchprobe's own environment
        _log.error("batchprobe shim: %r is not a loadable patch (%s)", name, exc)
        return None
    if not all(hasattr(module, a) for a in ("apply", "TARGET_MODULE", "COMPETING_PATCHES")):
        _log.error("batchprobe shim: %r is not a patch module", name)
        return None
    return module


def install(name: str, patch: ModuleType, finder: AfterImport) -> None:
    """Arrange for ``patch`` to apply on its target's import and after each competing patch."""
    apply: Callable[[], bool] = patch.apply
    for module_name, function_name in patch.COMPETING_PATCHES:
        finder.after(module_name, functools.partial(_reassert_after, function_name, apply))
    if patch.TARGET_MODULE in sys.modules:
        _apply_logged(name, apply)
    else:
        finder.after(patch.TARGET_MODULE, lambda _module: _apply_logged(name, apply))


def _apply_logged(name: str, apply: Callable[[], bool]) -> None:
    """Apply, and say how it went in the line batchprobe reads back from the engine's log
    (``batchprobe.patches.shim.patch_outcomes``)."""
    if apply():
        _log.info("batchprobe shim: %s applied", name)
    else:
        _log.warning("batchprobe shim: %s did not apply (see above)", name)


def _reassert_after(function_name: str, apply: Callable[[], bool], module: ModuleType) -> None:
    competing = getattr(module, function_name, None)
    if competing is None:
        _log.warning("batchprobe shim: %s has no %s to follow", module.__name__, function_name)
        return

    @functools.wraps(competing)
    def then_ours(*args: Any, **kwargs: Any) -> Any:
        result = competing(*args, **kwargs)
        apply()
        return result

    setattr(module, function_name, then_ours)
    _log.info("batchprobe shim: will re-apply after %s.%s", module.__name__, function_name)


def _log_to_stderr() -> None:
    logger = logging.getLogger("batchprobe")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s batchprobe %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _run_shadowed_sitecustomize() -> None:
    """Run the sitecustomize this one hides (a distribution's or a venv's), if any."""
    others = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def main() -> None:
    names = [n.strip() for n in os.environ.get(_ENV, "").split(",") if n.strip()]
    if names:
        _log_to_stderr()
        finder = AfterImport()
        for name in names:
            patch = load_patch(name)
            if patch is not None:
                install(name, patch, finder)
                _log.info("batchprobe shim: %s armed (pid %d)", name, os.getpid())
        sys.meta_path.insert(0, finder)
    _run_shadowed_sitecustomize()


main()
