"""`batchprobe repro`: shrink a verdict's failure to a standalone reproducer."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from batchprobe.cli._boundary import set_exit_code
from batchprobe.report import stdout_console
from batchprobe.repro import ReproOptions, reproduce


def _line(text: str) -> None:
    click.echo(f"repro: {text}", err=True)


@click.command(name="repro")
@click.argument("verdict", type=click.Path(path_type=Path))
@click.option("--base-url", help="The server to replay against (default: the verdict's own).")
@click.option("--engine", help="NAME==VERSION: launch this engine instead of the verdict's own "
              "target (with --model, the model's path or alias).")
@click.option("--model", help="With --engine, the model to launch; with a URL, the model to "
              "name in every request (default: the one served).")
@click.option("--patch", "patches", multiple=True,
              help="A runtime patch for the launched engine (default: the run's own).")
@click.option("--finding", "finding", type=int,
              help="The index in the verdict's findings of the failure to keep.")
@click.option("--session", type=int, help="Keep the failure naming this session.")
@click.option("--tries", type=int, default=5, show_default=True,
              help="Replays of every candidate (1-100).")
@click.option("--time-budget", "time_budget_s", type=float, default=900.0, show_default=True,
              help="Seconds the shrink may take; it stops at the smallest case so far.")
@click.option("--bisect", "bisect", type=click.Path(dir_okay=False, path_type=Path),
              help="A `batchprobe bisect` result: its first broken or fixed version goes "
              "into REPORT.md.")
@click.option("--output", "-o", type=click.Path(file_okay=False, path_type=Path),
              default=Path("repro"), show_default=True,
              help="A new (or empty) folder for repro.py, REPORT.md and repro.json.")
def repro(verdict: Path, base_url: str | None, engine: str | None, model: str | None,
          patches: tuple[str, ...], finding: int | None,
          session: int | None, tries: int, time_budget_s: float, bisect: Path | None,
          output: Path) -> None:
    """Replay VERDICT's first hard failure (or the one named), confirm it, shrink it while
    it persists (requests, then max_tokens, timing, parameters), and write a reproducer.

    Exit codes: 0 a reproducer that shows the failure; 1 the failure is flaky (it came back
    in fewer than half the replays: its rate is reported, the whole wave written, nothing
    shrunk); 2 an error (no hard failure in the verdict, another schema, a target that does
    not answer, a budget too small for one replay): nothing is written then.
    """
    result = reproduce(
        ReproOptions(verdict=verdict, output=output, base_url=base_url, model=model,
                     engine=engine, patches=patches or None,
                     finding=finding, session=session, tries=tries,
                     time_budget_s=time_budget_s, bisect=bisect),
        _line,
    )
    o = result.outcome
    code = 1 if o.flaky else 0
    set_exit_code(code)
    out = stdout_console()
    kept = result.case.kept
    if o.flaky:
        out.print(f"flaky: {kept.kind.value} on session {kept.session} came back in "
                  f"{o.confirmed}/{o.tries} replays of its wave; not shrunk")
    else:
        out.print(f"reproduced: {kept.kind.value} on session {kept.session} with "
                  f"{len(result.requests)} of {len(result.case.requests)} requests "
                  f"({o.final_failed}/{o.tries} replays)")
    for path in result.files:
        out.print(f"  {escape(str(path))}")
    raise SystemExit(code)
