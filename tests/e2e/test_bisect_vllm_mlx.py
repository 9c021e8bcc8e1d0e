"""`batchprobe bisect` on real vllm-mlx releases: the Gemma-4 shared_kv bug of 0.3.0 was
fixed in 0.4.0, found from 0.6.0 (good) and 0.3.0 (bad) in a binary search's probes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from batchprobe.corpus import case_model
from batchprobe.engines import get_engine, installed_versions

pytestmark = pytest.mark.engine


def test_bisect_finds_the_release_that_fixed_shared_kv(tmp_path: Path) -> None:
    model = case_model("tiny:gemma4")
    output = tmp_path / "bisect.json"
    # The shared-kv case's plan (corpus/cases/vllm-mlx-gemma4-shared-kv.json), counts only and
    # on the random tiny gemma-4 (the case itself runs tiny-gemma4's recalls too): the bug fails
    # every batched request, so one burst at 4 beside its serial reference shows it.
    argv = [sys.executable, "-m", "batchprobe", "bisect", "--engine", "vllm-mlx",
            "--model", model, "--good", "0.6.0", "--bad", "0.3.0", "--workloads", "decode",
            "--sessions", "4", "--max-tokens", "96", "--arms", "batching@1,batching@4",
            "--shapes", "burst", "--output", str(output)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3000, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    report = json.loads(output.read_text())
    assert report["status"] == "found" and report["direction"] == "fix", out
    assert (report["first_changed"], report["last_unchanged"]) == ("0.4.0", "0.3.0"), out
    # 0.4.0, 0.4.1 and 0.5.0 lie between: two probes (each version installed if missing).
    tried = [t["version"] for t in report["tries"]]
    assert tried == ["0.4.1", "0.4.0"], out
    assert all(t["judgement"] == "good" and t["correct"] is True for t in report["tries"])
    assert {"0.4.0", "0.4.1"} <= set(installed_versions(get_engine("vllm-mlx")))
    for t in report["tries"]:
        verdict = json.loads(Path(t["verdict_file"]).read_text())
        assert verdict["config"]["engine"] == f"vllm-mlx=={t['version']}"
    assert "first fixed version: vllm-mlx 0.4.0" in done.stdout
    # Run again: resumed from the file, nothing probed.
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0 and json.loads(output.read_text()) == report
    assert "probing" not in again.stderr
