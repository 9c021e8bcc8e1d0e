"""Launch argv, install recipes and version parsing of every engine (no engine runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.engines import Installation, LaunchSpec, get_engine

VENV = Installation(name="x", version="1", root=Path("/env"), python=Path("/env/bin/python"))


def spec(mode: str, n: int = 8) -> LaunchSpec:
    return LaunchSpec(model="/models/m", mode=mode, concurrency=n, port=4321)  # type: ignore[arg-type]


def test_vllm_argv_caps_sequences_by_mode() -> None:
    engine = get_engine("vllm")
    batching = engine.launch_argv(VENV, spec("batching", 8))
    # `vllm serve MODEL`: 0.33.0 deprecates `python -m vllm.entrypoints.openai.api_server`.
    assert batching[:3] == ["/env/bin/vllm", "serve", "/models/m"]
    assert "--model" not in batching
    assert batching[batching.index("--host") + 1] == "127.0.0.1"
    assert batching[batching.index("--port") + 1] == "4321"
    assert batching[batching.index("--max-num-seqs") + 1] == "8"
    simple = engine.launch_argv(VENV, spec("simple", 8))
    assert simple[simple.index("--max-num-seqs") + 1] == "1"


def test_sglang_argv_caps_running_requests_by_mode() -> None:
    engine = get_engine("sglang")
    argv = engine.launch_argv(VENV, spec("batching", 16))
    assert argv[:3] == ["/env/bin/python", "-m", "sglang.launch_server"]
    assert argv[argv.index("--model-path") + 1] == "/models/m"
    assert argv[argv.index("--max-running-requests") + 1] == "16"
    simple = engine.launch_argv(VENV, spec("simple", 16))
    assert simple[simple.index("--max-running-requests") + 1] == "1"
    assert argv[argv.index("--random-seed") + 1] == "0"


@pytest.mark.parametrize(
    ("engine", "version", "requirement"),
    [("vllm", "0.33.0", "vllm==0.33.0"), ("sglang", "0.5.23", "sglang==0.5.23")],
)
def test_gpu_engine_defaults_are_current_releases(
    engine: str, version: str, requirement: str
) -> None:
    found = get_engine(engine)
    assert found.default_version == version
    # Plain sglang: its [all] extra is test tools (0.5.3) or the diffusion stack (0.5.23).
    assert found.pip_requirements(version, "linux") == [[requirement]]


def test_ollama_argv_and_environment() -> None:
    engine = get_engine("ollama")
    inst = Installation(name="ollama", version="0.5.7", executable=Path("/usr/bin/ollama"))
    assert engine.launch_argv(inst, spec("batching")) == ["/usr/bin/ollama", "serve"]
    env = engine.launch_env(inst, spec("batching", 8))
    assert env["OLLAMA_HOST"] == "127.0.0.1:4321"
    assert env["OLLAMA_NUM_PARALLEL"] == "8"
    assert engine.launch_env(inst, spec("simple", 8))["OLLAMA_NUM_PARALLEL"] == "1"
    assert (
        engine.served_model_id(
            LaunchSpec(model="gemma3:270m", mode="simple", concurrency=1, port=1),
            ["other:1b", "gemma3:270m"],
        )
        == "gemma3:270m"
    )


@pytest.mark.parametrize(
    ("engine", "output", "version"),
    [
        (
            "vllm",
            "INFO 10-01 12:00:00 [__init__.py:216] Automatically detected platform cuda.\n0.6.3.post1\n",
            "0.6.3.post1",
        ),
        ("vllm", "0.11.0\n", "0.11.0"),
        ("vllm", "0.10.1.1+cpu\n", "0.10.1.1+cpu"),
        ("sglang", "0.5.3\n", "0.5.3"),
        ("sglang", "0.4.6.post5\n", "0.4.6.post5"),
        ("ollama", "ollama version is 0.5.7\n", "0.5.7"),
        (
            "ollama",
            "Warning: could not connect to a running Ollama instance\nWarning: client version is 0.12.3\n",
            "0.12.3",
        ),
        ("ollama", "ollama version is 0.6.0-rc1\n", "0.6.0-rc1"),
        ("mlx-lm", "0.32.2\n", "0.32.2"),
        (
            "llama.cpp",
            "version: 6543 (1a2b3c4)\nbuilt with cc (Debian 12.2.0-14) 12.2.0 for x86_64\n",
            "b6543 (1a2b3c4)",
        ),
        (
            "llama.cpp",
            "version: 0.5.0-dev (build 1, commit 0c1e570)\nbuilt with GNU 12.2.0 for Linux x86_64\n",
            "0.5.0-dev (build 1, commit 0c1e570)",
        ),
    ],
)
def test_version_parsing(engine: str, output: str, version: str) -> None:
    assert get_engine(engine).parse_version(output) == version


@pytest.mark.parametrize("engine", ["vllm", "sglang", "ollama", "llama.cpp"])
def test_version_parsing_rejects_noise(engine: str) -> None:
    with pytest.raises(ValueError):
        get_engine(engine).parse_version("command not found")


def test_pip_engines_read_versions_from_their_own_env() -> None:
    argv = get_engine("vllm").version_argv(VENV)
    assert argv[0] == "/env/bin/python" and "'vllm'" in argv[-1]


def test_llama_cpp_argv_slots_context_and_batching_switch() -> None:
    engine = get_engine("llama.cpp")
    inst = Installation(name="llama.cpp", version="0.3.36", executable=Path("/c/bin/llama-server"))
    batching = engine.launch_argv(inst, spec("batching", 8))
    assert batching[0] == "/c/bin/llama-server"
    assert batching[batching.index("-np") + 1] == "8"
    assert batching[batching.index("-c") + 1] == str(8 * 4096)
    assert "--metrics" in batching and "--no-cont-batching" not in batching
    simple = engine.launch_argv(inst, spec("simple", 8))
    assert simple[simple.index("-np") + 1] == "1" and "--no-cont-batching" in simple
    assert (
        engine.capabilities.cache_prompt_field and engine.capabilities.tokenize_path == "/tokenize"
    )


def test_mlx_lm_vllm_mlx_and_transformers_argv() -> None:
    mlx = get_engine("mlx-lm").launch_argv(VENV, spec("simple", 8))
    assert mlx[mlx.index("--decode-concurrency") + 1] == "1"
    vm = get_engine("vllm-mlx")
    assert vm.launch_argv(VENV, spec("batching", 8))[:3] == [
        "/env/bin/vllm-mlx",
        "serve",
        "/models/m",
    ]
    assert "--continuous-batching" in vm.launch_argv(VENV, spec("batching", 8))
    assert "--continuous-batching" not in vm.launch_argv(VENV, spec("simple", 8))
    assert "--disable-prefix-cache" in vm.launch_argv(VENV, spec("simple", 8))
    tf = get_engine("transformers")
    batching = tf.launch_argv(VENV, spec("batching"))
    assert batching[:3] == ["/env/bin/transformers", "serve", "/models/m"]
    assert "--continuous-batching" in batching and "--cb-num-blocks" in batching
    assert "--continuous-batching" not in tf.launch_argv(VENV, spec("simple"))


def test_install_recipes_follow_the_platform() -> None:
    vm = get_engine("vllm-mlx")
    linux = vm.install_recipe("0.3.0", "linux")
    assert linux.kind == "venv"
    assert "mlx[cpu]" in linux.steps[0] and "torch==2.13.0" in linux.steps[0]
    assert linux.steps[-1][-1] == "torchvision"  # uninstalled after the install
    mac = vm.install_recipe("0.3.0", "macos-arm64")
    assert mac.steps == (("{python}", "-m", "pip", "install", "vllm-mlx==0.3.0"),)
    assert "mlx[cpu]" not in get_engine("mlx-lm").install_recipe("0.32.2", "macos-arm64").steps[0]
    # mlx-lm asks only for an mlx floor; a later mlx line breaks an older mlx-lm.
    assert "mlx[cpu]==0.31.*" in get_engine("mlx-lm").install_recipe("0.31.1", "linux").steps[0]
    llama = get_engine("llama.cpp")
    assert "-DGGML_METAL=ON" in llama.install_recipe("0.3.36", "macos-arm64").steps[1]
    assert "-DGGML_METAL=ON" not in llama.install_recipe("0.3.36", "linux").steps[1]
    assert get_engine("ollama").install_recipe("", "linux").kind == "external"


def test_llama_cpp_python_serves_its_own_server_portably_built() -> None:
    engine = get_engine("llama-cpp-python")
    inst = Installation(
        name="llama-cpp-python", version="0.3.36", root=Path("/e"), python=Path("/e/bin/python")
    )
    spec = LaunchSpec(model="/m.gguf", mode="batching", concurrency=8, port=8123)
    argv = engine.launch_argv(inst, spec)
    assert argv[:3] == ["/e/bin/python", "-m", "llama_cpp.server"]
    assert argv[argv.index("--model") + 1] == "/m.gguf" and "8123" in argv
    assert engine.launch_argv(inst, spec.model_copy(update={"mode": "simple"})) == argv
    [step] = engine.install_recipe("0.3.36", "linux").steps
    assert "llama-cpp-python[server]==0.3.36" in step
    assert "cmake.define.GGML_NATIVE=OFF" in step
    assert engine.readiness_path == "/v1/models"


def test_a_kv_pool_launch_shares_one_pool_of_the_tokens_given() -> None:
    def pooled(name: str) -> list[str]:
        launch = LaunchSpec(model="/models/m", mode="batching", concurrency=16, port=4321,
                            kv_tokens=2048)
        inst = Installation(name=name, version="1", root=Path("/env"),
                            python=Path("/env/bin/python"), executable=Path("/env/bin/srv"))
        return get_engine(name).launch_argv(inst, launch)

    llama = pooled("llama.cpp")
    # One context every slot draws from: the per-slot split (16 x 4096) is gone.
    assert llama[llama.index("-c") + 1] == "2048" and "--kv-unified" in llama
    assert llama.count("-c") == 1 and llama[llama.index("-np") + 1] == "16"
    vllm = pooled("vllm")
    assert vllm[vllm.index("--num-gpu-blocks-override") + 1] == "128"  # blocks of 16
    sglang = pooled("sglang")
    assert sglang[sglang.index("--max-total-tokens") + 1] == "2048"
    # Engines with no such option say so, and a launch asked for one is refused.
    for name in ("mlx-lm", "vllm-mlx", "transformers", "llama-cpp-python", "ollama"):
        assert get_engine(name).kv_pool_args(2048) is None, name


@pytest.mark.parametrize(
    ("version", "stack"),
    [
        # 0.2.x asks for floors only; today's MLX stops it serving, so the stack of its release.
        ("0.2.8", ["mlx[cpu]==0.31.2", "mlx-lm==0.31.2", "mlx-vlm==0.4.4"]),
        ("0.2.9", ["mlx[cpu]==0.31.2", "mlx-lm==0.31.2", "mlx-vlm==0.4.4"]),
        ("0.3.0", ["mlx[cpu]"]),
        ("0.6.0", ["mlx[cpu]"]),
    ],
)
def test_vllm_mlx_installs_the_mlx_stack_its_release_serves_on(
    version: str, stack: list[str]
) -> None:
    (requirements,) = get_engine("vllm-mlx").pip_requirements(version, "linux")
    assert requirements == [*stack, f"vllm-mlx=={version}", "torch==2.13.0", "torchvision==0.28.*"]
    assert get_engine("vllm-mlx").pip_requirements(version, "macos-arm64") == [
        [f"vllm-mlx=={version}"]
    ]
