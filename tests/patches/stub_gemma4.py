"""A stand-in for the modules the gemma4-attention patch targets (``mlx.core`` and mlx-vlm's
Gemma-4 ``language``), so the shim's outcome lines can be produced without MLX: ``new`` writes
mlx-vlm >= 0.5.0's ``Attention.__call__`` (the patch applies), otherwise 0.4.x's (it refuses).

Run as a script it is a serve-cmd engine: ``stub_gemma4.py STUB_DIR FAKE-SERVER-ARGS...``
imports the stubbed target from STUB_DIR (as an engine loading a Gemma-4 model would), then
serves the fake server."""

from __future__ import annotations

import sys
from pathlib import Path

_CALL = {
    True: "def __call__(self, x, mask=None, cache=None, shared_kv=None, offset=None):\n",
    False: "def __call__(self, x, mask=None, cache=None):\n",
}


def write_stub(root: Path, *, new: bool) -> Path:
    """The stub packages under ``root``; returns ``root`` (put it on the engine's path)."""
    gemma4 = root / "mlx_vlm" / "models" / "gemma4"
    gemma4.mkdir(parents=True)
    (root / "mlx").mkdir()
    for package in (root / "mlx", root / "mlx_vlm", root / "mlx_vlm" / "models", gemma4):
        (package / "__init__.py").write_text("")
    (root / "mlx" / "core.py").write_text("class array:\n    pass\n")
    (gemma4 / "language.py").write_text(
        "def scaled_dot_product_attention(*args, **kwargs):\n    return None\n\n\n"
        f"class Attention:\n    {_CALL[new]}        return x\n\n\n"
        f"class DecoderLayer:\n    {_CALL[new]}        return x\n"
    )
    return root


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    import mlx_vlm.models.gemma4.language  # noqa: F401  (the import the shim hooks)

    from batchprobe.cli import main

    main(["fake-server", *sys.argv[2:]])
