"""`batchprobe models resolve|build-tiny`: thin wrappers over batchprobe.models."""

from __future__ import annotations

from pathlib import Path

import click

from batchprobe.models import resolve_model
from batchprobe.models.tiny import TINY_FAMILIES, build_tiny


@click.group(name="models")
def models() -> None:
    """Materialise model aliases and build tiny offline test models."""


@models.command(name="resolve")
@click.argument("model")
def resolve_cmd(model: str) -> None:
    """Print the local path of MODEL (an alias such as gemma3-270m, or a path)."""
    click.echo(str(resolve_model(model)))


@models.command(name="build-tiny")
@click.argument("family", type=click.Choice(TINY_FAMILIES))
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--seed", type=int, default=0, show_default=True, help="Weight seed.")
def build_tiny_cmd(family: str, directory: Path, seed: int) -> None:
    """Build a tiny random FAMILY model (offline) into DIRECTORY."""
    click.echo(str(build_tiny(family, directory, seed=seed)))
