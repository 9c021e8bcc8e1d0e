"""The cache's built model folders: written whole or not at all, and rebuilt when a file of
one went missing or changed size (the tiny task models and the unpacked checkpoint share it)."""

from __future__ import annotations

import sys
from pathlib import Path

from batchprobe.models._staged import MANIFEST, cached, damage, run_into

# Writes two files into the folder given last, as a model builder does.
_WRITER = ("import sys, pathlib; out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True); "
           "(out / 'model.safetensors').write_bytes(b'w' * 4096); "
           "(out / 'config.json').write_text('{}')")


class _Builds:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, target: Path) -> None:
        self.count += 1
        if run_into(target, [sys.executable, "-c", _WRITER]) is not None:
            raise RuntimeError("the writer failed")


def test_a_damaged_cached_folder_is_named_and_rebuilt(tmp_path: Path) -> None:
    target, builds = tmp_path / "models" / "tiny", _Builds()
    assert damage(target) == "it is not built"
    assert cached(target, tmp_path, builds) == target and builds.count == 1
    assert damage(target) is None and (target / MANIFEST).is_file()
    assert cached(target, tmp_path, builds) == target and builds.count == 1  # reused

    weights = target / "model.safetensors"
    weights.write_bytes(b"w" * 100)  # truncated
    assert damage(target) == "model.safetensors has 100 bytes, 4096 written"
    cached(target, tmp_path, builds)
    assert builds.count == 2 and weights.stat().st_size == 4096

    (target / "config.json").unlink()
    assert damage(target) == "config.json is missing"
    cached(target, tmp_path, builds)
    assert builds.count == 3 and damage(target) is None

    (target / MANIFEST).unlink()  # a folder put there by hand, or by an older batchprobe
    assert damage(target) == "it was never finished"
    cached(target, tmp_path, builds)
    assert builds.count == 4 and damage(target) is None


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "tiny"
    done = run_into(target, [sys.executable, "-c", _WRITER + "; raise SystemExit(3)"])
    assert done is not None and done.returncode == 3
    assert list(tmp_path.iterdir()) == []
