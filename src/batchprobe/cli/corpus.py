"""`batchprobe corpus list|run`: the real-bug corpus, listed or reproduced."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from batchprobe.cli._boundary import set_exit_code
from batchprobe.cli._render import RichListener
from batchprobe.cli.run import CACHE_OPTION
from batchprobe.corpus import default_corpus, run_case
from batchprobe.report import stdout_console


@click.group(name="corpus")
def corpus() -> None:
    """Real, published batching bugs, each reproduced on the real engine."""


@corpus.command(name="list")
def list_cmd() -> None:
    """List the cases: id, engine, versions (label=version) and the bug."""
    # The case id is one to copy: never folded.
    table = Table(Column("case", no_wrap=True), "engine", "versions", "title")
    for case in default_corpus():
        versions = ", ".join(f"{v.label}={v.version}" for v in case.versions)
        table.add_row(case.case_id, case.engine, versions, case.title)
    stdout_console().print(table)


@corpus.command(name="run")
@click.argument("case_id")
@click.option("--version", "versions", multiple=True,
              help="A label (broken, fixed, ...) or version of the case [default: all of them].")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Where each version's verdict file goes.")
@click.option("--default-plan", is_flag=True,
              help="Probe with no run options (the default plan) and check each version's "
                   "expect_default instead of the case's run and expect.")
@CACHE_OPTION
def run_cmd(
    case_id: str,
    versions: tuple[str, ...],
    output_dir: Path,
    default_plan: bool,
    cache_dir: Path | None,
) -> None:
    """Reproduce CASE_ID on each of its versions and check every verdict against the case.

    Exit codes: 0 every version judged as the case expects, 1 one was not, 2 a usage error.
    """
    case = default_corpus().get(case_id)
    chosen = [case.version(v) for v in versions] or case.versions
    err = Console(stderr=True)
    out = stdout_console()
    failed = False
    for entry in chosen:
        plan = ", default plan" if default_plan else ""
        head = f"{case.case_id} {entry.label} ({case.engine} {entry.version}{plan})"
        if default_plan and entry.expect_default is None:
            out.print(f"{escape(head)}: not checked: {escape(entry.default_plan_not_checked or '')}")
            continue
        listener = RichListener(err)
        with listener.progress:
            result = run_case(
                case, entry.label, output_dir, default_plan=default_plan, cache_dir=cache_dir,
                listener=listener,
            )  # fmt: skip
        tried = f" (on run {result.tries} of {case.tries})" if result.tries > 1 else ""
        said = "as expected" if result.as_expected else "NOT as expected"
        failed = failed or not result.as_expected
        out.print(f"{escape(head)}: {said}{tried}; verdict {escape(result.verdict_file)}")
        for mismatch in result.mismatches:
            out.print(f"  - {escape(mismatch)}")
    code = 1 if failed else 0
    set_exit_code(code)
    raise SystemExit(code)
