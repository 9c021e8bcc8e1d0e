"""What a refused or failed model build must leave behind: nothing."""

from __future__ import annotations

from pathlib import Path


def nothing_left(target: Path) -> None:
    """No ``target``, and no staging folder of it beside it."""
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}")] == []
