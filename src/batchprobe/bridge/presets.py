"""The preset allowlist: the only things a bridge runner ever executes.

A preset is a fixed list of argv templates plus typed, bounded parameters. A template
argument is literal text with three kinds of holes, each filling part of exactly that
one argv element (never splitting or joining elements, never reaching a shell):

- ``{name}``          a validated parameter value from the manifest;
- ``${ENV:NAME}``     a machine-local fact (model path, cache dir) read from the runner's
                      environment when the request executes, so it never travels in git;
- ``${RESULTS}``      the executor's results directory.

The program of each command is not a template string but one of two fixed choices,
``batchprobe`` or ``python``, both resolved to the interpreter that runs the executor so a
request always exercises the batchprobe installation that validated it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from batchprobe.bridge.params import (
    EnumParam,
    IntParam,
    ParamSpec,
    PathParam,
    field_name,
    shown,
    validate_param,
)
from batchprobe.errors import BridgeError, ManifestError

__all__ = [
    "PRESETS",
    "CommandTemplate",
    "ExecContext",
    "Preset",
    "get_preset",
    "parse_template",
]

_FROZEN = ConfigDict(extra="forbid", frozen=True, strict=True)
_HOLE = re.compile(
    r"\$\{ENV:(?P<env>[A-Z][A-Z0-9_]{0,63})\}"
    r"|\$\{(?P<results>RESULTS)\}"
    r"|\{(?P<param>[a-z][a-z0-9_]{0,31})\}"
)
_PRESET_NAME = re.compile(r"[a-z][a-z0-9-]{1,40}")
_OUTPUT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def parse_template(arg: str) -> list[tuple[str, str]]:
    """Split one template argument into (kind, text) segments: lit, param, env, results."""
    segments: list[tuple[str, str]] = []
    position = 0
    for hole in _HOLE.finditer(arg):
        segments.append(("lit", arg[position : hole.start()]))
        kind = hole.lastgroup or "lit"  # one named group per alternative, so never None
        segments.append((kind, hole.group(kind)))
        position = hole.end()
    segments.append(("lit", arg[position:]))
    for kind, text in segments:
        if kind == "lit" and any(mark in text for mark in "${}"):
            raise ValueError(f"template argument {arg!r} has a malformed placeholder")
    return [(kind, text) for kind, text in segments if kind != "lit" or text]


class ExecContext(BaseModel):
    """What the executor knows at run time: its interpreter, environment and results dir."""

    model_config = _FROZEN
    python: str
    env: dict[str, str]
    results_dir: str


class CommandTemplate(BaseModel):
    """One command: a fixed program and argument templates."""

    model_config = _FROZEN
    program: Literal["batchprobe", "python"]
    args: tuple[str, ...]

    @field_validator("args")
    @classmethod
    def _parse(cls, args: tuple[str, ...]) -> tuple[str, ...]:
        for arg in args:
            parse_template(arg)
        return args

    def holes(self, kind: str) -> set[str]:
        return {text for arg in self.args for k, text in parse_template(arg) if k == kind}

    def render(self, values: Mapping[str, str], context: ExecContext | None) -> list[str]:
        """Fill the holes; without a context, placeholders stay as written (for display)."""
        argv: list[str]
        if context is None:
            argv = [self.program]
        elif self.program == "batchprobe":
            argv = [context.python, "-m", "batchprobe"]
        else:
            argv = [context.python]
        for arg in self.args:
            argv.append(
                "".join(_fill(kind, text, values, context) for kind, text in parse_template(arg))
            )
        return argv


def _fill(kind: str, text: str, values: Mapping[str, str], context: ExecContext | None) -> str:
    if kind == "param":
        return values[text]
    if kind == "lit":
        return text
    if context is None:
        return f"${{ENV:{text}}}" if kind == "env" else "${RESULTS}"
    return context.env[text] if kind == "env" else context.results_dir


class Preset(BaseModel):
    """An allowlisted, bounded run: what it does, its parameters, commands and outputs."""

    model_config = _FROZEN
    name: str
    description: str
    timeout_s: int = Field(ge=1, le=6 * 3600)
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    commands: tuple[CommandTemplate, ...] = Field(min_length=1)
    outputs: tuple[str, ...] = ()
    """Result files the commands write into the results dir (verdicts, reports)."""

    @model_validator(mode="after")
    def _consistent(self) -> Preset:
        if _PRESET_NAME.fullmatch(self.name) is None:
            raise ValueError(f"preset name {self.name!r} is not lowercase-with-dashes")
        used = {name for command in self.commands for name in command.holes("param")}
        if used != set(self.params):
            raise ValueError(f"templates use {sorted(used)} but params are {sorted(self.params)}")
        for output in self.outputs:
            if _OUTPUT_NAME.fullmatch(output) is None:
                raise ValueError(f"output {output!r} is not a plain file name")
        return self

    def env_names(self) -> list[str]:
        return sorted({name for command in self.commands for name in command.holes("env")})

    def validate_params(self, given: Mapping[str, str]) -> dict[str, str]:
        """Check every given value and fill defaults; the result has exactly the declared keys."""
        for key in given:
            if key not in self.params:
                allowed = ", ".join(sorted(self.params)) or "none"
                raise ManifestError(
                    f"params.{field_name(key)}",
                    f"unknown parameter for preset {self.name}; allowed: {allowed}",
                )
        values: dict[str, str] = {}
        for key, spec in self.params.items():
            field = f"params.{key}"
            if key in given:
                values[key] = validate_param(field, spec, given[key])
                continue
            default = spec.default_text()
            if default is None:
                raise ManifestError(field, f"is required: {spec.allowed()}")
            values[key] = default
        return values

    def render(self, values: Mapping[str, str], context: ExecContext | None) -> list[list[str]]:
        """Argv lists for validated ``values``; a missing env variable stops everything first."""
        if context is not None:
            missing = [name for name in self.env_names() if not context.env.get(name)]
            if missing:
                raise BridgeError(
                    f"preset {self.name} needs environment variable(s) "
                    f"{', '.join(missing)} on this runner; nothing was run"
                )
        return [command.render(values, context) for command in self.commands]


def _int(help: str, minimum: int, maximum: int, default: int) -> IntParam:
    return IntParam(help=help, minimum=minimum, maximum=maximum, default=default)


_PROMPT_STYLE = EnumParam(
    help="completion (/v1/completions) or chat",
    choices=("completion", "chat"),
    default="completion",
)
_SEED = _int("workload seed", 0, 2**31 - 1, 0)


def _niah_params(
    sessions: int, haystack: tuple[int, int, int], tokens: int
) -> dict[str, ParamSpec]:
    """Probe parameters; ``sessions`` and ``tokens`` are maxima, ``haystack`` (min, max, default)."""
    return {
        "sessions": _int("concurrent sessions in the batching arm", 1, sessions, min(8, sessions)),
        "haystack_tokens": _int("haystack length in tokens", *haystack),
        "max_tokens": _int("decode output tokens per request", 8, tokens, min(128, tokens)),
        "prompt_style": _PROMPT_STYLE,
        "seed": _SEED,
    }


_PROBE_ARGS = (
    "--sessions", "{sessions}",
    "--haystack-tokens", "{haystack_tokens}",
    "--max-tokens", "{max_tokens}",
    "--prompt-style", "{prompt_style}",
    "--seed", "{seed}",
    "--output", "${RESULTS}/verdict.json",
)  # fmt: skip


_PYTEST_ARGS = (
    "-m", "pytest", "{path}", "-p", "no:cacheprovider", "--junitxml", "${RESULTS}/junit.xml",
)  # fmt: skip


def _engine_preset(name: str, engine: str, versions: tuple[str, ...], timeout_s: int) -> Preset:
    version = EnumParam(help=f"{engine} version", choices=versions, default=versions[-1])
    spec = f"{engine}=={{version}}"
    return Preset(
        name=name,
        description=f"install an allowlisted {engine}, then the A/B NIAH probe on "
        "${ENV:BATCHPROBE_MODEL}",
        timeout_s=timeout_s,
        params={"version": version, **_niah_params(64, (128, 32768, 2048), 1024)},
        commands=(
            CommandTemplate(program="batchprobe", args=("engines", "install", spec)),
            CommandTemplate(
                program="batchprobe",
                args=("run", "--engine", spec, "--model", "${ENV:BATCHPROBE_MODEL}", *_PROBE_ARGS),
            ),
        ),
        outputs=("verdict.json",),
    )


def _builtin_presets() -> dict[str, Preset]:
    presets = [
        _engine_preset(
            "vllm-mlx-niah", "vllm-mlx", ("0.3.0", "0.4.0", "0.4.1", "0.5.0", "0.6.0"), 3600
        ),
        _engine_preset(
            "mlx-lm-niah", "mlx-lm", ("0.28.4", "0.29.1", "0.30.7", "0.31.3", "0.32.2"), 2400
        ),
        _engine_preset("llama-cpp-niah", "llama-cpp", ("0.3.16", "0.3.30", "0.3.36"), 3600),
        Preset(
            name="url-niah",
            description="the A/B NIAH probe against an already running server at "
            "${ENV:BATCHPROBE_BASE_URL}",
            timeout_s=900,
            params=_niah_params(16, (64, 4096, 512), 256),
            commands=(
                CommandTemplate(
                    program="batchprobe",
                    args=("run", "--base-url", "${ENV:BATCHPROBE_BASE_URL}", *_PROBE_ARGS),
                ),
            ),
            outputs=("verdict.json",),
        ),
        Preset(
            name="env-probe",
            description="versions and hardware of the runner",
            timeout_s=300,
            commands=(
                CommandTemplate(program="batchprobe", args=("--version",)),
                CommandTemplate(
                    program="batchprobe",
                    args=("bridge", "env-probe", "--output", "${RESULTS}/env.json"),
                ),
            ),
            outputs=("env.json",),
        ),
        Preset(
            name="pytest-path",
            description="run pytest on one path under tests/ of the checked-out branch",
            timeout_s=1800,
            params={"path": PathParam(help="test file or directory", prefix="tests")},
            commands=(
                CommandTemplate(
                    program="python",
                    args=_PYTEST_ARGS,
                ),
            ),
            outputs=("junit.xml",),
        ),
    ]
    return {preset.name: preset for preset in presets}


PRESETS: Mapping[str, Preset] = MappingProxyType(_builtin_presets())
"""The allowlist, read-only. A runner executes nothing that is not in it."""


def get_preset(name: str) -> Preset:
    """The preset called ``name``; ManifestError on field ``preset`` lists the allowed names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ManifestError(
            "preset", f"unknown preset {shown(name)}; allowed: {', '.join(sorted(PRESETS))}"
        ) from None
