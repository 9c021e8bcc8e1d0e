"""`batchprobe report`: render a verdict file as console text, HTML, markdown, JUnit XML, CSV
or JSON Lines."""

from __future__ import annotations

import os
from collections.abc import Callable
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


def add_step_summary(command: str, markdown: Callable[[], str]) -> bool:
    """Append ``markdown()`` to ``$GITHUB_STEP_SUMMARY`` when it is set; False when that fails.

    The summary is an extra for the CI page, not the command's output: a path that cannot be
    appended to (a missing folder, a read-only or full disk, a folder named instead of a file)
    is one warning line on stderr, and the command's exit code stays its own (the verdict's
    for ``run``: 0 for a PASS). It is appended, not replaced, so it is not written atomically:
    the file is the runner's and holds the earlier steps' summaries."""
    summary = step_summary_path()
    if summary is None:
        return True
    try:
        append_step_summary(markdown(), summary)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        click.echo(f"batchprobe {command}: warning: ${STEP_SUMMARY_ENV}: cannot append to "
                   f"{summary}: {reason}; the summary is left out", err=True)
        return False
    return True


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
    Exit codes: 0 rendered, 2 the verdict file cannot be read or a file asked for cannot be
    written (a bad $GITHUB_STEP_SUMMARY is only a warning).
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
    add_step_summary("report", lambda: render_markdown(loaded))
    print_summary(stdout_console(), loaded)
