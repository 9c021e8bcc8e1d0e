"""`batchprobe run`: parse the options into ``plan_run``, run it, render the report.

Bounds and defaults belong to ``RunConfig``/``Thresholds``; an option is declared here with
``model_option`` and reaches ``plan_run`` by its field name. Errors are translated by the CLI's
one boundary (``cli/_boundary.py``).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from batchprobe.cli._boundary import EXIT_OTHER, set_exit_code
from batchprobe.cli._options import model_option
from batchprobe.cli._render import PROGRESS_MODES, progress_listener
from batchprobe.cli.report import add_step_summary
from batchprobe.errors import OutputError
from batchprobe.probe import plan_run, run_plan
from batchprobe.probe.interrupts import INTERRUPT_SIGNALS
from batchprobe.report import (
    Renderer,
    beside,
    parse_formats,
    print_summary,
    render_markdown,
    stdout_console,
    write_rendered,
)
from batchprobe.report._error import run_error
from batchprobe.report.console import escape
from batchprobe.results.models import Outcome, Report, RunConfig
from batchprobe.results.thresholds import Thresholds
from batchprobe.workload.shapes import SHAPE_NAMES

EXIT_PASS, EXIT_FAIL = 0, 1
FC = TypeVar("FC", bound=Callable[..., Any])
_LOG_LINES = 15


def exit_code(report: Report) -> int:
    """0 PASS, 1 FAIL, 2 INCONCLUSIVE (which includes a run that could not finish)."""
    return {Outcome.PASS: EXIT_PASS, Outcome.FAIL: EXIT_FAIL}.get(report.verdict.outcome, EXIT_OTHER)


def _run_option(field: str, *decls: str, **kwargs: object) -> click.Option:
    model = Thresholds if field in Thresholds.model_fields else RunConfig
    return model_option(model, field, *decls, **kwargs)  # type: ignore[return-value]


# One line per option; a new RunConfig field becomes an option by adding a line here.
# What is probed:
_TARGET_OPTIONS = [
    click.option("--base-url", help="OpenAI-compatible server to probe, e.g. http://127.0.0.1:8080"),
    click.option("--engine", help="Engine to launch, NAME[==VERSION] (see `batchprobe engines list`)."),
    click.option("--serve-cmd", help="With --engine serve-cmd: the server argv with {port} and {model}."),
    click.option("--replay", type=click.Path(path_type=Path),
                 help="A repro.json (`batchprobe repro` writes it): send its minimal case as one "
                      "arm, as its wave sent it, then its serial references; against the case's "
                      "own server unless --base-url or --engine is given. Judged on correctness "
                      "alone (PASS: every answer right)."),
]  # fmt: skip
# How it is probed (`bisect` probes every version with these too):
PROBE_OPTIONS = [
    click.option("--model", help="Model id (URL) or model path/alias (engine, e.g. gemma3-270m)."),
    click.option("--patch", "patches", multiple=True, help="Runtime patch to apply inside the engine."),
    click.option("--engine-arg", "engine_args", multiple=True,
                 help="An argument appended to the managed engine's command line (repeat it)."),
    _run_option("sessions", "--sessions"),
    _run_option("haystack_tokens", "--haystack-tokens"),
    _run_option("max_tokens", "--max-tokens"),
    click.option("--prompt-style", type=click.Choice(["completion", "chat"]),
                 help="completion for base models, chat for instruct models [default: completion, "
                      "or the engine's preferred API]."),
    click.option("--workloads", help="Comma-separated: recall, decode [default: both]."),
    click.option("--shapes", help=f"Comma-separated traffic shapes: {','.join(SHAPE_NAMES)} "
                                  "[default: every shape the server supports]."),
    click.option("--sweep", help="Depths to sweep, comma-separated increasing (1,2,4,8,16), or "
                                 "auto: doubling to --max-sessions, stopping at the knee "
                                 "[default: doubling to 2 x --sessions]."),
    _run_option("max_sessions", "--max-sessions"),
    _run_option("slo_ttft_p99_s", "--slo-ttft-p99"),
    _run_option("slo_itl_p99_s", "--slo-itl-p99"),
    _run_option("time_budget_s", "--time-budget"),
    _run_option("kv_tokens", "--kv-tokens"),
    click.option("--quick", is_flag=True, help="The short plan instead of a sweep: serial, then "
                                               "--sessions at once (an engine: simple@1, "
                                               "batching@1, batching@N)."),
    click.option("--arms", help="Comma-separated NAME@N arms instead of a sweep (e.g. serial@1,"
                                "concurrent@8; an engine: simple@1,batching@1,batching@8)."),
    _run_option("seed", "--seed"),
    _run_option("request_seed", "--request-seed"),
    _run_option("references", "--references"),
    _run_option("min_speedup", "--min-speedup"),
    _run_option("pairs", "--pairs"),
    _run_option("max_pairs", "--max-pairs"),
    _run_option("pair_window_tokens", "--pair-window-tokens"),
    _run_option("recall_floor", "--recall-floor"),
    _run_option("strict_greedy", "--strict-greedy"),
    _run_option("near_tie_nats", "--near-tie"),
    _run_option("abort_grace_s", "--abort-grace"),
    _run_option("logprobs", "--logprobs",
                help="Record chosen-token logprobs and report their largest drift across arms."),
    _run_option("request_timeout_s", "--request-timeout"),
    _run_option("client_procs", "--client-procs"),
    _run_option("client_lag_ms", "--client-lag-ms"),
    _run_option("ready_timeout_s", "--ready-timeout"),
]  # fmt: skip
CACHE_OPTION = click.option(
    "--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Engine environments and models (default: $BATCHPROBE_CACHE_DIR or ~/.cache/batchprobe).",
)  # fmt: skip
# Where the results go:
_OUTPUT_OPTIONS = [
    CACHE_OPTION,
    click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("verdict.json"),
                 show_default=True, help="The verdict file; engine logs go to a folder beside it."),
    click.option("--progress", type=click.Choice(PROGRESS_MODES), default="auto", show_default=True,
                 help="Progress on stderr: rich bars with elapsed time and ETA (a terminal), "
                      "plain lines flushed as each arm or step ends (logs, pipes), or off; auto "
                      "picks rich on a terminal and plain elsewhere."),
    click.option("--report", "report_formats", default=None,
                 help="Also write these reports beside the verdict: comma-separated html, md, "
                      "junit, console, csv, jsonl (verdict.html, verdict.md, verdict.junit.xml, "
                      "verdict.txt, verdict.csv: the steps or arms table, verdict.jsonl: one "
                      "record per request)."),
]  # fmt: skip


def with_options(options: list[Any]) -> Callable[[FC], FC]:
    """Apply click ``options`` in order (--help lists the first one first)."""

    def apply(command: FC) -> FC:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


@click.command(name="run")
@with_options([*_TARGET_OPTIONS, *PROBE_OPTIONS, *_OUTPUT_OPTIONS])
def run(**options: Any) -> None:
    """Probe whether batching is parallel AND correct; write the verdict file.

    With no --base-url and no --engine it probes llama.cpp serving gemma3-270m, building
    llama-server first when it is missing.

    Exit codes: 0 PASS, 1 FAIL, 2 INCONCLUSIVE, the run could not finish, a usage error, or
    a file asked for cannot be written (a bad $GITHUB_STEP_SUMMARY is only a warning).
    """
    err = Console(stderr=True)
    formats = options.pop("report_formats")
    listener = progress_listener(options.pop("progress"), err)
    renderers: list[Renderer] = parse_formats(formats) if formats else []
    given = {k: v for k, v in options.items() if v is not None and v is not False}
    plan = plan_run(**given, on_install_step=listener.note)
    listener.expect(plan.config)
    # run_probe handles these signals while it runs and restores what it found: ignored,
    # so the tail of a burst of Ctrl-C (or a hang-up) cannot turn the exit code into
    # click's 1 while the summary prints.
    for sig in INTERRUPT_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    with listener:
        report = run_plan(plan, listener)
    message, _ = run_error(report)
    if message:
        err.print(f"[red]error:[/] {escape(message)}")
    if report.log_tail:
        tail = "\n".join(report.log_tail.splitlines()[-_LOG_LINES:])
        err.print(f"[dim]last lines of the engine log:\n{escape(tail)}[/]")
    code = exit_code(report)
    set_exit_code(code)
    out = stdout_console()
    print_summary(out, report, str(plan.output))
    failed = _write_reports(out, report, renderers, plan.output)
    add_step_summary("run", lambda: render_markdown(report))
    if failed is not None:
        # The verdict file holds the results; a report that cannot be written is exit 2.
        raise failed
    raise SystemExit(code)


def _write_reports(
    out: Console, report: Report, renderers: list[Renderer], verdict: Path
) -> OutputError | None:
    """Write each report beside the verdict, every one tried; the first that failed."""
    failed: OutputError | None = None
    for renderer in renderers:
        try:
            path = write_rendered(report, renderer, beside(verdict, renderer))
        except OutputError as exc:
            failed = failed or exc
            continue
        out.print(f"report written to {escape(str(path))}")
    return failed
