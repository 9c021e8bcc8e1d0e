"""`batchprobe schema` (placeholder)."""

from __future__ import annotations

import click


@click.command(name="schema")
def schema() -> None:
    """Not built yet."""
