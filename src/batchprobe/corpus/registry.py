"""The corpus: built-in cases (JSON files beside this module) plus those of other packages.

A package adds cases with an entry point in the ``batchprobe.corpus`` group whose object is a
:class:`Case`, a list of them, or a callable returning either. Every lookup builds a fresh
corpus: there is no module-level state.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib.metadata import entry_points
from importlib.resources import files

from batchprobe._plugins import entry_items
from batchprobe.corpus.models import Case
from batchprobe.errors import ConfigError

ENTRY_POINT_GROUP = "batchprobe.corpus"


def builtin_cases() -> list[Case]:
    """The cases batchprobe ships, one JSON file each, sorted by id."""
    folder = files("batchprobe.corpus") / "cases"
    found = [
        Case.model_validate_json(entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".json")
    ]
    return sorted(found, key=lambda case: case.case_id)


def plugin_cases() -> list[Case]:
    """Cases from installed packages' ``batchprobe.corpus`` entry points."""
    return [case for ep in entry_points(group=ENTRY_POINT_GROUP) for case in entry_items(ep, Case)]


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
