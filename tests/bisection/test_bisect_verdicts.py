"""Bisect's judgement of real verdicts (the fake server, and a serve-cmd engine that dies mid-run):
a version that answered wrong and then died is bad, one that judged nothing is skipped, and a
bisect over such versions agrees with both ends."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from batchprobe.bisect import BisectPlan, plan_bisect, run_bisect
from batchprobe.bisect.run import judge, version_try
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.judge.judged import judged_items
from batchprobe.probe import plan_run, run_plan
from batchprobe.results.bisect import BisectStatus, Criterion, Judgement, VersionTry
from batchprobe.results.models import Report, Status

DYING_SERVER = Path(__file__).parents[1] / "integration" / "dying_server.py"
SMALL = {"sessions": 2, "max_tokens": 16, "haystack_tokens": 128, "request_timeout_s": 30.0}


def _fake(tmp_path: Path, name: str, fault: str, **run: object) -> Report:
    config = FakeServerConfig(ttft_ms=5.0, itl_ms=4.0, fault=fault)  # type: ignore[arg-type]
    with FakeServerThread(config) as server:
        plan = plan_run(base_url=server.base_url, output=tmp_path / f"{name}.json", **run)  # type: ignore[arg-type]
        return run_plan(plan)


def _dying(tmp_path: Path) -> Report:
    """A serve-cmd engine that answers its first requests, then exits with status 3."""
    serve = shlex.join([sys.executable, str(DYING_SERVER), "--port", "{port}",
                        "--fault", "exit_after", "--exit-after", "3"])  # fmt: skip
    plan = plan_run(
        engine="serve-cmd", serve_cmd=serve, model="fake", output=tmp_path / "died.json",
        cache_dir=tmp_path / "cache", workloads="decode", shapes="burst", arms="batching@2",
        **SMALL,  # type: ignore[arg-type]
    )  # fmt: skip
    return run_plan(plan)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Report]:
    tmp = tmp_path_factory.mktemp("verdicts")
    return {
        "died": _dying(tmp),
        # The default plan (no run options), against a server that answers everything with 500.
        "all_500": _fake(tmp, "all_500", "http_500"),
        "healthy": _fake(tmp, "healthy", "none", quick=True, **SMALL),
    }


def test_an_engine_that_died_after_a_wrong_answer_is_bad(verdicts: dict[str, Report]) -> None:
    died = verdicts["died"]
    assert died.status is Status.ENGINE_DIED and died.verdict.correct is False
    for criterion in (Criterion.CORRECT, Criterion.NO_FAILURE, Criterion.OUTCOME):
        judged, why = judge(died, criterion)
        assert judged is Judgement.BAD, why
        assert "the run ended engine_died" in why


def test_a_server_that_answers_only_500_is_skipped_not_good(verdicts: dict[str, Report]) -> None:
    report = verdicts["all_500"]
    assert report.status is Status.OK and report.verdict.correct is None
    assert judged_items(report) == 0
    for criterion in Criterion:
        assert judge(report, criterion)[0] is Judgement.SKIPPED
    assert judge(report, Criterion.NO_FAILURE)[1].startswith("no answer was judged")


def test_a_healthy_server_is_good_with_answers_judged(verdicts: dict[str, Report]) -> None:
    report = verdicts["healthy"]
    assert judged_items(report) > 0
    # The correctness criteria only: parallel and outcome time an in-process fake on shared cores.
    for criterion in (Criterion.CORRECT, Criterion.NO_FAILURE):
        assert judge(report, criterion)[0] is Judgement.GOOD, judge(report, criterion)[1]


def test_check_ends_agrees_when_the_bad_end_died_and_a_500_version_hides_the_fix(
    tmp_path: Path, verdicts: dict[str, Report]
) -> None:
    # 0.3.0 died after a wrong answer (bad, as stated), 0.4.0 answered only 500s (skipped),
    # 0.4.1 on are healthy: the fix lies in 0.4.0 or 0.4.1, and 0.4.0 cannot tell which.
    by_version = {"0.3.0": "died", "0.4.0": "all_500"}

    def probe(plan: BisectPlan, version: str) -> VersionTry:
        report = verdicts[by_version.get(version, "healthy")]
        return version_try(version, report, plan.report.criterion, tmp_path / "v.json", 0.0)

    plan = plan_bisect(
        engine="vllm-mlx", good="0.6.0", bad="0.3.0", versions="0.3.0,0.4.0,0.4.1,0.5.0,0.6.0",
        criterion="no-failure", check_ends=True, model=str(tmp_path), workloads="decode",
        output=tmp_path / "bisect.json",
    )  # fmt: skip
    report = run_bisect(plan, probe=probe)
    assert report.status is BisectStatus.AMBIGUOUS, report.message
    assert report.candidates == ["0.4.0", "0.4.1"]
    tries = {t.version: t for t in report.tries}
    assert [t.version for t in report.tries] == ["0.3.0", "0.6.0", "0.4.1", "0.4.0"]
    assert tries["0.3.0"].judgement is Judgement.BAD and tries["0.3.0"].status == "engine_died"
    assert tries["0.4.0"].judgement is Judgement.SKIPPED and tries["0.4.0"].judged == 0
    assert tries["0.6.0"].judgement is Judgement.GOOD and (tries["0.6.0"].judged or 0) > 0
