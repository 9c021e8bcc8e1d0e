"""EngineRef parsing and the registry (lookup, aliases, third-party engines)."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from batchprobe._plugins import entry_items
from batchprobe.engines import (
    Engine,
    EngineRef,
    EngineRegistry,
    Installation,
    LaunchSpec,
    default_registry,
    get_engine,
)
from batchprobe.engines._registry import ENTRY_POINT_GROUP
from batchprobe.engines.serve_cmd import ServeCmd
from batchprobe.errors import ConfigError


def test_parse_name_and_version() -> None:
    ref = EngineRef.parse("vllm-mlx==0.3.0")
    assert (ref.name, ref.version) == ("vllm-mlx", "0.3.0")
    assert str(ref) == "vllm-mlx==0.3.0"


def test_parse_name_only_is_unversioned_and_lowercased() -> None:
    assert EngineRef.parse(" MLX-LM ") == EngineRef(name="mlx-lm", version=None)


@pytest.mark.parametrize(
    "text", ["vllm-mlx>=0.3", "vllm-mlx==", "vllm-mlx==banana", "==1.0", "../x==1", "a===1", ""]
)
def test_parse_rejects_bad_references(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        EngineRef.parse(text)
    assert info.value.field == "engine"


def test_unknown_engine_lists_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        get_engine("x")
    message = str(info.value)
    assert message.startswith("engine: unknown 'x'; known: ")
    for name in (
        "llama.cpp",
        "mlx-lm",
        "ollama",
        "serve-cmd",
        "sglang",
        "transformers",
        "vllm",
        "vllm-mlx",
    ):
        assert name in message


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("llama-server", "llama.cpp"),
        ("llama-cpp", "llama.cpp"),
        ("transformers-serve", "transformers"),
        ("vllm_mlx", "vllm-mlx"),
    ],
)
def test_aliases(alias: str, name: str) -> None:
    assert get_engine(alias).name == name


class _Custom(ServeCmd):
    name = "my-engine"
    aliases = ("my-alias",)


def test_third_party_registry_and_conflicts() -> None:
    registry = default_registry()
    registry.register(_Custom())
    assert get_engine("my-engine", registry).name == "my-engine"
    with pytest.raises(ConfigError, match="already registered"):
        registry.register(ServeCmd())  # "serve-cmd" is taken by the built-in
    assert "my-engine" not in default_registry()  # no global state was changed


def test_entry_point_plugins_load_instances_and_factories() -> None:
    instance = EntryPoint("x", "batchprobe.engines.mlx_lm:ENGINE", ENTRY_POINT_GROUP)
    factory = EntryPoint("y", "batchprobe.engines.serve_cmd:ServeCmd", ENTRY_POINT_GROUP)
    broken = EntryPoint("z", "batchprobe.engines.no_such_module:ENGINE", ENTRY_POINT_GROUP)
    [loaded] = entry_items(instance, Engine)
    assert loaded.name == "mlx-lm"
    [made] = entry_items(factory, Engine)
    assert made.name == "serve-cmd"
    assert entry_items(broken, Engine) == []
    not_one = EntryPoint("w", "batchprobe.engines.mlx_lm:MlxLm.name", ENTRY_POINT_GROUP)
    assert entry_items(not_one, Engine) == []  # a string, not an Engine


def test_empty_registry_error() -> None:
    with pytest.raises(ConfigError, match="known: $"):
        EngineRegistry().get("mlx-lm")


def test_serve_cmd_placeholders() -> None:
    engine = ServeCmd(["srv", "--port={port}", "--model", "{model}", "-n", "{concurrency}"])
    spec = LaunchSpec(model="/m", mode="batching", concurrency=4, port=1234)
    argv = engine.launch_argv(Installation(name="serve-cmd", version="user"), spec)
    assert argv == ["srv", "--port=1234", "--model", "/m", "-n", "4"]


@pytest.mark.parametrize("template", [[], ["srv", "{model}"], ["srv", "{port}", "{bogus}"]])
def test_serve_cmd_rejects_bad_templates(template: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        ServeCmd(template)
    assert info.value.field == "serve_cmd"
