"""Every corpus case, on every version it names, on the real engine: judged as the case says
(the broken version caught by name, the fixed, patched or worked-around one clean)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from batchprobe.corpus import builtin_cases, default_corpus, run_case
from proctools import procs_with

pytestmark = pytest.mark.engine

VERSIONS = [(case.case_id, entry.label) for case in builtin_cases() for entry in case.versions]


def _keep(verdict_file: Path) -> None:
    """Keep the verdict as a CI artefact (artifacts/ in the checkout, or $BATCHPROBE_ARTIFACTS)."""
    root = Path(os.environ.get("BATCHPROBE_ARTIFACTS", Path(__file__).parents[2] / "artifacts"))
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(verdict_file, root / f"corpus-{verdict_file.name}")


@pytest.mark.parametrize(("case_id", "label"), VERSIONS)
def test_case_version_is_judged_as_the_case_says(case_id: str, label: str, tmp_path: Path) -> None:
    case = default_corpus().get(case_id)
    result = run_case(case, label, tmp_path)
    _keep(Path(result.verdict_file))
    assert result.as_expected, result.mismatches
    assert not procs_with(str(tmp_path))
