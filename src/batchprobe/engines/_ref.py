"""`NAME[==VERSION]` references to engines, validated at the edge."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict

from batchprobe.errors import ConfigError

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_FORM = "expected NAME or NAME==VERSION, e.g. vllm-mlx==0.3.0"


class EngineRef(BaseModel):
    """An engine name and, optionally, an exact version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str | None = None

    @classmethod
    def parse(cls, text: str) -> EngineRef:
        """Parse ``vllm-mlx`` or ``vllm-mlx==0.3.0``; anything else is a ConfigError."""
        raw = text.strip()
        name, sep, version = raw.partition("==")
        name = name.strip().lower()
        if not _NAME_RE.match(name) or (sep and "=" in version):
            raise ConfigError("engine", f"bad reference {text!r}; {_FORM}")
        if not sep:
            return cls(name=name)
        return cls(name=name, version=_check_version(version.strip(), text))

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}=={self.version}"


def _check_version(version: str, text: str) -> str:
    try:
        Version(version)
    except InvalidVersion as exc:
        raise ConfigError("engine", f"bad version {version!r} in {text!r}; {_FORM}") from exc
    return version
