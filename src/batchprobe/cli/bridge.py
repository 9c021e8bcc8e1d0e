"""`batchprobe bridge`: run allowlisted probes on remote runners over a git bus.

Exit codes: 0 success; 1 a request ran and failed (or timed out, or was interrupted);
2 bad input or a bridge error (one line on stderr), including a rejected manifest.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from batchprobe.bridge.doctor import doctor as run_doctor
from batchprobe.bridge.envprobe import probe_environment
from batchprobe.bridge.executor import ExecutorSettings
from batchprobe.bridge.executor import execute as run_execute
from batchprobe.bridge.gitbus import (
    BranchState,
    check,
    check_branch,
    fetch_results,
    publish_results,
    wait_for_results,
)
from batchprobe.bridge.gitbus import (
    request as send_request,
)
from batchprobe.bridge.presets import PRESETS
from batchprobe.bridge.summary import Summary
from batchprobe.bridge.workflow import parse_runs_on, write_workflow

_REPO = click.option(
    "--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
    show_default=True, help="The git repository (any directory inside it).",
)  # fmt: skip
_REMOTE = click.option("--remote", default="origin", show_default=True, help="Git remote.")
_WAIT = click.option(
    "--wait", "wait_s", type=click.FloatRange(min=0), default=0.0, show_default=True,
    help="Seconds to keep polling for results.",
)  # fmt: skip
_INTERVAL = click.option(
    "--interval", "interval_s", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
    help="Seconds between polls.",
)  # fmt: skip


@click.group(name="bridge")
def bridge() -> None:
    """Run allowlisted probes on remote hardware through a git remote and GitHub Actions."""


def _echo_summary(summary: Summary) -> None:
    click.echo(f"status: {summary.status}")
    if summary.preset:
        params = " ".join(f"{key}={value}" for key, value in summary.params.items())
        click.echo(f"preset: {summary.preset} {params}".rstrip())
    for command in summary.commands:
        outcome = "skipped" if command.skipped else f"exit {command.exit_code}"
        outcome += " (timed out)" if command.timed_out else ""
        click.echo(f"  [{command.index}] {outcome} in {command.duration_s:.1f} s: {command.log}")
    for path in summary.result_paths:
        click.echo(f"result: {path}")
    if summary.error:
        click.echo(f"error: {summary.error}")


def _parse_params(pairs: tuple[str, ...]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--param")
        if key in params:
            raise click.BadParameter(f"{key} given twice", param_hint="--param")
        params[key] = value
    return params


@bridge.command(name="presets")
def presets() -> None:
    """List the allowlisted presets and their parameters."""
    for preset in PRESETS.values():
        click.echo(f"{preset.name}: {preset.description} (timeout {preset.timeout_s} s)")
        for key, spec in preset.params.items():
            default = spec.default_text()
            suffix = f", default {default}" if default is not None else ", required"
            click.echo(f"    {key}: {spec.allowed()}{suffix}")


@bridge.command(name="execute")
@click.option("--manifest", "manifest_path", type=click.Path(path_type=Path), required=True)
@click.option("--results", "results_dir", type=click.Path(path_type=Path), required=True)
@click.option(
    "--max-seconds", type=click.FloatRange(min=1), default=None,
    help="Cap every preset's time budget on this runner.",
)  # fmt: skip
def execute(manifest_path: Path, results_dir: Path, max_seconds: float | None) -> None:
    """Runner side: validate a manifest, run its preset here, write summary.json."""
    settings = ExecutorSettings(
        python=sys.executable, env=dict(os.environ), cwd=Path.cwd(), max_seconds=max_seconds
    )
    summary = run_execute(manifest_path, results_dir, settings)
    _echo_summary(summary)
    if summary.status == "rejected":
        sys.exit(2)
    sys.exit(0 if summary.ok else 1)


@bridge.command(name="request")
@click.option("--preset", required=True, help="Preset name (see `bridge presets`).")
@click.option("--param", "pairs", multiple=True, metavar="KEY=VALUE", help="Preset parameter.")
@click.option("--ref", default=None, help="Base the request on this commit instead of HEAD.")
@click.option("--dest", type=click.Path(path_type=Path), default=None, help="Results directory.")
@_REMOTE
@_WAIT
@_INTERVAL
@_REPO
def request(
    preset: str, pairs: tuple[str, ...], ref: str | None, dest: Path | None, remote: str,
    wait_s: float, interval_s: float, repo: Path,
) -> None:  # fmt: skip
    """Push a request branch for PRESET; with --wait, also wait for and fetch its results."""
    receipt = send_request(repo, preset, _parse_params(pairs), remote=remote, ref=ref)
    click.echo(f"requested: {receipt.branch} ({receipt.commit[:12]})")
    if wait_s > 0:
        state = wait_for_results(
            repo, receipt.branch, remote=remote, wait_s=wait_s, interval_s=interval_s
        )
        _finish_fetch(repo, state, dest)


@bridge.command(name="status")
@click.argument("branch")
@_REMOTE
@_REPO
def status(branch: str, remote: str, repo: Path) -> None:
    """Fetch BRANCH once and print whether its results are in, and their summary."""
    state = check(repo, branch, remote=remote)
    click.echo(f"{state.branch}: {state.state} at {state.commit[:12]}")
    if state.summary is not None:
        _echo_summary(state.summary)


def _finish_fetch(repo: Path, state: BranchState, dest: Path | None) -> None:
    if state.summary is None:
        click.echo(f"{state.branch}: still pending; try `batchprobe bridge fetch` later", err=True)
        sys.exit(2)
    target = dest or Path("batchprobe-bridge-results") / state.branch.split("/", 1)[1]
    files = fetch_results(repo, state, target)
    _echo_summary(state.summary)
    click.echo(f"copied {len(files)} file(s) to {target}")
    sys.exit(0 if state.summary.ok else 1)


@bridge.command(name="fetch")
@click.argument("branch")
@click.option("--dest", type=click.Path(path_type=Path), default=None, help="Results directory.")
@_REMOTE
@_WAIT
@_INTERVAL
@_REPO
def fetch(
    branch: str, dest: Path | None, remote: str, wait_s: float, interval_s: float, repo: Path
) -> None:
    """Poll BRANCH until its results arrive, print the summary and copy the results out."""
    check_branch(branch)
    state = wait_for_results(repo, branch, remote=remote, wait_s=wait_s, interval_s=interval_s)
    _finish_fetch(repo, state, dest)


@bridge.command(name="publish")
@click.option("--results", "results_dir", type=click.Path(path_type=Path), required=True)
@click.option("--branch", required=True, help="The request branch (GITHUB_REF_NAME).")
@_REMOTE
@_REPO
def publish(results_dir: Path, branch: str, remote: str, repo: Path) -> None:
    """Runner side: commit the results directory back to the request branch and push."""
    commit = publish_results(repo, results_dir, branch, remote=remote)
    click.echo(f"published {commit[:12]} to {branch}")


@bridge.command(name="init-workflow")
@click.option("--runs-on", required=True, help="Runner labels, e.g. self-hosted,macOS,ARM64.")
@click.option("--install", default=".[test]", show_default=True, help="What pip installs.")
@click.option("--force", is_flag=True, help="Overwrite an existing workflow file.")
@click.option(
    "--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
    show_default=True, help="Repository root.",
)  # fmt: skip
def init_workflow(runs_on: str, install: str, force: bool, root: Path) -> None:
    """Write .github/workflows/batchprobe-bridge.yml for self-hosted runners."""
    path = write_workflow(root, parse_runs_on(runs_on), install=install, force=force)
    click.echo(f"wrote {path}")


@bridge.command(name="doctor")
@_REMOTE
@_REPO
def doctor(remote: str, repo: Path) -> None:
    """Check the remote, push rights (dry run), the workflow file and the presets."""
    checks = run_doctor(repo, remote=remote, env=dict(os.environ))
    for item in checks:
        click.echo(f"{item.status:>4}  {item.name}: {item.detail}")
    sys.exit(1 if any(item.status == "fail" for item in checks) else 0)


@bridge.command(name="env-probe")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
def env_probe(output: Path) -> None:
    """Write this machine's versions and hardware as JSON (the env-probe preset)."""
    report = probe_environment()
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    click.echo(f"wrote {output}")
