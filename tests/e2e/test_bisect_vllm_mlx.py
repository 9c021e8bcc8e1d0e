"""`batchprobe bisect` on real vllm-mlx releases: the prefix-cache leak of 0.2.8 (#384) was fixed
in 0.2.9, found searching from 0.2.8 (bad) to 0.6.0 (good). Its one probe, 0.2.9 under the corpus
case's run options, is the case's fixed run: checked against the case here, so
tests/e2e/test_corpus_cases.py does not run it again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from batchprobe.corpus import check, default_corpus
from batchprobe.results.models import Report

pytestmark = pytest.mark.engine


def test_bisect_finds_the_release_that_fixed_the_prefix_leak(tmp_path: Path) -> None:
    output = tmp_path / "bisect.json"
    # The #384 case's plan (corpus/cases/vllm-mlx-gemma4-prefix-lcp-leak.json), and the
    # gemma4-attention patch so that 0.3.0 is judged on this bug, not on its shared_kv one.
    # Searched over the 0.2.x-0.3.0 releases: over the index's (0.2.9 to 0.5.0) it found 0.2.9
    # here too, probing 0.4.0 and 0.2.9, in 379 s, 325 of them 0.4.0's (its chat path spends
    # ~2 tokens a character of this model's prompts).
    case = default_corpus().get("vllm-mlx-gemma4-prefix-lcp-leak")
    argv = [sys.executable, "-m", "batchprobe", "bisect", "--engine", "vllm-mlx",
            "--model", case.model, "--good", "0.6.0", "--bad", "0.2.8",
            "--versions", "0.2.9,0.3.0", "--patch", "gemma4-attention", "--output", str(output)]
    for name, value in case.run.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1500, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    report = json.loads(output.read_text())
    assert report["status"] == "found" and report["direction"] == "fix", out
    assert (report["first_changed"], report["last_unchanged"]) == ("0.2.9", "0.2.8"), out
    assert report["versions"] == ["0.2.8", "0.2.9", "0.3.0", "0.6.0"]
    (tried,) = report["tries"]
    assert (tried["version"], tried["judgement"], tried["correct"]) == ("0.2.9", "good", True)
    assert tried["judged"] == 16 and tried["diagnoses"] == []
    verdict = Report.model_validate_json(Path(tried["verdict_file"]).read_text())
    assert verdict.config.engine == "vllm-mlx==0.2.9"
    # The case's fixed run: the patch, armed, leaves 0.2.9 (mlx-vlm 0.4.4's attention) alone,
    # and the verdict says so.
    assert verdict.patches_applied == []
    assert any(w.startswith("patch gemma4-attention did not apply") for w in verdict.warnings)
    assert check(verdict, case.version("fixed").expect) == []
    assert "first fixed version: vllm-mlx 0.2.9" in done.stdout
    # Run again: resumed from the file, nothing probed.
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0 and json.loads(output.read_text()) == report
    assert "probing" not in again.stderr
