"""`batchprobe fake-server` (placeholder)."""

from __future__ import annotations

import click


@click.command(name="fake-server")
def fake_server() -> None:
    """Not built yet."""
