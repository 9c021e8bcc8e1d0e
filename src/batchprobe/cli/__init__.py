"""The thin command line: each subcommand lives in its own module and calls the library."""

from __future__ import annotations

import importlib

import click

from batchprobe import __version__
from batchprobe.cli._boundary import Boundary

# (module, attribute) of each subcommand; each module builds a validated config
# and calls the library. Kept as names so `batchprobe --help` stays fast.
_COMMANDS = (
    ("batchprobe.cli.run", "run"),
    ("batchprobe.cli.report", "report"),
    ("batchprobe.cli.compare", "compare"),
    ("batchprobe.cli.judge", "judge"),
    ("batchprobe.cli.repro", "repro"),
    ("batchprobe.cli.bisect", "bisect"),
    ("batchprobe.cli.corpus", "corpus"),
    ("batchprobe.cli.schema", "schema"),
    ("batchprobe.cli.fake_server", "fake_server"),
    ("batchprobe.cli.engines", "engines"),
    ("batchprobe.cli.models", "models"),
    ("batchprobe.cli.bridge", "bridge"),
)


@click.group(cls=Boundary, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="batchprobe")
def main() -> None:
    """Probe whether an LLM engine's continuous batching is parallel AND correct."""


for _module, _attr in _COMMANDS:
    main.add_command(getattr(importlib.import_module(_module), _attr))
