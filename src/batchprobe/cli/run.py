"""`batchprobe run`: probe a URL or a managed engine and write the verdict file."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from batchprobe.cli._render import RichListener
from batchprobe.cli.report import step_summary_path
from batchprobe.engines import DEFAULT_READY_TIMEOUT_S, get_engine
from batchprobe.errors import BatchprobeError, ConfigError
from batchprobe.patches import get_patch
from batchprobe.probe.endpoint import EndpointProvider, url_provider
from batchprobe.probe.managed import EngineProvider, engine_target
from batchprobe.probe.plan import engine_arms, parse_arms, url_arms
from batchprobe.probe.run import run_probe
from batchprobe.report import (
    Renderer,
    append_step_summary,
    parse_formats,
    print_summary,
    render_markdown,
    stdout_console,
    write_beside,
)
from batchprobe.report._error import run_error
from batchprobe.results.models import Outcome, Report, RunConfig
from batchprobe.results.thresholds import Thresholds

EXIT_PASS, EXIT_FAIL, EXIT_OTHER = 0, 1, 2
_WORKLOADS = ("recall", "decode")
_STYLE_FOR_API = {"completions": "completion", "chat": "chat"}
_LOG_LINES = 15


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
@click.option("--engine", help="Engine to launch, NAME[==VERSION] (see `batchprobe engines list`).")
@click.option("--model", help="Model id (URL) or model path/alias (engine, e.g. gemma3-270m).")
@click.option("--serve-cmd", help="With --engine serve-cmd: the server argv with {port} and {model}.")
@click.option("--patch", "patches", multiple=True, help="Runtime patch to apply inside the engine.")
@click.option("--sessions", type=click.IntRange(1, 1024), default=8, show_default=True,
              help="Concurrent sessions (and items per workload).")
@click.option("--haystack-tokens", type=click.IntRange(64, 200_000), default=1200,
              show_default=True, help="Recall prompt length target, in tokens.")
@click.option("--max-tokens", type=click.IntRange(8, 4096), default=128, show_default=True,
              help="Decode workload output length.")
@click.option("--prompt-style", type=click.Choice(["completion", "chat"]), default=None,
              help="completion for base models, chat for instruct models [default: completion, "
                   "or the engine's preferred API].")
@click.option("--workloads", default="recall,decode", show_default=True,
              help="Comma-separated: recall, decode.")
@click.option("--arms", help="Comma-separated NAME@N arms (default: serial@1,concurrent@N for a URL; "
                             "simple@1,batching@1,batching@N for an engine).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--min-speedup", type=click.FloatRange(min=0, min_open=True),
              default=Thresholds().min_speedup, show_default=True)
@click.option("--recall-floor", type=click.FloatRange(0, 1),
              default=Thresholds().recall_floor, show_default=True)
@click.option("--max-recall-drop", type=click.FloatRange(0, 1),
              default=Thresholds().max_recall_drop, show_default=True)
@click.option("--strict-greedy", is_flag=True, help="Fail when greedy outputs differ across arms.")
@click.option("--logprobs", is_flag=True,
              help="Record chosen-token logprobs and report their largest drift across arms.")
@click.option("--request-timeout", type=click.FloatRange(min=0, min_open=True), default=300.0,
              show_default=True, help="Seconds one request may take in all.")
@click.option("--ready-timeout", type=click.FloatRange(min=0, min_open=True),
              default=DEFAULT_READY_TIMEOUT_S, show_default=True,
              help="Seconds a launched engine may take to become ready.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Engine environments and models (default: $BATCHPROBE_CACHE_DIR or "
                   "~/.cache/batchprobe).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("verdict.json"), show_default=True,
              help="The verdict file; engine logs go to a folder beside it.")
@click.option("--report", "report_formats", default=None,
              help="Also write these reports beside the verdict: comma-separated html, md, "
                   "junit, console (verdict.html, verdict.md, verdict.junit.xml, verdict.txt).")
def run(
    base_url: str | None,
    engine: str | None,
    model: str | None,
    serve_cmd: str | None,
    patches: tuple[str, ...],
    sessions: int,
    haystack_tokens: int,
    max_tokens: int,
    prompt_style: str | None,
    workloads: str,
    arms: str | None,
    seed: int,
    min_speedup: float,
    recall_floor: float,
    max_recall_drop: float,
    strict_greedy: bool,
    logprobs: bool,
    request_timeout: float,
    ready_timeout: float,
    cache_dir: Path | None,
    output: Path,
    report_formats: str | None,
) -> None:
    """Probe whether batching is parallel AND correct; write the verdict file.

    With no --base-url and no --engine it probes llama.cpp serving gemma3-270m, building
    llama-server first when it is missing.

    Exit codes: 0 PASS, 1 FAIL, 2 INCONCLUSIVE or the run could not finish.
    """
    err = Console(stderr=True)
    managed = base_url is None
    try:
        if base_url is not None and (engine or serve_cmd or patches):
            raise ConfigError("--base-url", "probes a running server: drop --engine/--patch")
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise ConfigError("--base-url", f"{base_url!r} is not an http:// or https:// URL")
        for name in patches:
            get_patch(name)
        renderers: list[Renderer] = parse_formats(report_formats) if report_formats else []
        provider: EndpointProvider
        if managed:
            ref, model_path = engine_target(engine, model, cache_dir)
            style = prompt_style or _STYLE_FOR_API[get_engine(ref.name).capabilities.default_api]
            provider = EngineProvider(
                ref,
                model_path,
                log_dir=output.with_name(output.stem + "-logs"),
                cache_dir=cache_dir,
                ready_timeout=ready_timeout,
                patches=patches,
                serve_cmd=shlex.split(serve_cmd) if serve_cmd else None,
                # The default run builds what it needs (llama-server, ~7 min) on first use.
                auto_install=engine is None,
                on_install_step=lambda text: err.print(f"  installing: {text}"),
            )
        else:
            style = prompt_style or "completion"
            provider = url_provider(base_url, model)  # type: ignore[arg-type]
        config = RunConfig(
            base_url=base_url,
            engine=str(ref) if managed else None,
            model=model_path if managed else model,
            sessions=sessions,
            haystack_tokens=haystack_tokens,
            max_tokens=max_tokens,
            prompt_style=style,  # type: ignore[arg-type]
            workloads=_workloads(workloads),  # type: ignore[arg-type]
            seed=seed,
            arms=parse_arms(arms, managed=managed) if arms else
            (engine_arms if managed else url_arms)(sessions),
            thresholds=Thresholds(
                min_speedup=min_speedup,
                recall_floor=recall_floor,
                max_recall_drop=max_recall_drop,
                strict_greedy=strict_greedy,
            ),
            patches=list(patches),
            logprobs=logprobs,
            request_timeout_s=request_timeout,
        )
    except ValidationError as exc:
        raise click.UsageError(str(_config_error(exc))) from exc
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    except BatchprobeError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise SystemExit(EXIT_OTHER) from exc
    listener = RichListener(err)
    with listener.progress:
        report = run_probe(config, output, provider, listener)
    message, _ = run_error(report)
    if message:
        err.print(f"[red]error:[/] {escape(message)}")
    if report.log_tail:
        tail = "\n".join(report.log_tail.splitlines()[-_LOG_LINES:])
        err.print(f"[dim]last lines of the engine log:\n{escape(tail)}[/]")
    out = stdout_console()
    print_summary(out, report, str(output))
    for path in write_beside(report, renderers, output):
        out.print(f"report written to {escape(str(path))}")
    summary = step_summary_path()
    if summary is not None:
        append_step_summary(render_markdown(report), summary)
    raise SystemExit(exit_code(report))
