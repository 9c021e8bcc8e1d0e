"""What another package registers through an entry point: one helper for every group."""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint
from typing import TypeVar

T = TypeVar("T")
_log = logging.getLogger(__name__)


def entry_items(entry: EntryPoint, kind: type[T]) -> list[T]:
    """The ``kind`` objects an entry point gives: one, a list, or a callable returning either.

    A plugin that cannot be loaded, or gives something else, is logged and gives nothing: a
    broken plugin must not take batchprobe's own engines, issues or cases down with it.
    """
    try:
        obj = entry.load()
        made = obj() if callable(obj) and not isinstance(obj, kind) else obj
        items = [made] if isinstance(made, kind) else list(made)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        _log.warning("plugin %s could not be loaded: %s", entry.value, exc)
        return []
    if not all(isinstance(item, kind) for item in items):
        _log.warning("plugin %s gave something that is not a %s", entry.value, kind.__name__)
        return []
    return items
