"""`batchprobe models resolve|unpack|build-tiny`: thin wrappers over batchprobe.models."""

from __future__ import annotations

from pathlib import Path

import click

from batchprobe.engines._types import ModelFormat
from batchprobe.models import ALIASES, resolve_model
from batchprobe.models._resolve import MODEL_FORMATS
from batchprobe.models.tiny import TINY_FAMILIES, build_tiny
from batchprobe.models.tiny_task import TASK_FAMILIES
from batchprobe.models.unpack import unpack


@click.group(name="models")
def models() -> None:
    """Materialise model aliases and build tiny offline test models."""


@models.command(name="resolve")
@click.argument("model")
@click.option(
    "--format", "model_format", type=click.Choice(MODEL_FORMATS), default="gguf",
    show_default=True, help="What the engine loads: a GGUF file or a Hugging Face checkpoint.",
)
def resolve_cmd(model: str, model_format: ModelFormat) -> None:
    """Print the local path of MODEL (an alias such as gemma3-270m, or a path)."""
    click.echo(str(resolve_model(model, model_format=model_format)))


@models.command(name="unpack")
@click.argument("model", type=click.Choice(ALIASES))
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def unpack_cmd(model: str, directory: Path) -> None:
    """Unpack MODEL's GGUF into a Hugging Face checkpoint in DIRECTORY (replaced if present)."""
    click.echo(str(unpack(resolve_model(model), directory)))


@models.command(name="build-tiny")
@click.argument("family", type=click.Choice(sorted({*TINY_FAMILIES, *TASK_FAMILIES})))
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--seed", type=int, default=0, show_default=True, help="Weight seed (random weights).")
@click.option("--task", is_flag=True,
              help="The constructed model that does the probe's tasks (recall, counts) instead "
                   "of random weights: llama (model.gguf beside the checkpoint), gemma3, "
                   "gemma4, or gemma4-wide (gemma4 with a window as long as its context).")
def build_tiny_cmd(family: str, directory: Path, seed: int, task: bool) -> None:
    """Build a tiny FAMILY model (offline) into DIRECTORY: random weights, or --task."""
    click.echo(str(build_tiny(family, directory, seed=seed, task=task)))
