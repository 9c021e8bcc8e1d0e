"""The request manifest: what a client asks a runner to execute, validated at the edge.

Every way in (JSON text, a file, a dict, a fresh request) ends in ``validate_manifest``,
and every rejection is a ``ManifestError`` whose ``field`` names the offending field
(``preset``, ``nonce``, ``params.sessions``, ``manifest`` for the document as a whole).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from batchprobe.bridge.params import PathParam, field_name, shown
from batchprobe.bridge.presets import PRESETS, ExecContext, get_preset
from batchprobe.errors import ManifestError

__all__ = [
    "MAX_MANIFEST_BYTES",
    "SCHEMA_VERSION",
    "Manifest",
    "build_commands",
    "check_paths",
    "effective_params",
    "load_manifest",
    "new_manifest",
    "parse_manifest",
    "validate_manifest",
]

SCHEMA_VERSION = 1
MAX_MANIFEST_BYTES = 64 * 1024
_NONCE_CHARS = frozenset("0123456789abcdef")
_REF_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-")


class Manifest(BaseModel):
    """One request. ``params`` are strings; the preset's types decide what they may be."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    schema_version: int
    """Manifest format version; this runner understands 1."""
    preset: str
    """Name of an allowlisted preset."""
    params: dict[str, str] = Field(default_factory=dict)
    """Parameter values as strings, checked against the preset's typed bounds."""
    ref: str
    """The commit (or ref) the request was made from, for the record."""
    requested_by: str = Field(min_length=1, max_length=200)
    """Who asked: the requester's git identity."""
    nonce: str
    """16 lowercase hex digits; makes the request branch unique."""

    @field_validator("schema_version")
    @classmethod
    def _version(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            raise ValueError(f"must be {SCHEMA_VERSION}; this runner understands no other")
        return value

    @field_validator("preset")
    @classmethod
    def _preset(cls, value: str) -> str:
        if value not in PRESETS:
            allowed = ", ".join(sorted(PRESETS))
            raise ValueError(f"unknown preset {shown(value)}; allowed: {allowed}")
        return value

    @field_validator("ref")
    @classmethod
    def _ref(cls, value: str) -> str:
        if not 1 <= len(value) <= 200 or not set(value) <= _REF_CHARS:
            raise ValueError("must be 1-200 characters of A-Z a-z 0-9 . _ / -")
        if value.startswith("-") or ".." in value:
            raise ValueError("must not start with '-' or contain '..'")
        return value

    @field_validator("requested_by")
    @classmethod
    def _who(cls, value: str) -> str:
        if not value.isprintable():
            raise ValueError("must be printable text (no control characters)")
        return value

    @field_validator("nonce")
    @classmethod
    def _nonce(cls, value: str) -> str:
        if len(value) != 16 or not set(value) <= _NONCE_CHARS:
            raise ValueError("must be exactly 16 lowercase hex digits")
        return value

    @model_validator(mode="after")
    def _params(self) -> Manifest:
        # Raises ManifestError itself (not ValueError) so the field it names survives pydantic.
        get_preset(self.preset).validate_params(self.params)
        return self


def _field_of(loc: tuple[int | str, ...]) -> str:
    return ".".join(field_name(str(part)) for part in loc) or "manifest"


def _translate(exc: ValidationError) -> NoReturn:
    error = exc.errors(include_url=False)[0]
    field = _field_of(tuple(error["loc"]))
    if error["type"] == "extra_forbidden":
        allowed = ", ".join(Manifest.model_fields)
        raise ManifestError(field, f"unknown field; allowed: {allowed}") from exc
    if error["type"] == "missing":
        raise ManifestError(field, "is required") from exc
    message = str(error["msg"]).removeprefix("Value error, ")
    raise ManifestError(field, message) from exc


def validate_manifest(data: object) -> Manifest:
    """A Manifest from decoded JSON, or ManifestError naming the first bad field."""
    if not isinstance(data, dict):
        raise ManifestError("manifest", f"must be a JSON object, got {type(data).__name__}")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        _translate(exc)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise ManifestError(field_name(key), "appears twice")
        result[key] = value
    return result


def _no_constant(name: str) -> NoReturn:
    raise ManifestError("manifest", f"{name} is not valid JSON")


def parse_manifest(text: str | bytes) -> Manifest:
    """Parse and validate manifest JSON (strict: no duplicate keys, NaN, or huge input)."""
    size = len(text.encode() if isinstance(text, str) else text)
    if size > MAX_MANIFEST_BYTES:
        raise ManifestError("manifest", f"is {size} bytes; the limit is {MAX_MANIFEST_BYTES}")
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        # ManifestError from the hooks is not a ValueError, so it passes through untouched.
        raise ManifestError("manifest", f"is not valid JSON ({type(exc).__name__})") from exc
    return validate_manifest(data)


def load_manifest(path: Path) -> Manifest:
    """Read and validate a manifest file without reading more than the size limit."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ManifestError("manifest", f"cannot read {path}: {exc.strerror}") from exc
    return parse_manifest(raw)


def new_manifest(
    preset: str, params: Mapping[str, str], *, ref: str, requested_by: str, nonce: str | None = None
) -> Manifest:
    """A fresh, validated request with a random nonce."""
    return validate_manifest(
        {
            "schema_version": SCHEMA_VERSION,
            "preset": preset,
            "params": dict(params),
            "ref": ref,
            "requested_by": requested_by,
            "nonce": secrets.token_hex(8) if nonce is None else nonce,
        }
    )


def effective_params(manifest: Manifest) -> dict[str, str]:
    """The manifest's parameters with the preset's defaults filled in."""
    return get_preset(manifest.preset).validate_params(manifest.params)


def build_commands(manifest: Manifest, context: ExecContext | None = None) -> list[list[str]]:
    """The argv lists a manifest runs. Without ``context``, placeholders stay as written."""
    preset = get_preset(manifest.preset)
    return preset.render(preset.validate_params(manifest.params), context)


def check_paths(manifest: Manifest, root: Path) -> None:
    """Refuse path parameters that resolve outside their prefix inside checkout ``root``."""
    preset = get_preset(manifest.preset)
    values = preset.validate_params(manifest.params)
    for key, spec in preset.params.items():
        if isinstance(spec, PathParam):
            spec.check_within(f"params.{key}", values[key], root)
