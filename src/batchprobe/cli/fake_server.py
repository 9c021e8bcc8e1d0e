"""`batchprobe fake-server`: run the fake OpenAI-compatible server in the foreground."""

from __future__ import annotations

import click
from pydantic import ValidationError

from batchprobe.errors import ConfigError
from batchprobe.fake import (
    BATCHING_MODES,
    FAULT_MODES,
    FAULT_WHEN_MODES,
    LOGPROBS_FORMATS,
    FakeServerConfig,
    serve,
)

# Exit status when the exit_after fault stops the server: a crash, as far as a parent knows.
EXIT_AFTER_STATUS = 3


def _print_listening(url: str) -> None:
    # The first stdout line, flushed: a parent that passed --port 0 reads the port from it.
    print(f"listening on {url}", flush=True)


def _build_config(**values: object) -> FakeServerConfig:
    try:
        return FakeServerConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError.from_validation(exc) from exc


@click.command(name="fake-server")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0 = any free."
)
@click.option("--model-id", default="fake-model", show_default=True)
@click.option("--ttft-ms", type=click.FloatRange(min=0), default=50.0, show_default=True)
@click.option("--itl-ms", type=click.FloatRange(min=0), default=10.0, show_default=True)
@click.option("--jitter-ms", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option(
    "--batching", type=click.Choice(BATCHING_MODES), default="continuous", show_default=True
)
@click.option("--batch-cap", type=click.IntRange(min=1), default=64, show_default=True)
@click.option(
    "--slowdown",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Per-token step = itl * (1 + slowdown * (active - 1)).",
)
@click.option(
    "--degrade-after",
    type=click.IntRange(min=1),
    default=None,
    help="After this many generation requests, batching gains nothing any more (the step "
    "grows as with --slowdown 1): a server left slow by its own history.",
)
@click.option("--prefix-cache", is_flag=True, help="Simulate a prompt cache and serve /props.")
@click.option(
    "--kv-tokens",
    type=click.IntRange(min=16, max=10**9),
    default=None,
    help="A KV pool of this many tokens shared by the requests in flight, stated in /props and "
    "/metrics: a full pool queues requests; one larger than the pool gets HTTP 400.",
)
@click.option(
    "--close-after-stream",
    is_flag=True,
    help="Close the connection after every stream without a Connection: close header, as "
    "llama-server does.",
)
@click.option("--fault", type=click.Choice(FAULT_MODES), default="none", show_default=True)
@click.option(
    "--fault-when",
    type=click.Choice(FAULT_WHEN_MODES),
    default="always",
    show_default=True,
    help="Which requests the fault hits: every one, concurrent ones, those arriving above "
    "--fault-above in flight, one traffic shape's situation (join, ragged, early, repeat, "
    "params; see the README), the probe's warm-up requests (warmup), or those arriving while "
    "3 or more are in flight, one longer than the rest (crowd).",
)
@click.option(
    "--fault-above",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="With --fault-when above: the fault hits requests arriving while more than this many "
    "requests, the arriving one included, are in flight.",
)
@click.option(
    "--fault-every",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="The fault fires only on every this-many-th sending of the same prompt (its run id "
    "aside): a wave replayed that many times shows it once.",
)
@click.option(
    "--exit-after",
    type=click.IntRange(min=1),
    default=None,
    help="With --fault exit_after: exit (status 3) after this many answered requests; with "
    "--fault stall: never answer a generation request after them (the HTTP front stays up).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the jitter.")
@click.option(
    "--logprobs-format",
    type=click.Choice(LOGPROBS_FORMATS),
    default="openai",
    show_default=True,
    help="How logprobs asked for come back: OpenAI's layouts, llama.cpp's (completions in "
    "the chat layout), or none at all.",
)
@click.option(
    "--no-completions",
    "serve_completions",
    is_flag=True,
    flag_value=False,
    default=True,
    help="Serve chat only: /v1/completions answers 404 (like transformers serve 4.56.2).",
)
def fake_server(host: str, port: int, **settings: object) -> None:
    """Serve a fake OpenAI-compatible API with a latency, batching and fault model.

    The first line on stdout is `listening on http://HOST:PORT`. SIGINT/SIGTERM stop it
    (status 0); the exit_after fault stops it with status 3.
    """
    config = _build_config(**settings)
    reason = serve(config, host, port, on_listening=_print_listening)
    if reason == "exit_after":
        click.echo(f"fake-server: stopped after {config.exit_after} requests", err=True)
        raise SystemExit(EXIT_AFTER_STATUS)
