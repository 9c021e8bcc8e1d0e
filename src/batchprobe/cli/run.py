"""`batchprobe run`: probe a URL (or a managed engine) and write the verdict file."""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import ValidationError
from rich.console import Console

from batchprobe.cli._render import RichListener, print_summary
from batchprobe.errors import ConfigError
from batchprobe.probe.endpoint import url_provider
from batchprobe.probe.plan import parse_arms, url_arms
from batchprobe.probe.run import run_probe
from batchprobe.results.models import Outcome, Report, RunConfig
from batchprobe.results.thresholds import Thresholds

EXIT_PASS, EXIT_FAIL, EXIT_OTHER = 0, 1, 2
_WORKLOADS = ("recall", "decode")


def exit_code(report: Report) -> int:
    """0 PASS, 1 FAIL, 2 INCONCLUSIVE (which includes a run that could not finish)."""
    return {Outcome.PASS: EXIT_PASS, Outcome.FAIL: EXIT_FAIL}.get(report.verdict.outcome, EXIT_OTHER)


def _workloads(text: str) -> list[str]:
    names = [w.strip() for w in text.split(",") if w.strip()]
    bad = [w for w in names if w not in _WORKLOADS]
    if bad or not names:
        raise ConfigError("--workloads", f"got {text!r}; choose from {', '.join(_WORKLOADS)}")
    return names


def _config_error(exc: ValidationError) -> ConfigError:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "config"
    return ConfigError(f"--{field.replace('_', '-')}", first["msg"])


@click.command(name="run")
@click.option("--base-url", help="OpenAI-compatible server to probe, e.g. http://127.0.0.1:8080")
@click.option("--model", help="Model id to request (default: the first of /v1/models).")
@click.option("--sessions", type=click.IntRange(1, 1024), default=8, show_default=True,
              help="Concurrent sessions (and items per workload).")
@click.option("--haystack-tokens", type=click.IntRange(64, 200_000), default=1200,
              show_default=True, help="Recall prompt length target, in tokens.")
@click.option("--max-tokens", type=click.IntRange(8, 4096), default=128, show_default=True,
              help="Decode workload output length.")
@click.option("--prompt-style", type=click.Choice(["completion", "chat"]), default="completion",
              show_default=True, help="completion for base models, chat for instruct models.")
@click.option("--workloads", default="recall,decode", show_default=True,
              help="Comma-separated: recall, decode.")
@click.option("--arms", help="Comma-separated NAME@N arms (default: serial@1,concurrent@N).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--min-speedup", type=click.FloatRange(min=0, min_open=True),
              default=Thresholds().min_speedup, show_default=True)
@click.option("--recall-floor", type=click.FloatRange(0, 1),
              default=Thresholds().recall_floor, show_default=True)
@click.option("--max-recall-drop", type=click.FloatRange(0, 1),
              default=Thresholds().max_recall_drop, show_default=True)
@click.option("--strict-greedy", is_flag=True, help="Fail when greedy outputs differ across arms.")
@click.option("--request-timeout", type=click.FloatRange(min=0, min_open=True), default=300.0,
              show_default=True, help="Seconds one request may take in all.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("verdict.json"), show_default=True)
def run(
    base_url: str | None,
    model: str | None,
    sessions: int,
    haystack_tokens: int,
    max_tokens: int,
    prompt_style: str,
    workloads: str,
    arms: str | None,
    seed: int,
    min_speedup: float,
    recall_floor: float,
    max_recall_drop: float,
    strict_greedy: bool,
    request_timeout: float,
    output: Path,
) -> None:
    """Probe whether batching is parallel AND correct; write the verdict file.

    Exit codes: 0 PASS, 1 FAIL, 2 INCONCLUSIVE or the run could not finish.
    """
    err = Console(stderr=True)
    if base_url is None:
        raise click.UsageError("give --base-url URL")
    try:
        config = RunConfig(
            base_url=base_url,
            model=model,
            sessions=sessions,
            haystack_tokens=haystack_tokens,
            max_tokens=max_tokens,
            prompt_style=prompt_style,  # type: ignore[arg-type]
            workloads=_workloads(workloads),  # type: ignore[arg-type]
            seed=seed,
            arms=parse_arms(arms, managed=False) if arms else url_arms(sessions),
            thresholds=Thresholds(
                min_speedup=min_speedup,
                recall_floor=recall_floor,
                max_recall_drop=max_recall_drop,
                strict_greedy=strict_greedy,
            ),
            request_timeout_s=request_timeout,
        )
    except ValidationError as exc:
        raise click.UsageError(str(_config_error(exc))) from exc
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    listener = RichListener(err)
    with listener.progress:
        report = run_probe(config, output, url_provider(base_url, model), listener)
    if report.error:
        err.print(f"[red]error:[/] {report.error}")
    print_summary(Console(), report, str(output))
    raise SystemExit(exit_code(report))
