"""The engine registry: built-ins and third-party engines, looked up by name or alias.

Built-ins register through the same path third parties use: an object exposing
an :class:`Engine`. Third parties add one with an entry point in the
``batchprobe.engines`` group (the object may be an Engine instance, an Engine
subclass, or a callable returning an Engine), or at run time by building an
:class:`EngineRegistry` and passing it to ``launch``/``install``. Every lookup
builds a fresh registry, so there is no module-level state to mutate.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator
from importlib.metadata import entry_points

from batchprobe._plugins import entry_items
from batchprobe.engines._base import Engine
from batchprobe.errors import ConfigError

ENTRY_POINT_GROUP = "batchprobe.engines"
BUILTIN_MODULES = (
    "batchprobe.engines.llama_cpp",
    "batchprobe.engines.llama_cpp_python",
    "batchprobe.engines.mlx_lm",
    "batchprobe.engines.vllm_mlx",
    "batchprobe.engines.transformers_serve",
    "batchprobe.engines.vllm",
    "batchprobe.engines.sglang",
    "batchprobe.engines.ollama",
    "batchprobe.engines.serve_cmd",
)
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class EngineRegistry:
    """Engines by canonical name, plus their aliases."""

    def __init__(self, engines: Iterable[Engine] = ()) -> None:
        self._engines: dict[str, Engine] = {}
        self._aliases: dict[str, str] = {}
        for engine in engines:
            self.register(engine)

    def register(self, engine: Engine, *, replace: bool = False) -> None:
        """Add ``engine``; a name or alias already taken is refused unless ``replace``."""
        if not _NAME_RE.match(engine.name):
            raise ConfigError("engine", f"bad engine name {engine.name!r}; use [a-z0-9._-]")
        for key in (engine.name, *engine.aliases):
            owner = self._aliases.get(key)
            if owner is not None and not replace:
                raise ConfigError("engine", f"{key!r} is already registered by {owner!r}")
        self._engines[engine.name] = engine
        for key in (engine.name, *engine.aliases):
            self._aliases[key] = engine.name

    def get(self, name: str) -> Engine:
        """The engine called ``name`` (or one of its aliases)."""
        canonical = self._aliases.get(name.strip().lower())
        if canonical is None:
            raise ConfigError("engine", f"unknown {name!r}; known: {', '.join(self.names())}")
        return self._engines[canonical]

    def names(self) -> list[str]:
        """Canonical names, sorted."""
        return sorted(self._engines)

    def __iter__(self) -> Iterator[Engine]:
        return iter([self._engines[name] for name in self.names()])

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().lower() in self._aliases


def builtin_engines() -> list[Engine]:
    """The engines batchprobe ships with."""
    return [importlib.import_module(module).ENGINE for module in BUILTIN_MODULES]


def plugin_engines() -> list[Engine]:
    """Engines from installed packages' ``batchprobe.engines`` entry points."""
    found = entry_points(group=ENTRY_POINT_GROUP)
    # Engine is abstract: the plugin's object is an instance of a concrete subclass.
    return [e for ep in found for e in entry_items(ep, Engine)]  # type: ignore[type-abstract]


def default_registry() -> EngineRegistry:
    """A fresh registry of the built-in engines plus installed plugins."""
    registry = EngineRegistry(builtin_engines())
    for engine in plugin_engines():
        registry.register(engine)
    return registry


def get_engine(name: str, registry: EngineRegistry | None = None) -> Engine:
    """Look an engine up by name; ``ConfigError('engine', ...)`` lists the known ones."""
    return (registry or default_registry()).get(name)
