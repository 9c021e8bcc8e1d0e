"""Bad input to the GGUF unpacker: a clear error, and nothing left a later run would take."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.errors import ConfigError
from batchprobe.models.unpack import unpack
from batchprobe.probe.managed import engine_target

from .staging import nothing_left


def test_a_cache_without_space_is_refused_before_any_work(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    target = tmp_path / "out" / "ckpt"
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(ConfigError) as info:
        unpack(gguf, target, needed_bytes=free + 2**30)
    assert info.value.field == "cache" and "MiB free" in str(info.value)
    nothing_left(target)


def test_a_missing_gguf_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        unpack(tmp_path / "nope.gguf", tmp_path / "ckpt")
    assert info.value.field == "model" and "nope.gguf" in str(info.value)


def test_unpack_rejects_an_unknown_alias(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["models", "unpack", "gemma9", str(tmp_path / "x")])
    assert result.exit_code == 2 and "gemma3-270m" in result.output


@pytest.mark.engine  # the model-tools environment (< 1 min once)
@pytest.mark.parametrize("damage", ["truncated", "garbage", "not-gemma"])
def test_a_damaged_gguf_is_a_model_error(gemma3_270m: Path, tmp_path: Path, damage: str) -> None:
    bad = tmp_path / "bad.gguf"
    data = gemma3_270m.read_bytes()
    if damage == "truncated":
        bad.write_bytes(data[: len(data) // 3])
    elif damage == "garbage":
        bad.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    else:  # a valid file of another architecture: its metadata says so
        bad.write_bytes(data.replace(b"gemma3", b"llama9", 1))
    target = tmp_path / "ckpt"
    with pytest.raises(ConfigError) as info:
        unpack(bad, target)
    assert info.value.field == "model" and "not a readable Gemma 3 GGUF" in str(info.value)
    nothing_left(target)


def test_an_engine_without_a_default_model_needs_one() -> None:
    with pytest.raises(ConfigError) as info:
        engine_target("sglang", None, None)
    assert info.value.field == "--model" and "sglang" in str(info.value)


@pytest.mark.engine  # the model-tools environment; mounts a 30 MB tmpfs (root, as CI runs)
def test_a_disk_filling_up_mid_write_is_a_cache_error(gemma3_270m: Path, tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=30m", "tmpfs", str(small)], check=True)
    try:
        with pytest.raises(ConfigError) as info:
            unpack(gemma3_270m, small / "ckpt", needed_bytes=0)  # past the up-front check
        assert info.value.field == "cache" and "no space left" in str(info.value)
        nothing_left(small / "ckpt")
    finally:
        subprocess.run(["umount", str(small)], check=True)
