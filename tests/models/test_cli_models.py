"""`batchprobe models` and `batchprobe engines` through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.engines import MARKER


@pytest.mark.engine  # builds with the mlx-lm environment (~1.5 min)
def test_build_tiny_gemma3(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["models", "build-tiny", "gemma3", str(tmp_path / "tiny")])
    assert result.exit_code == 0, result.output
    assert Path(result.output.strip()) == tmp_path / "tiny"
    assert (tmp_path / "tiny" / "model.safetensors").is_file()


def test_build_tiny_rejects_unknown_family(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["models", "build-tiny", "llama9", str(tmp_path)])
    assert result.exit_code == 2 and "gemma3" in result.output and "gemma4" in result.output


@pytest.mark.engine  # assembles the 253 MB GGUF into the cache on first use
def test_resolve_alias() -> None:
    result = CliRunner().invoke(main, ["models", "resolve", "gemma3-270m"])
    assert result.exit_code == 0 and result.output.strip().endswith(".gguf")


def test_engines_list_names_every_engine(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["engines", "list", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0
    for name in ("llama.cpp", "mlx-lm", "vllm-mlx", "transformers", "vllm", "sglang", "ollama"):
        assert name in result.output


def test_engines_install_rejects_unknown_and_malformed() -> None:
    unknown = CliRunner().invoke(main, ["engines", "install", "nope==1"])
    assert unknown.exit_code == 2 and "unknown 'nope'; known:" in unknown.output
    malformed = CliRunner().invoke(main, ["engines", "install", "vllm-mlx>=0.3"])
    assert malformed.exit_code == 2 and "NAME==VERSION" in malformed.output


def test_engines_install_reuses_a_finished_environment(tmp_path: Path) -> None:
    # A finished environment (its marker) in an empty cache: install must reuse it, not build.
    root = tmp_path / "envs" / "mlx-lm-0.32.2"
    root.mkdir(parents=True)
    (root / MARKER).write_text(json.dumps({"name": "mlx-lm", "version": "0.32.2"}))
    result = CliRunner().invoke(
        main, ["engines", "install", "mlx-lm==0.32.2", "--cache-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert f"mlx-lm==0.32.2 ready at {root}" in " ".join(result.output.split())
    assert [p.name for p in root.iterdir()] == [MARKER]  # untouched: no venv was made
    assert not (tmp_path / "logs").exists()  # a build writes its install log there first


def test_engines_doctor(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["engines", "doctor", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "platform" in result.output and "llama.cpp build tools" in result.output
