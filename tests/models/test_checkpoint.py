"""A local checkpoint named with --model is checked before any engine starts: a truncated or
corrupt file is one line naming it (exit 2), and a sound one goes on to the engine."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.errors import ConfigError
from batchprobe.models._staged import MANIFEST
from batchprobe.probe.managed import engine_target

pytestmark = pytest.mark.engine  # the tiny-llama build: the model-tools environment, once


def _copy(tiny_llama_task: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-llama"
    shutil.copytree(tiny_llama_task, folder)
    return folder


def _cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


# (how the copy is damaged, the file the error names, what it says)
DAMAGE = {
    "tensors cut": (lambda f: _cut(f / "model.safetensors", f.joinpath("model.safetensors")
                                   .stat().st_size // 2), "model.safetensors", "is truncated"),
    "header cut": (lambda f: _cut(f / "model.safetensors", 100), "model.safetensors",
                   "is truncated or not safetensors"),
    "header garbage": (lambda f: (f / "model.safetensors").write_bytes(
        (40).to_bytes(8, "little") + b"\xff" * 40 + b"\0" * 64), "model.safetensors",
        "header is not JSON"),
    "gguf garbage": (lambda f: (f / "model.gguf").write_bytes(b"not a gguf at all"),
                     "model.gguf", "is not a GGUF file"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_checkpoint_is_named_before_any_engine_starts(
    tiny_llama_task: Path, tmp_path: Path, damage: str
) -> None:
    folder = _copy(tiny_llama_task, tmp_path)
    spoil, name, says = DAMAGE[damage]
    spoil(folder)
    (folder / MANIFEST).unlink()  # a checkpoint from elsewhere: only its files speak
    verdict = tmp_path / "verdict.json"
    result = CliRunner().invoke(main, ["run", "--engine", "transformers", "--model",
                                       str(folder), "--quick", "-o", str(verdict)])
    assert result.exit_code == 2, result.output
    assert says in result.output and str(folder / name) in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "verdict-logs").exists()


def test_a_built_folder_with_a_file_of_another_size_is_incomplete(
    tiny_llama_task: Path, tmp_path: Path
) -> None:
    folder = _copy(tiny_llama_task, tmp_path)
    with (folder / "tokenizer.json").open("a") as handle:
        handle.write(" ")
    with pytest.raises(ConfigError) as info:
        engine_target("transformers", str(folder), None)
    assert info.value.field == "model" and "is incomplete: tokenizer.json has" in str(info.value)


def test_a_sound_checkpoint_goes_on_to_the_engine(tiny_llama_task: Path, tmp_path: Path) -> None:
    folder = _copy(tiny_llama_task, tmp_path)
    assert engine_target("transformers", str(folder), None)[1] == str(folder.resolve())
    assert engine_target("llama.cpp", str(folder / "model.gguf"), None)[1] == str(
        (folder / "model.gguf").resolve())
