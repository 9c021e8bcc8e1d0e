"""The corpus: built-in cases (JSON files beside this module) plus those of other packages.

A package adds cases with an entry point in the ``batchprobe.corpus`` group whose object is a
:class:`Case`, a list of them, or a callable returning either. Every lookup builds a fresh
corpus: there is no module-level state.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from importlib.metadata import EntryPoint, entry_points
from importlib.resources import files

from pydantic import ValidationError

from batchprobe.corpus.models import Case
from batchprobe.errors import ConfigError

ENTRY_POINT_GROUP = "batchprobe.corpus"
_log = logging.getLogger(__name__)


def builtin_cases() -> list[Case]:
    """The cases batchprobe ships, one JSON file each, sorted by id."""
    folder = files("batchprobe.corpus") / "cases"
    found = [
        Case.model_validate_json(entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".json")
    ]
    return sorted(found, key=lambda case: case.case_id)


def _from_entry_point(entry: EntryPoint) -> list[Case]:
    try:
        obj = entry.load()
        made = obj() if callable(obj) and not isinstance(obj, Case) else obj
        cases = [made] if isinstance(made, Case) else list(made)
    except (ImportError, AttributeError, TypeError, ValidationError) as exc:
        _log.warning("corpus plugin %s could not be loaded: %s", entry.value, exc)
        return []
    if not all(isinstance(case, Case) for case in cases):
        _log.warning("corpus plugin %s gave something that is not a Case", entry.value)
        return []
    return cases


def plugin_cases() -> list[Case]:
    """Cases from installed packages' ``batchprobe.corpus`` entry points."""
    return [case for ep in entry_points(group=ENTRY_POINT_GROUP) for case in _from_entry_point(ep)]


class Corpus:
    """Cases by id."""

    def __init__(self, cases: Iterable[Case] = ()) -> None:
        self._cases: dict[str, Case] = {}
        for case in cases:
            self.add(case)

    def add(self, case: Case) -> None:
        if case.case_id in self._cases:
            raise ConfigError("case", f"{case.case_id!r} is already in the corpus")
        self._cases[case.case_id] = case

    def get(self, case_id: str) -> Case:
        found = self._cases.get(case_id.strip())
        if found is None:
            raise ConfigError("case", f"unknown {case_id!r}; known: {', '.join(self.ids())}")
        return found

    def ids(self) -> list[str]:
        return sorted(self._cases)

    def __iter__(self) -> Iterator[Case]:
        return iter([self._cases[i] for i in self.ids()])


def default_corpus() -> Corpus:
    """A fresh corpus of the built-in cases plus installed plugins'."""
    return Corpus([*builtin_cases(), *plugin_cases()])
