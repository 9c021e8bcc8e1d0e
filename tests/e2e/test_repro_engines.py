"""`batchprobe repro` on real engines: the corpus case mlx-lm-exact-cache-hit on 0.32.2 (the
latest release, broken) shrinks to at most 2 requests, the seed case (vllm-mlx 0.3.0 + the
tiny gemma-4 under continuous batching) to 1 with the server log's `shared_kv` evidence in its
report; each standalone reproducer says BUG on the broken engine and OK with batchprobe's
runtime patch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.corpus import default_corpus, run_case
from batchprobe.engines import EngineRef, Installation, launch
from batchprobe.patches import shim_dir, shim_env
from batchprobe.repro import ReproCase
from batchprobe.results.findings import FindingKind
from proctools import procs_with

from ._run import batchprobe_run

pytestmark = pytest.mark.engine

PATCH = "mlx-lm-exact-cache-hit"


def _script(engine: str, case: ReproCase, folder: Path,
            patches: list[str]) -> subprocess.CompletedProcess[str]:
    """``python3 -I repro.py`` against a fresh ``engine`` launched as the failing arm was."""
    assert case.target.model is not None and case.mode is not None
    with launch(EngineRef.parse(engine), case.target.model, case.mode,
                case.concurrency, log_path=folder / f"script-{len(patches)}.log",
                ready_timeout=120, prefix_cache=True,
                extra_env=shim_env(patches) if patches else None,
                pythonpath_prepend=[shim_dir()] if patches else None) as server:
        return subprocess.run(
            [sys.executable, "-I", str(folder / "repro" / "repro.py"), "--base-url",
             server.base_url], capture_output=True, text=True, timeout=120, check=False,
        )


def test_the_exact_cache_hit_shrinks_to_two_requests_and_the_patch_makes_it_ok(
    tmp_path: Path,
) -> None:
    found = run_case(default_corpus().get("mlx-lm-exact-cache-hit"), "broken", tmp_path)
    assert found.as_expected, found.mismatches
    out = tmp_path / "repro"
    result = CliRunner().invoke(main, ["repro", str(found.verdict_file), "--output", str(out),
                                       "--tries", "1"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    case = ReproCase.model_validate_json((out / "repro.json").read_text())
    assert case.kept.kind is FindingKind.ERROR and len(case.requests) <= 2, case.requests
    report = (out / "REPORT.md").read_text()
    assert "mlx-lm 0.32.2" in report and PATCH in report and "empty prompt" in report
    _bug_then_ok("mlx-lm==0.32.2", case, tmp_path, PATCH)


def _bug_then_ok(engine: str, case: ReproCase, folder: Path, patch: str) -> None:
    bug = _script(engine, case, folder, [])
    assert bug.returncode == 1 and bug.stdout.startswith("BUG: "), (bug.stdout, bug.stderr)
    ok = _script(engine, case, folder, [patch])
    assert ok.returncode == 0 and ok.stdout.startswith("OK"), (ok.stdout, ok.stderr)
    assert not procs_with(str(folder))


def test_the_seed_case_shrinks_to_one_request_with_the_shared_kv_evidence(
    vllm_mlx_030: Installation, tiny_gemma4_dir: Path, tmp_path: Path
) -> None:
    code, _, out = batchprobe_run(
        ["--engine", "vllm-mlx==0.3.0", "--model", str(tiny_gemma4_dir), "--quick",
         "--sessions", "4", "--haystack-tokens", "128", "--max-tokens", "16",
         "--shapes", "burst"], tmp_path / "verdict.json",
    )
    assert code == 1, out
    result = CliRunner().invoke(main, ["repro", str(tmp_path / "verdict.json"), "--output",
                                       str(tmp_path / "repro"), "--tries", "1"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    case = ReproCase.model_validate_json((tmp_path / "repro" / "repro.json").read_text())
    assert case.mode == "batching" and len(case.requests) == 1, case.requests
    report = (tmp_path / "repro" / "REPORT.md").read_text()
    assert "shared_kv" in report and "gemma4-attention" in report, report
    _bug_then_ok("vllm-mlx==0.3.0", case, tmp_path, "gemma4-attention")
