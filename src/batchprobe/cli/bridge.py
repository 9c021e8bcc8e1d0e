"""`batchprobe bridge` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.group(name="bridge")
def bridge() -> None:
    """Not built yet."""
