"""`batchprobe schema`: the verdict file's JSON Schema."""

from __future__ import annotations

import json

import click

from batchprobe.results.writer import json_schema


@click.command(name="schema")
def schema() -> None:
    """Print the JSON Schema of the verdict file."""
    click.echo(json.dumps(json_schema(), indent=2))
