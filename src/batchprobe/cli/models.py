"""`batchprobe models` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.group(name="models")
def models() -> None:
    """Not built yet."""
