"""`batchprobe compare`: verdicts of one plan side by side, and the regression gate."""

from __future__ import annotations

from pathlib import Path

import click

from batchprobe.cli.report import add_step_summary
from batchprobe.report import (
    DEFAULT_MAX_THROUGHPUT_DROP,
    compare_reports,
    load_verdict,
    print_comparison,
    render_comparison_html,
    render_comparison_markdown,
    stdout_console,
    write_output,
)

EXIT_OK, EXIT_REGRESSION = 0, 1
_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command(name="compare")
@click.argument("verdicts", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--gate", is_flag=True, help="Exit 1 when a run regresses against the first.")
@click.option("--max-throughput-drop", type=click.FloatRange(0, 1),
              default=DEFAULT_MAX_THROUGHPUT_DROP, show_default=True,
              help="Largest tolerated decode throughput drop per arm, as a fraction (0.10 = 10%).")
@click.option("--html", "html_path", type=_FILE, help="Write the comparison as HTML here.")
@click.option("--md", "md_path", type=_FILE, help="Write the comparison as markdown here.")
@click.option("--label", "labels", multiple=True,
              help="A run's column label, in the order of VERDICTS (repeat it) [default: each "
                   "file's stem].")
def compare(verdicts: tuple[Path, ...], gate: bool, max_throughput_drop: float,
            html_path: Path | None, md_path: Path | None, labels: tuple[str, ...]) -> None:
    """Compare verdicts of the same plan (engines, versions, patches) against the first one.

    A regression: a check that fails in another run and did not in the first (PASS to FAIL
    always is one), a planned arm that did not run, a sweep correct to a shallower depth, a
    decode throughput drop beyond --max-throughput-drop. With $GITHUB_STEP_SUMMARY set, the
    markdown is appended to it.

    Exit codes: 0 compared (no regression, or no --gate), 1 regression with --gate,
    2 a file cannot be read or written, or the runs are not comparable (a bad
    $GITHUB_STEP_SUMMARY is only a warning).
    """
    if len(verdicts) < 2:
        raise click.UsageError("VERDICTS: give at least two verdict files to compare")
    paths = list(verdicts)
    if len(labels) > len(paths):
        raise click.UsageError(f"--label: {len(labels)} labels for {len(paths)} verdicts; give "
                               "at most one per verdict, in their order")
    # A ReportError is exit 2 and one line (cli/_boundary.py).
    comparison = compare_reports([load_verdict(p) for p in paths], paths,
                                 max_throughput_drop=max_throughput_drop, labels=list(labels))
    # Written atomically; one that cannot be is an OutputError: exit 2 and one line.
    if html_path is not None:
        write_output(html_path, render_comparison_html(comparison))
    markdown = render_comparison_markdown(comparison)
    if md_path is not None:
        write_output(md_path, markdown)
    add_step_summary("compare", lambda: markdown)
    print_comparison(stdout_console(), comparison)
    raise SystemExit(EXIT_REGRESSION if gate and comparison.regressions else EXIT_OK)
