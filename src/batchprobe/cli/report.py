"""`batchprobe report`: render a verdict file as console text, HTML, markdown, JUnit XML, CSV
or JSON Lines."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from batchprobe.report import (
    append_step_summary,
    builtin_renderers,
    load_verdict,
    print_summary,
    render_markdown,
    stdout_console,
    write_rendered,
)

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def step_summary_path() -> Path | None:
    """The GitHub Actions step summary file, when this runs as a workflow step."""
    value = os.environ.get(STEP_SUMMARY_ENV)
    return Path(value) if value else None


_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command(name="report")
@click.argument("verdict", type=click.Path(path_type=Path))
@click.option("--html", "html_path", type=_FILE, help="Write the self-contained HTML report here.")
@click.option("--md", "md_path", type=_FILE, help="Write the markdown summary here.")
@click.option("--junit", "junit_path", type=_FILE, help="Write JUnit XML (one case per check).")
@click.option("--csv", "csv_path", type=_FILE, help="Write the steps (or arms) table as CSV.")
@click.option("--jsonl", "jsonl_path", type=_FILE, help="Write one JSON record per request.")
def report(verdict: Path, html_path: Path | None, md_path: Path | None,
           junit_path: Path | None, csv_path: Path | None, jsonl_path: Path | None) -> None:
    """Print a verdict's summary and write it in the formats asked for.

    With $GITHUB_STEP_SUMMARY set, the markdown summary is appended to it.
    Exit codes: 0 rendered, 2 the verdict file cannot be read.
    """
    err = Console(stderr=True)
    loaded = load_verdict(verdict)  # a ReportError is exit 2 and one line (cli/_boundary.py)
    registry = builtin_renderers()
    asked = (("html", html_path), ("md", md_path), ("junit", junit_path), ("csv", csv_path),
             ("jsonl", jsonl_path))
    for name, path in asked:
        if path is not None:
            write_rendered(loaded, registry.get(name), path)
            err.print(f"{name} written to {escape(str(path))}")
    summary = step_summary_path()
    if summary is not None:
        append_step_summary(render_markdown(loaded), summary)
    print_summary(stdout_console(), loaded)
