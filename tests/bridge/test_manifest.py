"""The manifest: strict parsing, field-naming errors, argv building."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from batchprobe.bridge.manifest import (
    MAX_MANIFEST_BYTES,
    Manifest,
    build_commands,
    check_paths,
    effective_params,
    load_manifest,
    new_manifest,
    parse_manifest,
    validate_manifest,
)
from batchprobe.bridge.presets import ExecContext
from batchprobe.errors import ManifestError

VALID: dict[str, object] = {
    "schema_version": 1,
    "preset": "url-niah",
    "params": {"sessions": "4", "seed": "7"},
    "ref": "0123abcd",
    "requested_by": "Ada Lovelace <ada@example.org>",
    "nonce": "0123456789abcdef",
}


def _field_of(data: object) -> str:
    with pytest.raises(ManifestError) as caught:
        validate_manifest(data)
    return caught.value.field


def test_a_valid_manifest_round_trips_through_json() -> None:
    manifest = validate_manifest(VALID)
    assert parse_manifest(manifest.model_dump_json()) == manifest
    assert parse_manifest(json.dumps(VALID).encode()) == manifest


@pytest.mark.parametrize(
    ("change", "field"),
    [({"schema_version": 2}, "schema_version"), ({"schema_version": True}, "schema_version"),
     ({"schema_version": 1.0}, "schema_version"), ({"schema_version": "1"}, "schema_version"),
     ({"preset": "rm"}, "preset"), ({"preset": 3}, "preset"), ({"params": []}, "params"),
     ({"params": {"sessions": 4}}, "params.sessions"), ({"params": {"sessions": "99"}}, "params.sessions"),
     ({"params": {"nope": "1"}}, "params.nope"), ({"ref": "-x"}, "ref"), ({"ref": "a..b"}, "ref"),
     ({"ref": ""}, "ref"), ({"ref": "a b"}, "ref"), ({"ref": "x" * 201}, "ref"),
     ({"requested_by": ""}, "requested_by"), ({"requested_by": "a\x1bb"}, "requested_by"),
     ({"requested_by": "x" * 201}, "requested_by"), ({"nonce": "0123"}, "nonce"),
     ({"nonce": "0123456789ABCDEF"}, "nonce"), ({"extra": 1}, "extra")],
)  # fmt: skip
def test_each_bad_field_is_named(change: dict[str, object], field: str) -> None:
    assert _field_of({**VALID, **change}) == field


@pytest.mark.parametrize("missing", ["schema_version", "preset", "ref", "requested_by", "nonce"])
def test_missing_fields_are_named(missing: str) -> None:
    data = {key: value for key, value in VALID.items() if key != missing}
    with pytest.raises(ManifestError, match="is required") as caught:
        validate_manifest(data)
    assert caught.value.field == missing


def test_unknown_top_level_keys_list_the_allowed_ones() -> None:
    with pytest.raises(ManifestError, match="allowed: schema_version, preset"):
        validate_manifest({**VALID, "command": "rm -rf /"})


def test_a_hostile_key_is_quoted_in_the_field() -> None:
    assert _field_of({**VALID, "a b": 1}) == "'a b'"


@pytest.mark.parametrize("data", [[], "x", 1, None])
def test_the_document_must_be_an_object(data: object) -> None:
    assert _field_of(data) == "manifest"


@pytest.mark.parametrize(
    ("text", "message"),
    [("{", "not valid JSON"), ('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"),
     ("[" * 50_000, "not valid JSON"), (b"\xff\xfe{", "not valid JSON")],
)  # fmt: skip
def test_malformed_json_is_rejected_as_the_manifest(text: str | bytes, message: str) -> None:
    with pytest.raises(ManifestError, match=message) as caught:
        parse_manifest(text)
    assert caught.value.field == "manifest"


def test_duplicate_keys_are_rejected() -> None:
    text = json.dumps(VALID)[:-1] + ', "preset": "env-probe"}'
    with pytest.raises(ManifestError, match="appears twice") as caught:
        parse_manifest(text)
    assert caught.value.field == "preset"


def test_oversized_manifests_are_rejected_before_parsing() -> None:
    text = json.dumps({**VALID, "pad": "x" * MAX_MANIFEST_BYTES})
    with pytest.raises(ManifestError, match="limit") as caught:
        parse_manifest(text)
    assert caught.value.field == "manifest"


def test_load_manifest_reads_a_file_and_reports_unreadable_ones(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(VALID))
    assert load_manifest(path).preset == "url-niah"
    with pytest.raises(ManifestError, match="cannot read") as caught:
        load_manifest(tmp_path / "missing.json")
    assert caught.value.field == "manifest"
    path.write_text(json.dumps({**VALID, "pad": "x" * (2 * MAX_MANIFEST_BYTES)}))
    with pytest.raises(ManifestError, match="limit"):
        load_manifest(path)


def test_new_manifest_draws_a_fresh_nonce() -> None:
    first = new_manifest("env-probe", {}, ref="HEAD", requested_by="me")
    second = new_manifest("env-probe", {}, ref="HEAD", requested_by="me")
    assert first.nonce != second.nonce
    assert len(first.nonce) == 16
    fixed = new_manifest("env-probe", {}, ref="HEAD", requested_by="me", nonce="f" * 16)
    assert fixed.nonce == "f" * 16
    with pytest.raises(ManifestError) as caught:
        new_manifest("env-probe", {"x": "1"}, ref="HEAD", requested_by="me")
    assert caught.value.field == "params.x"


def test_effective_params_fill_defaults() -> None:
    params = effective_params(validate_manifest(VALID))
    assert params["sessions"] == "4"
    assert params["seed"] == "7"
    assert params["prompt_style"] == "completion"


def test_build_commands_fills_params_and_placeholders() -> None:
    manifest = validate_manifest(VALID)
    shown = build_commands(manifest)
    assert shown[0][:4] == ["batchprobe", "run", "--base-url", "${ENV:BATCHPROBE_BASE_URL}"]
    context = ExecContext(
        python="/venv/bin/python", env={"BATCHPROBE_BASE_URL": "http://127.0.0.1:9"},
        results_dir="/r",
    )  # fmt: skip
    argv = build_commands(manifest, context)[0]
    assert argv[:6] == ["/venv/bin/python", "-m", "batchprobe", "run", "--base-url",
                        "http://127.0.0.1:9"]  # fmt: skip
    assert argv[argv.index("--sessions") + 1] == "4"
    assert argv[-2:] == ["--output", "/r/verdict.json"]


def test_check_paths_follows_symlinks_in_the_checkout(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "leak").symlink_to(tmp_path)
    good = validate_manifest({**VALID, "preset": "pytest-path", "params": {"path": "tests"}})
    check_paths(good, tmp_path)
    check_paths(validate_manifest(VALID), tmp_path)  # no path params: nothing to check
    bad = validate_manifest({**VALID, "preset": "pytest-path", "params": {"path": "tests/leak"}})
    with pytest.raises(ManifestError) as caught:
        check_paths(bad, tmp_path)
    assert caught.value.field == "params.path"


def test_manifest_is_immutable() -> None:
    manifest = validate_manifest(VALID)
    with pytest.raises(ValueError):
        manifest.preset = "env-probe"  # type: ignore[misc]
    assert isinstance(manifest, Manifest)
