"""A user-supplied server command with `{port}` / `{model}` placeholders (`--serve-cmd`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from batchprobe.engines._base import Engine
from batchprobe.engines._types import Installation, InstallRecipe, LaunchSpec, PlatformName
from batchprobe.errors import ConfigError

PLACEHOLDERS = ("port", "model", "host", "concurrency")
_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")


def check_template(argv: Sequence[str]) -> tuple[str, ...]:
    """Validate an argv template: non-empty, `{port}` present, only known placeholders."""
    if not argv:
        raise ConfigError("serve_cmd", "empty command; give the server's argv with {port}")
    for arg in argv:
        for name in _PLACEHOLDER_RE.findall(arg):
            if name not in PLACEHOLDERS:
                raise ConfigError(
                    "serve_cmd",
                    f"unknown placeholder {{{name}}}; allowed: {', '.join(PLACEHOLDERS)}",
                )
    if not any("{port}" in arg for arg in argv):
        raise ConfigError(
            "serve_cmd", "the command must contain {port} (batchprobe picks the port)"
        )
    return tuple(argv)


class ServeCmd(Engine):
    """Any OpenAI-compatible server started by a command line; the mode is the user's business."""

    name = "serve-cmd"
    model_format = "gguf"  # the user's command decides; the alias keeps its GGUF
    aliases = ("serve_cmd",)
    description = "your own server command; needs --serve-cmd with {port} (and {model})."
    readiness_path = "/v1/models"

    def __init__(self, template: Sequence[str] | None = None) -> None:
        self.template = check_template(template) if template is not None else None

    def install_recipe(self, version: str, platform: PlatformName) -> InstallRecipe:
        return InstallRecipe(kind="none", note="nothing to install: the command is yours")

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        if self.template is None:
            raise ConfigError("serve_cmd", "engine serve-cmd needs a command with {port}")
        values = {
            "port": str(spec.port),
            "model": spec.model,
            "host": spec.host,
            "concurrency": str(spec.concurrency),
        }
        return [_PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], arg) for arg in self.template]


ENGINE = ServeCmd()
