"""`batchprobe bisect`: parse the options into ``plan_bisect``, run it, say what it found."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from batchprobe.bisect import plan_bisect, run_bisect
from batchprobe.cli._boundary import EXIT_OTHER, set_exit_code
from batchprobe.cli._render import RichListener
from batchprobe.cli.run import CACHE_OPTION, PROBE_OPTIONS, with_options
from batchprobe.probe.interrupts import INTERRUPT_SIGNALS
from batchprobe.report import stdout_console
from batchprobe.results.bisect import BisectStatus, Criterion

_OPTIONS = [
    click.option("--engine", required=True, help="Engine NAME (see `batchprobe engines list`)."),
    click.option("--good", required=True, help="A version judged good."),
    click.option("--bad", required=True, help="A version judged bad (older: find the first "
                                              "fixed version; newer: the first bad one)."),
    click.option("--criterion", type=click.Choice([c.value for c in Criterion]),
                 default=Criterion.CORRECT.value, show_default=True,
                 help="What makes a version good: its verdict is correct, parallel, PASS, or "
                      "shows no failure (no-failure: correct not false and some answer "
                      "judged, for a model whose recall cannot be judged)."),
    click.option("--check-ends", is_flag=True,
                 help="Probe --good and --bad first and stop if either is not as stated."),
    click.option("--versions", help="Comma-separated versions to search instead of the package "
                                    "index's releases (the ends are added)."),
    *PROBE_OPTIONS,
    CACHE_OPTION,
    click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("bisect.json"),
                 show_default=True, help="The bisect file (resumed when it exists); each "
                                         "version's verdict goes to a folder beside it."),
]  # fmt: skip


@click.command(name="bisect")
@with_options(_OPTIONS)
def bisect(**options: Any) -> None:
    """Find the first released version that broke (or fixed) what the probe judges.

    Installs each version it needs in its own cached environment and probes it with the run
    options given (the same for every version), by binary search between --good and --bad.
    Versions that cannot install, start or be judged are skipped, not counted. Run it again
    with the same --output to resume.

    Exit codes: 0 found, 2 ambiguous (skipped versions hide it), ends not as stated,
    interrupted, or a usage error.
    """
    err = Console(stderr=True)
    given: dict[str, Any] = {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in options.items()
        if v is not None and v is not False and v != ()
    }
    plan = plan_bisect(**given)
    listener = RichListener(err)
    for sig in INTERRUPT_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)  # run_probe handles them while a probe runs
    with listener.progress:
        report = run_bisect(plan, listener, on_event=lambda text: err.print(escape(text)))
    out = stdout_console()
    for tried in report.tries:
        out.print(f"  {escape(tried.version):>10}  {tried.judgement.value:<7}  {escape(tried.reason)}")
    out.print(f"{report.status.value}: {escape(report.message)}")
    out.print(f"bisect written to {escape(str(plan.output))}")
    code = 0 if report.status is BisectStatus.FOUND else EXIT_OTHER
    set_exit_code(code)
    raise SystemExit(code)
