"""`batchprobe engines install|list|doctor`: thin wrappers over batchprobe.engines."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from batchprobe.engines import (
    EngineRef,
    default_registry,
    doctor,
    install,
    installed_versions,
    resolve,
)

_cache_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where environments live (default: $BATCHPROBE_CACHE_DIR or ~/.cache/batchprobe).",
)


@click.group(name="engines")
def engines() -> None:
    """Install, list and check the engines batchprobe manages."""


@engines.command(name="install")
@click.argument("ref", metavar="NAME[==VERSION]")
@click.option("--force", is_flag=True, help="Rebuild even if the environment exists.")
@_cache_option
def install_cmd(ref: str, force: bool, cache_dir: Path | None) -> None:
    """Create (or reuse) the environment for an engine version."""
    console = Console(stderr=True)
    started = time.monotonic()
    parsed = EngineRef.parse(ref)
    resolve(parsed)  # an unknown name fails here, before any progress display
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task(f"installing {parsed}", total=None)
        inst = install(
            parsed,
            cache_dir=cache_dir,
            force=force,
            on_step=lambda text: progress.update(task, description=text),
        )
    where = inst.executable or inst.root
    click.echo(f"{inst.name}=={inst.version} ready at {where} ({time.monotonic() - started:.0f}s)")


@engines.command(name="list")
@_cache_option
def list_cmd(cache_dir: Path | None) -> None:
    """Known engines, their default versions and what is installed."""
    table = Table("engine", "default", "installed", "runs on CI", "about")
    for engine in default_registry():
        installed = ", ".join(installed_versions(engine, cache_dir)) or "-"
        table.add_row(
            engine.name,
            engine.default_version or "-",
            installed,
            "yes" if engine.runs_here else "no",
            engine.description,
        )
    Console().print(table)


@engines.command(name="doctor")
@_cache_option
@click.option("--reap", is_flag=True, help="Stop engines left running by a batchprobe that died.")
def doctor_cmd(cache_dir: Path | None, reap: bool) -> None:
    """Check build tools, the cache, every installed environment and stale engine launches;
    exit 1 if one is broken."""
    table = Table("check", "ok", "detail")
    checks = doctor(cache_dir, reap=reap)
    for check in checks:
        table.add_row(check.subject, "ok" if check.ok else "FAIL", check.detail)
    Console().print(table)
    if not all(check.ok for check in checks):
        raise SystemExit(1)
