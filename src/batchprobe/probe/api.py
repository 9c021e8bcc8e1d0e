"""The library entry point: plan a run (validated before anything starts), then run it.

    plan = plan_run(base_url="http://127.0.0.1:8080", sessions=4)
    report = run_plan(plan)

``plan_run`` checks every input, picks the default engine and model, the prompt style from the
engine's capabilities and the arm plan, and builds the endpoint provider; ``run_plan`` probes and
writes the verdict file. The CLI only parses options into ``plan_run`` and renders the report.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from batchprobe.engines import get_engine
from batchprobe.engines.serve_cmd import check_template
from batchprobe.errors import ConfigError
from batchprobe.patches import get_patch
from batchprobe.probe.endpoint import EndpointProvider, url_provider
from batchprobe.probe.managed import EngineProvider, engine_target
from batchprobe.probe.plan import baseline_arm, engine_arms, parse_arms, url_arms
from batchprobe.probe.run import run_probe
from batchprobe.probe.state import ProbeListener
from batchprobe.probe.sweep import doubling, parse_sweep
from batchprobe.results.models import ArmSpec, PromptStyle, Report, RunConfig
from batchprobe.results.repro import REPRO_SCHEMA_VERSION, ReproCase
from batchprobe.results.thresholds import Thresholds
from batchprobe.workload.shapes import default_shapes

_STYLE_FOR_API: dict[str, PromptStyle] = {"completions": "completion", "chat": "chat"}


@dataclass(frozen=True)
class RunPlan:
    """A validated run: what it measures (``config``), who serves it, where the verdict goes."""

    config: RunConfig
    provider: EndpointProvider
    output: Path
    case: ReproCase | None = None
    """``replay``: the reproducer's case whose requests are the plan."""


def _validated(values: dict[str, object]) -> RunConfig:
    try:
        return RunConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError.from_validation(exc) from exc


def check_output(output: Path) -> None:
    """The verdict must be writable where asked, before a run spends minutes on an engine."""
    folder = output.parent
    if output.is_dir():
        raise ConfigError("output", f"{output} is a folder; give a file path")
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        # A path under a file (verdict.json/x.json) names a folder that is not one.
        for parent in folder.parents:
            if parent.exists() and not parent.is_dir():
                what = f"is under the file {parent}"
                break
        raise ConfigError("output", f"{folder} {what}; create the folder first")
    try:
        # Try it: permission bits say nothing for root or on a read-only or special filesystem.
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ConfigError("output", f"cannot write in {folder}: {exc.strerror}") from exc


def _serve_argv(serve_cmd: str | Sequence[str] | None) -> list[str] | None:
    if serve_cmd is None or not isinstance(serve_cmd, str):
        argv = None if serve_cmd is None else list(serve_cmd)
    else:
        try:
            argv = shlex.split(serve_cmd)
        except ValueError as exc:
            raise ConfigError("serve_cmd", f"{exc} in {serve_cmd!r}; quote each argument once")
    if argv is not None:
        check_template(argv)
    return argv


def _shapes(shapes: str | Sequence[str] | None) -> dict[str, object]:
    if shapes is None:
        return {}
    text = shapes if isinstance(shapes, str) else ",".join(shapes)
    return {"shapes": default_shapes().parse(text)}


def _workloads(workloads: str | Sequence[str] | None) -> dict[str, object]:
    if workloads is None:
        return {}
    names = workloads.split(",") if isinstance(workloads, str) else list(workloads)
    return {"workloads": [w.strip() for w in names if w.strip()]}


def _fields(
    settings: dict[str, object],
    workloads: str | Sequence[str] | None,
    shapes: str | Sequence[str] | None,
    prompt_style: PromptStyle | None,
    base_url: str | None,
) -> dict[str, object]:
    """RunConfig fields from the settings (Thresholds fields go under ``thresholds``)."""
    thresholds = {k: settings.pop(k) for k in list(settings) if k in Thresholds.model_fields}
    fields: dict[str, object] = {
        **settings, **_workloads(workloads), **_shapes(shapes), "base_url": base_url
    }
    if thresholds:
        fields["thresholds"] = thresholds
    if prompt_style is not None:
        fields["prompt_style"] = prompt_style
    return fields


def _plan_shape(
    first: RunConfig,
    arms: str | Sequence[ArmSpec] | None,
    sweep: str | Sequence[int] | None,
    quick: bool,
    managed: bool,
) -> dict[str, object]:
    """The plan's arms, or its sweep (the default: doubling to 2 x --sessions)."""
    sessions = first.sessions
    if sweep is not None and (quick or arms is not None):
        raise ConfigError("sweep", "a sweep is its own plan: drop --quick or --arms")
    if quick and arms is not None:
        raise ConfigError("quick", "--quick is a plan of arms already: drop --arms")
    if isinstance(arms, str):
        return {"arms": parse_arms(arms, managed=managed)}
    if arms is not None:
        return {"arms": list(arms)}
    if quick:
        return {"arms": engine_arms(sessions) if managed else url_arms(sessions)}
    depths, auto = (
        parse_sweep(sweep, sessions, first.max_sessions)
        if sweep is not None
        else (doubling(min(2 * sessions, 1024)), False)
    )
    return {"arms": [baseline_arm(managed)], "sweep": depths, "sweep_auto": auto}


# What shapes the requests a plan sends: a replay sends its case's own.
_PLAN_SETTINGS = ("sessions", "haystack_tokens", "max_tokens", "recall_max_tokens", "seed")


def read_case(path: Path) -> ReproCase:
    """A ``repro.json`` (``batchprobe repro`` writes it); ``ConfigError`` on ``replay``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("replay", f"{path}: cannot read it ({exc})") from exc
    try:
        return ReproCase.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(
            "replay", f"{path}: not a repro.json of schema {REPRO_SCHEMA_VERSION} "
            f"(written by `batchprobe repro`): {where}: {first['msg']}"
        ) from exc


@dataclass(frozen=True)
class _Target:
    base_url: str | None
    engine: str | None
    model: str | None
    patches: Sequence[str]
    engine_args: Sequence[str]


def _replay_plan(
    case: ReproCase, given: _Target, served: bool, settings: dict[str, object], shaped: bool
) -> tuple[_Target, list[ArmSpec], dict[str, object]]:
    """The target (the case's own unless one is given: ``served``), the arms (the case's
    wave as one arm at its depth and mode, then its serial references) and the settings."""
    if shaped or any(k in settings for k in _PLAN_SETTINGS):
        raise ConfigError("replay", "sends its case's own requests: drop --arms, --sweep, "
                          "--quick, --shapes, --workloads, --sessions, --haystack-tokens, "
                          "--max-tokens, --seed")
    t = case.target
    target = given
    if not served and t.engine is not None:
        target = _Target(None, t.engine, given.model or t.model_arg,
                         given.patches or t.patches, given.engine_args or t.engine_args)
    elif not served and t.base_url is not None:
        target = _Target(t.base_url, None, given.model or t.model, (), ())
    elif not served:
        raise ConfigError("replay", "the case names no server: pass --base-url or --engine")
    managed = target.base_url is None
    arm = ArmSpec(
        name=f"replay@{case.concurrency}", concurrency=case.concurrency, role="replay",
        mode=(case.mode or "batching") if managed else None,
        prefix_cache=managed and any(r.prefix_cache for r in case.requests),
    )
    thresholds = {**case.thresholds.model_dump(),
                  **{k: settings.pop(k) for k in list(settings) if k in Thresholds.model_fields}}
    return target, [arm, baseline_arm(managed)], {
        **settings, "sessions": case.concurrency, "thresholds": thresholds}


def plan_run(
    *,
    base_url: str | None = None,
    engine: str | None = None,
    model: str | None = None,
    serve_cmd: str | Sequence[str] | None = None,
    patches: Sequence[str] = (),
    engine_args: Sequence[str] = (),
    arms: str | Sequence[ArmSpec] | None = None,
    sweep: str | Sequence[int] | None = None,
    quick: bool = False,
    workloads: str | Sequence[str] | None = None,
    shapes: str | Sequence[str] | None = None,
    prompt_style: PromptStyle | None = None,
    output: Path | str = Path("verdict.json"),
    cache_dir: Path | None = None,
    on_install_step: Callable[[str], None] | None = None,
    replay: Path | str | None = None,
    **settings: object,
) -> RunPlan:
    """Validate a run and decide everything left open; raises ``ConfigError`` naming the field.

    With neither ``base_url`` nor ``engine`` it launches llama.cpp serving gemma3-270m (built
    on first use). The plan: the serial cold baseline and a sweep doubling to 2 x ``sessions``
    (``sweep``: depths, or ``"auto"``); ``quick`` or ``arms``: a plan of arms instead.
    ``settings``: ``RunConfig`` and ``Thresholds`` fields; the rest take their defaults.
    ``replay``: a ``repro.json``, sent as one arm against its own target (or the one given)
    and judged on correctness alone.
    """
    output = Path(output)
    case = None
    if replay is not None:
        case = read_case(Path(replay))
        shaped = any(x is not None for x in (arms, sweep, workloads, shapes)) or quick
        target, arms, settings = _replay_plan(
            case, _Target(base_url, engine, model, patches, engine_args),
            base_url is not None or engine is not None or serve_cmd is not None,
            settings, shaped,
        )
        base_url, engine, model = target.base_url, target.engine, target.model
        patches, engine_args = target.patches, target.engine_args
        prompt_style, settings["replay"] = case.prompt_style, str(replay)
    managed = base_url is None
    if not managed and (engine is not None or serve_cmd is not None or patches or engine_args):
        raise ConfigError(
            "base_url", "probes a running server: drop --engine/--serve-cmd/--patch/--engine-arg"
        )
    fields = _fields(settings, workloads, shapes, prompt_style, base_url)
    # Bounds first: a bad number fails before a model is assembled or an engine resolved.
    first = _validated(fields)
    fields.update(_plan_shape(first, arms, sweep, quick, managed))
    if first.max_sessions is not None and not fields.get("sweep_auto"):
        raise ConfigError("max_sessions", "applies to --sweep auto only")
    _validated(fields)
    check_output(output)
    argv = _serve_argv(serve_cmd)
    for name in patches:
        get_patch(name)
    if not managed:
        config = _validated({**fields, "model": model})
        return RunPlan(config=config, provider=url_provider(config.base_url or "", model),
                       output=output, case=case)
    ref, model_path = engine_target(engine, model, cache_dir)
    style = prompt_style or _STYLE_FOR_API[get_engine(ref.name).capabilities.default_api]
    config = _validated(
        {**fields, "engine": str(ref), "model": model_path, "prompt_style": style,
         "patches": list(patches), "engine_args": list(engine_args)}
    )  # fmt: skip
    # The default run builds what it needs (llama-server, ~7 min) on first use.
    provider = EngineProvider(
        ref, model_path, log_dir=output.with_name(output.stem + "-logs"), cache_dir=cache_dir,
        ready_timeout=config.ready_timeout_s, patches=patches, engine_args=engine_args,
        serve_cmd=argv, auto_install=engine is None, on_install_step=on_install_step,
    )  # fmt: skip
    return RunPlan(config=config, provider=provider, output=output, case=case)


def run_plan(plan: RunPlan, listener: ProbeListener | None = None) -> Report:
    """Probe every arm of ``plan``; the verdict file at ``plan.output`` is always left valid."""
    return run_probe(plan.config, plan.output, plan.provider, listener, plan.case)
