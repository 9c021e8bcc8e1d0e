"""`batchprobe run` (placeholder)."""

from __future__ import annotations

import click


@click.command(name="run")
def run() -> None:
    """Not built yet."""
