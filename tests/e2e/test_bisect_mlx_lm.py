"""`bisect --check-ends` on the corpus's merge-crash case, on the real mlx-lm releases: 0.31.1
answers a re-sent prompt wrong and its generation thread dies (bad, not skipped), 0.31.2 is
clean with answers judged (good), so both ends agree and 0.31.2 is the first fixed version.
Each verdict is also checked against the corpus case, whose own runs these are."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.bisect import plan_bisect, run_bisect
from batchprobe.corpus import case_model, check, default_corpus
from batchprobe.results.bisect import BisectStatus, Judgement
from batchprobe.results.models import Report

pytestmark = pytest.mark.engine

CASE = "mlx-lm-rotating-cache-merge"


def test_check_ends_agrees_with_both_ends_of_the_merge_crash(tmp_path: Path) -> None:
    case = default_corpus().get(CASE)
    broken, fixed = case.version("broken").version, case.version("fixed").version
    plan = plan_bisect(
        engine=case.engine, good=fixed, bad=broken, versions=[broken, fixed],
        criterion="no-failure", check_ends=True, model=case_model(case.model),
        output=tmp_path / "bisect.json", **case.run,
    )  # fmt: skip
    report = run_bisect(plan)
    assert report.status is BisectStatus.FOUND, report.message
    assert (report.last_unchanged, report.first_changed) == (broken, fixed)
    bad, good = report.tried(broken), report.tried(fixed)
    assert bad is not None and good is not None
    assert bad.judgement is Judgement.BAD and bad.status == "engine_died", bad.reason
    assert bad.correct is False and CASE in bad.diagnoses
    assert good.judgement is Judgement.GOOD and good.status == "ok", good.reason
    assert (good.judged or 0) > 0 and good.correct is not False
    # The two verdicts are the corpus case's own runs (its run options, on its versions): they
    # are checked against the case here, so tests/e2e/test_corpus_cases.py does not run them again.
    for tried in (bad, good):
        verdict = Report.model_validate_json(Path(tried.verdict_file or "").read_text())
        assert verdict.config.engine == f"{case.engine}=={tried.version}"
        assert check(verdict, case.version(tried.version).expect) == [], tried.version
