"""`batchprobe engines` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.group(name="engines")
def engines() -> None:
    """Not built yet."""
