"""Which patches took effect, read back from engine logs: the verdict's ``patches_applied``
names only those an engine process applied, and each other patch asked for is a warning that
it changed nothing (the shim's lines from a serve-cmd engine that imports a stubbed target)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from batchprobe.patches import patch_outcomes

from .stub_gemma4 import write_stub

STUB_SERVER = Path(__file__).with_name("stub_gemma4.py")


def test_outcomes_by_name_from_the_shims_lines() -> None:
    lines = [
        "2026-12-06 08:04:16 batchprobe INFO batchprobe shim: gemma4-attention armed (pid 7)\n",
        "08:04:19 batchprobe WARNING batchprobe shim: gemma4-attention did not apply (see above)\n",
        "INFO batchprobe shim: mlx-lm-exact-cache-hit applied\n",
        "batchprobe shim: other-patch applied\n",  # not asked for: ignored
        "batchprobe patch gemma4-attention applied\n",  # the patch's own line, not the shim's
    ]
    asked = ["gemma4-attention", "mlx-lm-exact-cache-hit", "never-loaded"]
    assert patch_outcomes(asked, lines) == {
        "gemma4-attention": "not applied",
        "mlx-lm-exact-cache-hit": "applied",
        "never-loaded": "not reached",
    }
    # One engine process that applied it is enough: the others may have tried first.
    applied_later = [lines[1], "batchprobe shim: gemma4-attention applied\n"]
    assert patch_outcomes(["gemma4-attention"], applied_later) == {"gemma4-attention": "applied"}


def _run(tmp_path: Path, serve: list[str]) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / "v.json"
    done = subprocess.run(
        [sys.executable, "-m", "batchprobe", "run", "--engine", "serve-cmd",
         "--serve-cmd", shlex.join(serve), "--model", "fake", "--workloads", "decode",
         "--sessions", "2", "--max-tokens", "16", "--cache-dir", str(tmp_path / "cache"),
         "--shapes", "burst", "--arms", "batching@2", "--patch", "gemma4-attention",
         "--output", str(out)],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.returncode, done.stderr, json.loads(out.read_text())


@pytest.mark.parametrize(
    ("new", "applied", "warning"),
    [
        (True, ["gemma4-attention"], None),
        (False, [], "patch gemma4-attention did not apply in the engine, so it changed nothing"),
    ],
    ids=["applied", "refused"],
)
def test_the_verdict_names_only_patches_the_engine_applied(
    tmp_path: Path, new: bool, applied: list[str], warning: str | None
) -> None:
    stub = write_stub(tmp_path / "stub", new=new)
    code, stderr, verdict = _run(tmp_path, [sys.executable, str(STUB_SERVER), str(stub),
                                            "--port", "{port}"])
    assert (code, verdict["status"]) == (2, "ok"), stderr  # INCONCLUSIVE: one arm, no baseline
    assert verdict["config"]["patches"] == ["gemma4-attention"]
    assert verdict["patches_applied"] == applied
    said = [w for w in verdict["warnings"] if w.startswith("patch ")]
    if warning is None:
        assert said == []
    else:
        [message] = said
        assert message.startswith(warning) and "batching_2.log" in message, message


def test_a_patch_whose_code_the_engine_never_loads_is_said_to_change_nothing(
    tmp_path: Path,
) -> None:
    serve = [sys.executable, "-m", "batchprobe", "fake-server", "--port", "{port}"]
    code, stderr, verdict = _run(tmp_path, serve)
    assert (code, verdict["status"]) == (2, "ok"), stderr  # INCONCLUSIVE: one arm, no baseline
    assert verdict["patches_applied"] == []
    [message] = [w for w in verdict["warnings"] if w.startswith("patch ")]
    assert "changed nothing: the engine never loaded the code it patches" in message
    assert "mlx-vlm>=0.5.0" in message
