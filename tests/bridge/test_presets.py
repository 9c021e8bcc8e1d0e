"""The preset allowlist: parameter types, template holes, rendering, definition checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from batchprobe.bridge.params import (
    MAX_VALUE_CHARS,
    EnumParam,
    IntParam,
    PathParam,
    field_name,
    shown,
    validate_param,
)
from batchprobe.bridge.presets import (
    PRESETS,
    CommandTemplate,
    ExecContext,
    Preset,
    get_preset,
    parse_template,
)
from batchprobe.errors import BridgeError, ManifestError

INT = IntParam(help="n", minimum=1, maximum=64, default=8)
ENUM = EnumParam(help="v", choices=("0.3.0", "0.4.0"), default="0.4.0")
PATH = PathParam(help="p", prefix="tests")
CONTEXT = ExecContext(python="/py", env={"MODEL": "/models/m x"}, results_dir="/res")


def test_the_issue_presets_are_shipped() -> None:
    assert {"vllm-mlx-niah", "mlx-lm-niah", "llama-cpp-niah", "env-probe", "pytest-path"} <= set(
        PRESETS
    )
    assert "url-niah" in PRESETS


def test_vllm_mlx_installs_then_probes_the_model_from_the_environment() -> None:
    preset = PRESETS["vllm-mlx-niah"]
    commands = preset.render(preset.validate_params({"version": "0.3.0"}), None)
    assert commands[0] == ["batchprobe", "engines", "install", "vllm-mlx==0.3.0"]
    assert commands[1][:6] == ["batchprobe", "run", "--engine", "vllm-mlx==0.3.0", "--model",
                               "${ENV:BATCHPROBE_MODEL}"]  # fmt: skip
    assert preset.env_names() == ["BATCHPROBE_MODEL"]


@pytest.mark.parametrize(
    ("value", "message"),
    [("0", "from 1 to 64"), ("65", "got 65"), ("08", "plain digits"), ("8.0", "plain digits"),
     ("", "plain digits"), ("٣", "plain digits"), ("1e3", "plain digits"), (" 8", "plain digits")],
)  # fmt: skip
def test_int_param_rejects_out_of_range_and_non_canonical_numbers(value: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message) as caught:
        INT.check("params.n", value)
    assert caught.value.field == "params.n"


def test_int_param_accepts_bounds_and_defaults() -> None:
    assert INT.check("f", "1") == "1"
    assert INT.check("f", "64") == "64"
    assert INT.default_text() == "8"
    assert IntParam(help="x", minimum=0, maximum=3).default_text() is None


@pytest.mark.parametrize(
    "kwargs",
    [{"minimum": 5, "maximum": 4}, {"minimum": 1, "maximum": 4, "default": 9},
     {"minimum": -1, "maximum": 4}],
)  # fmt: skip
def test_int_param_definitions_are_checked(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        IntParam(help="x", **kwargs)


def test_enum_param_lists_the_choices() -> None:
    assert ENUM.check("f", "0.3.0") == "0.3.0"
    with pytest.raises(ManifestError, match="one of 0.3.0, 0.4.0"):
        ENUM.check("params.version", "0.9.9")
    assert ENUM.default_text() == "0.4.0"


@pytest.mark.parametrize(
    "kwargs",
    [{"choices": ()}, {"choices": ("a b",)}, {"choices": ("-x",)}, {"choices": ("a", "a")},
     {"choices": ("a",), "default": "b"}],
)  # fmt: skip
def test_enum_param_definitions_are_checked(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        EnumParam.model_validate({"help": "x", **kwargs})


@pytest.mark.parametrize("value", ["tests", "tests/x.py", "tests/a/b_c-d.py"])
def test_path_param_accepts_paths_under_the_prefix(value: str) -> None:
    assert PATH.check("params.path", value) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [("tests/../etc", "without '..'"), ("/etc/passwd", "without"), ("tests//x", "without"),
     ("tests/./x", "without"), ("tests/", "without"), ("src/x.py", "got 'src/x.py'"),
     ("testsuite/x", "got"), ("tests/.hidden", "without"), ("tests/a b", "without")],
)  # fmt: skip
def test_path_param_rejects_traversal_and_other_prefixes(value: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message) as caught:
        PATH.check("params.path", value)
    assert caught.value.field == "params.path"


@pytest.mark.parametrize("kwargs", [{"prefix": "../x"}, {"prefix": "/abs"}, {"default": "src"}])
def test_path_param_definitions_are_checked(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        PathParam.model_validate({"help": "x", "prefix": "tests", **kwargs})


def test_path_param_default() -> None:
    assert PATH.default_text() is None
    assert PathParam(help="x", prefix="tests", default="tests/a").default_text() == "tests/a"


def test_path_param_refuses_a_symlink_out_of_the_prefix(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "ok.py").write_text("")
    (tmp_path / "secret").mkdir()
    (tmp_path / "tests" / "escape").symlink_to(tmp_path / "secret")
    PATH.check_within("params.path", "tests/ok.py", tmp_path)
    PATH.check_within("params.path", "tests", tmp_path)
    with pytest.raises(ManifestError, match="outside tests/") as caught:
        PATH.check_within("params.path", "tests/escape", tmp_path)
    assert caught.value.field == "params.path"


@pytest.mark.parametrize(
    ("value", "message"),
    [("x" * (MAX_VALUE_CHARS + 1), "limit"), ("${ENV:HOME}", "placeholders"), ("{n}", "placeholders"),
     ("a}", "placeholders"), ("$HOME", "placeholders"), ("-1", "start with '-'"),
     ("--help", "start with '-'")],
)  # fmt: skip
def test_generic_value_checks_come_first(value: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message) as caught:
        validate_param("params.n", INT, value)
    assert caught.value.field == "params.n"


def test_validate_param_delegates_to_the_type() -> None:
    assert validate_param("params.n", INT, "12") == "12"


def test_parse_template_splits_holes() -> None:
    assert parse_template("a{n}b${ENV:X_1}${RESULTS}/v") == [
        ("lit", "a"), ("param", "n"), ("lit", "b"), ("env", "X_1"), ("results", "RESULTS"),
        ("lit", "/v"),
    ]  # fmt: skip
    assert parse_template("") == []


@pytest.mark.parametrize("arg", ["${HOME}", "$x", "{Bad}", "${ENV:lower}", "a}", "{", "${ENV:X"])
def test_parse_template_rejects_malformed_placeholders(arg: str) -> None:
    with pytest.raises(ValueError, match="malformed placeholder"):
        parse_template(arg)


def test_command_template_rejects_malformed_args() -> None:
    with pytest.raises(ValidationError):
        CommandTemplate(program="python", args=("${nope}",))


def test_command_render_for_display_and_for_execution() -> None:
    command = CommandTemplate(
        program="batchprobe", args=("run", "--n={n}", "${ENV:MODEL}", "${RESULTS}/v.json")
    )
    assert command.render({"n": "3"}, None) == [
        "batchprobe", "run", "--n=3", "${ENV:MODEL}", "${RESULTS}/v.json"
    ]  # fmt: skip
    assert command.render({"n": "3"}, CONTEXT) == [
        "/py", "-m", "batchprobe", "run", "--n=3", "/models/m x", "/res/v.json"
    ]  # fmt: skip
    python = CommandTemplate(program="python", args=("-m", "pytest"))
    assert python.render({}, CONTEXT) == ["/py", "-m", "pytest"]
    assert python.render({}, None) == ["python", "-m", "pytest"]


def _preset(**overrides: object) -> Preset:
    fields: dict[str, object] = {
        "name": "demo",
        "description": "d",
        "timeout_s": 10,
        "params": {"n": INT},
        "commands": (CommandTemplate(program="python", args=("{n}", "${ENV:MODEL}")),),
        "outputs": ("v.json",),
    }
    fields.update(overrides)
    return Preset.model_validate(fields)


@pytest.mark.parametrize(
    "overrides",
    [{"name": "Bad Name"}, {"name": "-x"}, {"params": {}}, {"params": {"n": INT, "m": INT}},
     {"outputs": ("../v.json",)}, {"commands": ()}, {"timeout_s": 0}],
)  # fmt: skip
def test_preset_definitions_are_checked(overrides: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        _preset(**overrides)


def test_preset_validate_params_fills_defaults_and_names_fields() -> None:
    preset = _preset()
    assert preset.validate_params({}) == {"n": "8"}
    assert preset.validate_params({"n": "2"}) == {"n": "2"}
    with pytest.raises(ManifestError, match="allowed: n") as caught:
        preset.validate_params({"bogus": "1"})
    assert caught.value.field == "params.bogus"
    required = _preset(params={"n": IntParam(help="n", minimum=0, maximum=3)})
    with pytest.raises(ManifestError, match="is required") as caught:
        required.validate_params({})
    assert caught.value.field == "params.n"


def test_unknown_param_on_a_preset_without_params_says_none() -> None:
    preset = get_preset("env-probe")
    with pytest.raises(ManifestError, match="allowed: none"):
        preset.validate_params({"x": "1"})


def test_missing_environment_variables_stop_before_anything_runs() -> None:
    preset = _preset()
    with pytest.raises(BridgeError, match="MODEL"):
        preset.render({"n": "1"}, CONTEXT.model_copy(update={"env": {"MODEL": ""}}))
    assert preset.render({"n": "1"}, CONTEXT) == [["/py", "1", "/models/m x"]]


def test_get_preset_lists_the_allowed_names() -> None:
    assert get_preset("env-probe").name == "env-probe"
    with pytest.raises(ManifestError, match="allowed: env-probe") as caught:
        get_preset("rm-rf")
    assert caught.value.field == "preset"


def test_shown_and_field_name_tame_hostile_strings() -> None:
    assert shown("abc") == "'abc'"
    assert shown("x" * 100) == repr("x" * 40 + "...")
    assert field_name("sessions") == "sessions"
    assert field_name("a b\n") == repr("a b\n")
    assert field_name("a" * 41) == shown("a" * 41)
