"""Property-based attack on the manifest: >= 10,000 hostile manifests, all rejected by field.

Each hostile manifest is a valid one with exactly one defect, so the error must name the
field that carries it. Half go through JSON text (``parse_manifest``), half as decoded
data (``validate_manifest``). A second property checks that an accepted manifest's argv
holds nothing but template text and validated parameter values.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchprobe.bridge.manifest import (
    MAX_MANIFEST_BYTES,
    Manifest,
    build_commands,
    parse_manifest,
    validate_manifest,
)
from batchprobe.bridge.params import (
    MAX_VALUE_CHARS,
    EnumParam,
    IntParam,
    ParamSpec,
    PathParam,
    field_name,
)
from batchprobe.bridge.presets import PRESETS, ExecContext
from batchprobe.errors import ManifestError

# The quick loop checks 500 hostile manifests (~5 s here); CI's bridge coverage gate runs the
# full 10,500 (`.ci/run` sets BATCHPROBE_HOSTILE_EXAMPLES), ~100 s on 2 cores.
HOSTILE_EXAMPLES = int(os.environ.get("BATCHPROBE_HOSTILE_EXAMPLES", "500"))
# Accepted manifests and any-string parameters: 500 in the quick loop, 1,500 in the gate.
ACCEPTED_EXAMPLES = min(HOSTILE_EXAMPLES, 1500)
FIELDS = tuple(Manifest.model_fields)
SHELL = list(";|&$`()<>*?!~'\"\\ \n\t#=%^[]{},") + ["$(reboot)", "`id`", "&& rm -rf /", "\x00"]
PLACEHOLDERS = ["${ENV:HOME}", "${ENV:BATCHPROBE_MODEL}", "${RESULTS}", "{sessions}", "{path}",
                "${HOME}", "$HOME", "${{ github.token }}"]  # fmt: skip
TRAVERSAL = ["..", "../", "tests/..", "tests/../..", "/etc/passwd", "tests/./x", "tests//x",
             "~/x", "./tests", "tests/", "..\\tests", "tests/../../etc", "/tests/x",
             "tests/x/../../..", "tests/.git", "src/batchprobe"]  # fmt: skip
SETTINGS = settings(
    derandomize=True, database=None, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip
JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                                     allow_infinity=False) | st.text(max_size=20)  # fmt: skip
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
NOT_STR = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                                allow_infinity=False) | st.lists(JSON_SCALARS, max_size=3)  # fmt: skip
SEGMENT = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,8}", fullmatch=True)


def _valid_value(spec: ParamSpec) -> st.SearchStrategy[str]:
    if isinstance(spec, IntParam):
        return st.integers(spec.minimum, spec.maximum).map(str)
    if isinstance(spec, EnumParam):
        return st.sampled_from(spec.choices)
    return st.lists(SEGMENT, max_size=3).map(lambda parts: "/".join([spec.prefix, *parts]))


@st.composite
def valid_manifests(draw: st.DrawFn) -> dict[str, Any]:
    preset = PRESETS[draw(st.sampled_from(sorted(PRESETS)))]
    params = {}
    for key, spec in preset.params.items():
        if spec.default_text() is None or draw(st.booleans()):
            params[key] = draw(_valid_value(spec))
    return {
        "schema_version": 1,
        "preset": preset.name,
        "params": params,
        "ref": draw(st.from_regex(r"[0-9a-f]{7,40}", fullmatch=True)),
        "requested_by": draw(st.sampled_from(["ada", "Ada <ada@example.org>", "CI bot"])),
        "nonce": draw(st.from_regex(r"[0-9a-f]{16}", fullmatch=True)),
    }


def _param_target(draw: st.DrawFn, base: dict[str, Any], kinds: tuple[type, ...]) -> str | None:
    """A parameter of the base preset with one of ``kinds``, or None if it has none."""
    names = [k for k, s in PRESETS[base["preset"]].params.items() if isinstance(s, kinds)]
    return draw(st.sampled_from(names)) if names else None


def _with_param(base: dict[str, Any], key: str, value: object) -> dict[str, Any]:
    return {**base, "params": {**base["params"], key: value}}


ALL_KINDS = (IntParam, EnumParam, PathParam)


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, object, str]:
    """(category, manifest data, the field its error must name)."""
    base = draw(valid_manifests())
    category = draw(st.sampled_from(CATEGORIES))
    key = _param_target(draw, base, ALL_KINDS)
    if category in {"out_of_range", "traversal"}:
        wanted = (IntParam,) if category == "out_of_range" else (PathParam,)
        key = _param_target(draw, base, wanted)
        if key is None:  # this preset has no such parameter: attack another field instead
            category = "unknown_preset"
    if key is None and category in PARAM_CATEGORIES:
        category = "extra_key"
    data, field = MUTATORS[category](draw, base, key)
    return category, data, field


def _unknown_preset(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    name = draw(
        st.text(max_size=30) | st.sampled_from(["vllm-mlx", "bash", "env-probe ", "ENV-PROBE"])
    )
    return {**base, "preset": name if name not in PRESETS else name + "x"}, "preset"


def _extra_key(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    extra = draw(st.text(max_size=20).filter(lambda k: k not in FIELDS))
    return {**base, extra: draw(JSON_VALUES)}, field_name(extra)


def _wrong_type(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    target = draw(st.sampled_from(["schema_version", "preset", "params", "ref", "requested_by",
                                   "nonce", "param_value"]))  # fmt: skip
    if target == "schema_version":
        bad = draw(
            NOT_STR.filter(lambda v: type(v) is not int)
            | st.text()
            | st.integers().filter(lambda v: v != 1)
        )
        return {**base, target: bad}, target
    if target == "params":
        return {
            **base,
            "params": draw(st.lists(JSON_SCALARS, max_size=2) | st.text() | st.integers()),
        }, "params"
    if target == "param_value" and key is not None:
        return _with_param(base, key, draw(NOT_STR)), f"params.{key}"
    target = "nonce" if target == "param_value" else target
    return {**base, target: draw(NOT_STR)}, target


def _out_of_range(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    assert key is not None
    spec = PRESETS[base["preset"]].params[key]
    assert isinstance(spec, IntParam)
    number = draw(st.integers(max_value=spec.minimum - 1) | st.integers(min_value=spec.maximum + 1))
    text = draw(st.sampled_from(["{}", "0{}", "{}.0", " {}", "+{}", "{}e0"])).format(number)
    if spec.minimum <= number <= spec.maximum:  # only the decoration is wrong, still hostile
        text += "x"
    return _with_param(base, key, text), f"params.{key}"


def _shell(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    assert key is not None
    valid = base["params"].get(key) or draw(_valid_value(PRESETS[base["preset"]].params[key]))
    meta = draw(st.sampled_from(SHELL))
    at = draw(st.integers(0, len(valid)))
    return _with_param(base, key, valid[:at] + meta + valid[at:]), f"params.{key}"


def _traversal(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    assert key is not None
    tail = draw(st.lists(SEGMENT, max_size=2))
    path = "/".join([draw(st.sampled_from(TRAVERSAL)), *tail])
    return _with_param(base, key, path), f"params.{key}"


def _leading_dash(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    assert key is not None
    valid = base["params"].get(key) or draw(_valid_value(PRESETS[base["preset"]].params[key]))
    dashes = draw(st.sampled_from(["-", "--", "-o ", "--output=", "-rf"]))
    return _with_param(base, key, dashes + valid), f"params.{key}"


def _huge(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    size = draw(st.integers(MAX_VALUE_CHARS + 1, 20_000))
    filler = draw(st.sampled_from(["a", "1", "tests/", "é", "\u202e"]))
    text = (filler * size)[:size]
    target = draw(st.sampled_from(["param", "preset", "ref", "requested_by", "nonce", "param_key"]))
    if target == "param" and key is not None:
        return _with_param(base, key, text), f"params.{key}"
    if target == "param_key":
        return _with_param(base, text, "1"), f"params.{field_name(text)}"
    target = "ref" if target == "param" else target
    return {**base, target: text}, target


def _placeholder(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    assert key is not None
    valid = base["params"].get(key) or ""
    text = draw(st.sampled_from(["{}", "{}" + valid, valid + "{}", "tests/{}"])).replace(
        "{}", draw(st.sampled_from(PLACEHOLDERS)), 1
    )
    return _with_param(base, key, text), f"params.{key}"


def _bad_nonce(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    nonce = draw(st.text(max_size=40).filter(lambda n: re.fullmatch("[0-9a-f]{16}", n) is None))
    return {**base, "nonce": nonce}, "nonce"


def _bad_ref(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    ref = draw(st.sampled_from(["-x", "--upload-pack=evil", "a..b", "", "a b", "a;b", "HEAD~1",
                                "a\nb", "$(id)", "refs/heads/x:y", "x@{1}"]))  # fmt: skip
    return {**base, "ref": ref}, "ref"


def _unknown_param(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    declared = PRESETS[base["preset"]].params
    name = draw(st.text(max_size=20).filter(lambda k: k not in declared))
    return _with_param(
        base, name, draw(st.sampled_from(["1", "x", ""]))
    ), f"params.{field_name(name)}"


def _missing(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    gone = draw(st.sampled_from(["schema_version", "preset", "ref", "requested_by", "nonce"]))
    return {k: v for k, v in base.items() if k != gone}, gone


def _control(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    who = draw(st.sampled_from(["a\x00b", "a\nb", "\x1b[31mred", "a\rb", "tab\t"]))
    return {**base, "requested_by": who}, "requested_by"


def _not_object(draw: st.DrawFn, base: dict[str, Any], key: str | None) -> tuple[object, str]:
    return draw(st.lists(JSON_SCALARS, max_size=3) | JSON_SCALARS), "manifest"


MUTATORS = {
    "unknown_preset": _unknown_preset, "extra_key": _extra_key, "wrong_type": _wrong_type,
    "out_of_range": _out_of_range, "shell": _shell, "traversal": _traversal,
    "leading_dash": _leading_dash, "huge": _huge, "placeholder": _placeholder,
    "bad_nonce": _bad_nonce, "bad_ref": _bad_ref, "unknown_param": _unknown_param,
    "missing": _missing, "control": _control, "not_object": _not_object,
}  # fmt: skip
CATEGORIES = sorted(MUTATORS)
PARAM_CATEGORIES = {"shell", "leading_dash", "placeholder"}


def _reject(data: object, via_json: bool) -> ManifestError:
    try:
        if via_json:
            parse_manifest(json.dumps(data))
        else:
            validate_manifest(data)
    except ManifestError as exc:
        return exc
    raise AssertionError(f"accepted a hostile manifest: {data!r:.300}")


def test_hostile_manifests_are_rejected_naming_the_field() -> None:
    seen: Counter[str] = Counter()

    @settings(SETTINGS, max_examples=HOSTILE_EXAMPLES)
    @given(case=hostile(), via_json=st.booleans())
    def check(case: tuple[str, object, str], via_json: bool) -> None:
        category, data, field = case
        huge_doc = via_json and len(json.dumps(data)) > MAX_MANIFEST_BYTES
        error = _reject(data, via_json)
        assert error.field == ("manifest" if huge_doc else field), (category, str(error)[:200])
        assert str(error).startswith(error.field + ": ")
        seen[category] += 1

    check()
    assert sum(seen.values()) >= HOSTILE_EXAMPLES * 0.95, seen
    assert set(seen) == set(CATEGORIES), seen


HOLE = re.compile(r"\$\{ENV:([A-Z0-9_]+)\}|\$\{RESULTS\}|\{([a-z0-9_]+)\}")


def _expected_argv(manifest: Manifest, context: ExecContext) -> list[list[str]]:
    """An independent rendering: plain regex substitution over the template text."""
    preset = PRESETS[manifest.preset]
    values = {k: manifest.params.get(k) or spec.default_text() for k, spec in preset.params.items()}

    def fill(match: re.Match[str]) -> str:
        if match.group(1):
            return context.env[match.group(1)]
        if match.group(2):
            return str(values[match.group(2)])
        return context.results_dir

    commands = []
    for command in preset.commands:
        program = (
            [context.python, "-m", "batchprobe"]
            if command.program == "batchprobe"
            else [context.python]
        )
        commands.append(program + [HOLE.sub(fill, arg) for arg in command.args])
    return commands


@settings(SETTINGS, max_examples=ACCEPTED_EXAMPLES)
@given(data=valid_manifests(), env_value=st.text(min_size=1, max_size=30))
def test_accepted_manifests_yield_only_template_text_and_validated_values(
    data: dict[str, Any], env_value: str
) -> None:
    manifest = parse_manifest(json.dumps(data))
    env = {"BATCHPROBE_MODEL": env_value, "BATCHPROBE_BASE_URL": env_value}
    context = ExecContext(python="/venv/bin/python", env=env, results_dir="/results")
    assert build_commands(manifest, context) == _expected_argv(manifest, context)
    for value in manifest.params.values():
        assert not value.startswith("-") and not set(value) & set("${} ;|&`\n")


@settings(SETTINGS, max_examples=ACCEPTED_EXAMPLES)
@given(preset=st.sampled_from(sorted(PRESETS)), value=st.text(max_size=40) | st.sampled_from(SHELL))
def test_any_string_for_any_param_is_rejected_by_name_or_within_its_type(
    preset: str, value: str
) -> None:
    for key, spec in PRESETS[preset].params.items():
        data = {"schema_version": 1, "preset": preset, "params": {key: value}, "ref": "abc",
                "requested_by": "me", "nonce": "0" * 16}  # fmt: skip
        if preset == "pytest-path" and key != "path":
            continue
        try:
            validate_manifest(data)
        except ManifestError as exc:
            assert exc.field == f"params.{key}"
            continue
        if isinstance(spec, IntParam):
            assert (
                value.isascii() and value.isdigit() and spec.minimum <= int(value) <= spec.maximum
            )
        elif isinstance(spec, EnumParam):
            assert value in spec.choices
        else:
            assert value == spec.prefix or value.startswith(spec.prefix + "/")
            assert ".." not in value.split("/") and not value.startswith("-")
