"""`batchprobe compare`: verdicts of one plan side by side, and the regression gate."""

from __future__ import annotations

from pathlib import Path

import click

from batchprobe.cli.report import step_summary_path
from batchprobe.report import (
    DEFAULT_MAX_THROUGHPUT_DROP,
    append_step_summary,
    compare_reports,
    load_verdict,
    print_comparison,
    render_comparison_html,
    render_comparison_markdown,
    stdout_console,
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
    2 a file cannot be read or the runs are not comparable.
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
    if html_path is not None:
        html_path.write_text(render_comparison_html(comparison), encoding="utf-8")
    markdown = render_comparison_markdown(comparison)
    if md_path is not None:
        md_path.write_text(markdown, encoding="utf-8")
    summary = step_summary_path()
    if summary is not None:
        append_step_summary(markdown, summary)
    print_comparison(stdout_console(), comparison)
    raise SystemExit(EXIT_REGRESSION if gate and comparison.regressions else EXIT_OK)
