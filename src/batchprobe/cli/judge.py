"""`batchprobe judge`: judge a saved verdict file again, with no server."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from batchprobe.cli._boundary import set_exit_code
from batchprobe.cli.run import exit_code
from batchprobe.judge import rejudge
from batchprobe.report import load_verdict, print_summary, stdout_console
from batchprobe.results.writer import write_report


@click.command(name="judge")
@click.argument("verdict", type=click.Path(path_type=Path))
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the verdict judged again here (the file given is never changed).")
def judge(verdict: Path, output: Path | None) -> None:
    """Judge VERDICT again from what it holds, with no server: every answer scored from its
    saved request, every finding, step and verdict made again by this batchprobe's judge.

    Exit codes as `run`: 0 PASS, 1 FAIL, 2 inconclusive or the file cannot be judged.
    """
    report = rejudge(load_verdict(verdict), str(verdict))  # ReportError: exit 2, one line
    if output is not None:
        write_report(report, output)
        Console(stderr=True).print(f"judged verdict written to {escape(str(output))}")
    code = exit_code(report)
    set_exit_code(code)
    print_summary(stdout_console(), report, str(output) if output is not None else None)
    raise SystemExit(code)
