"""Every corpus case, on every version it names, on the real engine, under its own run options
and under the default plan: judged as the case says (the broken version caught by name, the
fixed, patched or worked-around one clean)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from batchprobe.corpus import builtin_cases, default_corpus, run_case
from proctools import procs_with

pytestmark = pytest.mark.engine

# Runs the bisect tests make, and check against the case: run once, not twice. The merge-crash
# case's both versions (tests/e2e/test_bisect_mlx_lm.py), #384's fixed one
# (tests/e2e/test_bisect_vllm_mlx.py, its one probe).
CHECKED_BY_BISECT = frozenset({
    ("mlx-lm-rotating-cache-merge", "broken"), ("mlx-lm-rotating-cache-merge", "fixed"),
    ("vllm-mlx-gemma4-prefix-lcp-leak", "fixed"),
})
VERSIONS = [
    pytest.param(case.case_id, entry.label, False, id=f"{case.case_id}-{entry.label}")
    for case in builtin_cases()
    for entry in case.versions
    if (case.case_id, entry.label) not in CHECKED_BY_BISECT
]
# Under the default plan (no run options): every version that states what it expects there
# (the others say why not, in default_plan_not_checked).
DEFAULT_PLAN = [
    pytest.param(case.case_id, entry.label, True, id=f"{case.case_id}-{entry.label}-default-plan")
    for case in builtin_cases()
    for entry in case.versions
    if entry.expect_default is not None
]


def _keep(verdict_file: Path) -> None:
    """Keep the verdict as a CI artefact (artifacts/ in the checkout, or $BATCHPROBE_ARTIFACTS)."""
    root = Path(os.environ.get("BATCHPROBE_ARTIFACTS", Path(__file__).parents[2] / "artifacts"))
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(verdict_file, root / f"corpus-{verdict_file.name}")


@pytest.mark.parametrize(("case_id", "label", "default_plan"), VERSIONS + DEFAULT_PLAN)
def test_case_version_is_judged_as_the_case_says(
    case_id: str, label: str, default_plan: bool, tmp_path: Path
) -> None:
    """Under the case's run options and under the default plan (none), each as its
    expectation says."""
    case = default_corpus().get(case_id)
    result = run_case(case, label, tmp_path, default_plan=default_plan)
    _keep(Path(result.verdict_file))
    assert result.as_expected, result.mismatches
    assert not procs_with(str(tmp_path))
