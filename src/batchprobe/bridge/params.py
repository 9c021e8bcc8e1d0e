"""Typed, bounded preset parameters: what a manifest value may be, checked one by one.

Every check raises ManifestError naming the field, so a rejected manifest says exactly
which value broke which bound.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from batchprobe.errors import ManifestError

__all__ = [
    "MAX_VALUE_CHARS",
    "EnumParam",
    "IntParam",
    "ParamSpec",
    "PathParam",
    "field_name",
    "shown",
    "validate_param",
]

MAX_VALUE_CHARS = 200
"""No parameter value is longer; the longest legitimate one is a test path."""

_FROZEN = ConfigDict(extra="forbid", frozen=True, strict=True)
_DIGITS = re.compile(r"0|[1-9][0-9]{0,17}")
_CHOICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
# Every segment starts with a letter, digit or "_": this alone rules out "", ".", "..",
# hidden files and a leading "-" or "/".
_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}(?:/[A-Za-z0-9_][A-Za-z0-9_.-]{0,99})*")


def shown(value: str, limit: int = 40) -> str:
    """A hostile string made safe to put in an error message: quoted and shortened."""
    text = value if len(value) <= limit else value[:limit] + "..."
    return repr(text)


def field_name(key: str) -> str:
    """A key as it appears in an error's field: itself when plain, else quoted and shortened."""
    return key if key.isidentifier() and len(key) <= 40 else shown(key)


class IntParam(BaseModel):
    """A whole number in ``[minimum, maximum]``, written in plain digits."""

    model_config = _FROZEN
    kind: Literal["int"] = "int"
    help: str
    minimum: int = Field(ge=0)
    maximum: int
    default: int | None = None

    @model_validator(mode="after")
    def _bounds(self) -> IntParam:
        if self.maximum < self.minimum:
            raise ValueError("maximum is below minimum")
        if self.default is not None and not self.minimum <= self.default <= self.maximum:
            raise ValueError("default is out of bounds")
        return self

    def allowed(self) -> str:
        return f"a whole number from {self.minimum} to {self.maximum}"

    def check(self, field: str, value: str) -> str:
        if _DIGITS.fullmatch(value) is None:
            raise ManifestError(
                field, f"must be {self.allowed()} in plain digits, got {shown(value)}"
            )
        number = int(value)
        if not self.minimum <= number <= self.maximum:
            raise ManifestError(field, f"must be {self.allowed()}, got {number}")
        return value

    def default_text(self) -> str | None:
        return None if self.default is None else str(self.default)


class EnumParam(BaseModel):
    """One of a fixed list of choices (engine versions, prompt styles)."""

    model_config = _FROZEN
    kind: Literal["enum"] = "enum"
    help: str
    choices: tuple[str, ...] = Field(min_length=1)
    default: str | None = None

    @model_validator(mode="after")
    def _choices(self) -> EnumParam:
        for choice in self.choices:
            if _CHOICE.fullmatch(choice) is None:
                raise ValueError(f"choice {choice!r} has characters outside [A-Za-z0-9._+-]")
        if len(set(self.choices)) != len(self.choices):
            raise ValueError("choices repeat")
        if self.default is not None and self.default not in self.choices:
            raise ValueError("default is not one of the choices")
        return self

    def allowed(self) -> str:
        return "one of " + ", ".join(self.choices)

    def check(self, field: str, value: str) -> str:
        if value not in self.choices:
            raise ManifestError(field, f"must be {self.allowed()}; got {shown(value)}")
        return value

    def default_text(self) -> str | None:
        return self.default


class PathParam(BaseModel):
    """A repository-relative path at or under ``prefix`` (a directory)."""

    model_config = _FROZEN
    kind: Literal["path"] = "path"
    help: str
    prefix: str
    default: str | None = None

    @model_validator(mode="after")
    def _prefix(self) -> PathParam:
        if _PATH.fullmatch(self.prefix) is None:
            raise ValueError(f"prefix {self.prefix!r} is not a plain relative directory")
        if self.default is not None:
            # A bad default is a bug in the preset table; surface it at import.
            try:
                self.check("default", self.default)
            except ManifestError as exc:
                raise ValueError(str(exc)) from exc
        return self

    def allowed(self) -> str:
        return f"a relative path at or under {self.prefix}/ (segments of A-Z a-z 0-9 _ . -)"

    def check(self, field: str, value: str) -> str:
        if _PATH.fullmatch(value) is None:
            raise ManifestError(
                field, f"must be {self.allowed()}, without '..', '//' or a leading '/' or '.'"
            )
        if value != self.prefix and not value.startswith(self.prefix + "/"):
            raise ManifestError(field, f"must be {self.allowed()}; got {shown(value)}")
        return value

    def check_within(self, field: str, value: str, root: Path) -> None:
        """Refuse a path that a symlink in the checkout leads out of ``prefix``."""
        base = (root / self.prefix).resolve()
        target = (root / value).resolve()
        if target != base and base not in target.parents:
            raise ManifestError(field, f"resolves outside {self.prefix}/ (through a symlink)")

    def default_text(self) -> str | None:
        return self.default


ParamSpec = Annotated[IntParam | EnumParam | PathParam, Field(discriminator="kind")]


def validate_param(field: str, spec: ParamSpec, value: str) -> str:
    """Check one parameter value against its spec; raise ManifestError naming ``field``."""
    if len(value) > MAX_VALUE_CHARS:
        raise ManifestError(field, f"is {len(value)} characters; the limit is {MAX_VALUE_CHARS}")
    if any(mark in value for mark in "${}"):
        raise ManifestError(
            field, "placeholders ($, {, }) belong in preset templates, never in parameter values"
        )
    if value.startswith("-"):
        raise ManifestError(field, "must not start with '-' (it would be read as an option)")
    return spec.check(field, value)
