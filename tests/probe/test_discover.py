"""What the shapes learn from the model files: the sliding window (ragged crosses it)."""

import json
import struct
from pathlib import Path

from batchprobe.send.discover import sliding_window


def _gguf(path: Path, window: int) -> Path:
    def key(name: str) -> bytes:
        return struct.pack("<Q", len(name)) + name.encode()

    tokens = [b"a", b"bb"]
    body = key("general.architecture") + struct.pack("<I", 8) + struct.pack("<Q", 6) + b"gemma3"
    body += key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens))
    body += b"".join(struct.pack("<Q", len(t)) + t for t in tokens)
    body += key("gemma3.attention.sliding_window") + struct.pack("<II", 4, window)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 3) + body)
    return path


def test_sliding_window_from_a_gguf_file(tmp_path: Path) -> None:
    assert sliding_window(str(_gguf(tmp_path / "m.gguf", 512))) == 512


def test_sliding_window_from_a_hugging_face_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"sliding_window": 8}}))
    assert sliding_window(str(tmp_path)) == 8


def test_no_window_when_the_model_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert sliding_window(str(tmp_path)) is None
    assert sliding_window(str(tmp_path / "missing.gguf")) is None
    assert sliding_window(None) is None
