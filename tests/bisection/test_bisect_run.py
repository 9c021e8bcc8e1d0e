"""The bisect runner with a scripted probe: the file after every version, resuming without
re-probing, interruption, --check-ends, and clear errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.bisect import BisectPlan, plan_bisect, run_bisect
from batchprobe.bisect.run import judge
from batchprobe.cli import main
from batchprobe.errors import ConfigError
from batchprobe.judge.judged import judged_items
from batchprobe.results.bisect import BisectReport, BisectStatus, Criterion, Judgement, VersionTry
from batchprobe.results.findings import Judged
from batchprobe.results.models import Environment, Report, RunConfig, Status, Verdict

VERSIONS = "0.3.0,0.4.0,0.4.1,0.5.0,0.6.0"
FIXED_IN = "0.4.0"


class Script:
    """Judges a version as the seed bug would: bad before 0.4.0; records every probe."""

    def __init__(self, skip: tuple[str, ...] = (), interrupt_at: str | None = None) -> None:
        self.probed: list[str] = []
        self.skip = skip
        self.interrupt_at = interrupt_at

    def __call__(self, plan: BisectPlan, version: str) -> VersionTry | None:
        self.probed.append(version)
        # The file on disk already holds every earlier version when the next one starts.
        on_disk = BisectReport.model_validate_json(plan.output.read_text())
        assert [t.version for t in on_disk.tries] == self.probed[:-1]
        if version == self.interrupt_at:
            return None
        if version in self.skip:
            judged, why = Judgement.SKIPPED, "could not install"
        else:
            bad = tuple(map(int, version.split("."))) < (0, 4, 0)
            judged, why = (Judgement.BAD, "correct=False") if bad else (Judgement.GOOD, "ok")
        return VersionTry(version=version, judgement=judged, reason=why, seconds=0.0)


def _plan(tmp_path: Path, **extra: object) -> BisectPlan:
    options: dict[str, object] = {"engine": "vllm-mlx", "good": "0.6.0", "bad": "0.3.0",
                                  "versions": VERSIONS, "model": str(tmp_path),
                                  "workloads": "decode", "output": tmp_path / "bisect.json"}  # fmt: skip
    options.update(extra)
    return plan_bisect(**options)  # type: ignore[arg-type]


def test_finds_the_first_fixed_version_in_a_binary_search_and_writes_it(tmp_path: Path) -> None:
    script = Script()
    report = run_bisect(_plan(tmp_path), probe=script)
    assert report.status is BisectStatus.FOUND and report.direction == "fix"
    assert (report.first_changed, report.last_unchanged) == (FIXED_IN, "0.3.0")
    assert script.probed == ["0.4.1", "0.4.0"]
    assert "first fixed version: vllm-mlx 0.4.0" in report.message
    saved = BisectReport.model_validate_json((tmp_path / "bisect.json").read_text())
    assert saved == report
    assert saved.probe_options == {"model": str(tmp_path), "workloads": "decode"}


def test_an_interrupted_bisect_resumes_without_probing_again(tmp_path: Path) -> None:
    first = Script(interrupt_at="0.4.0")
    stopped = run_bisect(_plan(tmp_path), probe=first)
    assert stopped.status is BisectStatus.INTERRUPTED and first.probed == ["0.4.1", "0.4.0"]
    assert [t.version for t in stopped.tries] == ["0.4.1"]
    again = Script()
    # The second Script checks the file already holds 0.4.1 before anything is probed.
    again.probed = ["0.4.1"]
    done = run_bisect(_plan(tmp_path), probe=again)
    assert done.status is BisectStatus.FOUND and done.first_changed == FIXED_IN
    assert again.probed == ["0.4.1", "0.4.0"]  # 0.4.1 came from the file
    third = Script()
    assert run_bisect(_plan(tmp_path), probe=third) == done and third.probed == []


def test_a_version_that_cannot_install_is_skipped_not_counted(tmp_path: Path) -> None:
    report = run_bisect(_plan(tmp_path), probe=Script(skip=("0.4.0",)))
    assert report.status is BisectStatus.AMBIGUOUS and report.first_changed is None
    assert report.candidates == ["0.4.0", "0.4.1"]
    assert report.tried("0.4.0") is not None
    assert report.tried("0.4.0").judgement is Judgement.SKIPPED  # type: ignore[union-attr]


def test_check_ends_stops_when_an_end_is_not_as_stated(tmp_path: Path) -> None:
    # 0.5.0 is not bad: the ends disagree with what was said, and nothing else is probed.
    script = Script()
    report = run_bisect(_plan(tmp_path, bad="0.5.0", check_ends=True), probe=script)
    assert report.status is BisectStatus.ENDS_DISAGREE and script.probed == ["0.5.0"]
    assert "0.5.0 was given as bad but was judged good" in report.message


def test_check_ends_probes_both_then_searches(tmp_path: Path) -> None:
    script = Script()
    report = run_bisect(_plan(tmp_path, check_ends=True), probe=script)
    assert report.status is BisectStatus.FOUND and report.first_changed == FIXED_IN
    assert script.probed == ["0.3.0", "0.6.0", "0.4.1", "0.4.0"]


def test_a_resume_with_other_options_is_refused(tmp_path: Path) -> None:
    run_bisect(_plan(tmp_path), probe=Script(interrupt_at="0.4.1"))
    with pytest.raises(ConfigError) as caught:
        _plan(tmp_path, workloads="recall")
    assert caught.value.field == "output" and "probe_options" in str(caught.value)


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--engine", "vllm-mlx==0.3.0"], "engine"),
        (["--engine", "ollama"], "not installed by batchprobe"),
        (["--engine", "nope"], "known:"),
        (["--engine", "vllm-mlx", "--criterion", "fast"], "'fast' is not one of"),
        (["--engine", "vllm-mlx", "--good", "zz"], "good"),
        (["--engine", "vllm-mlx", "--sessions", "0"], "sessions"),
    ],
)
def test_bad_input_is_a_usage_error_naming_the_option(
    tmp_path: Path, args: list[str], names: str
) -> None:
    base = {"--good": "0.6.0", "--bad": "0.3.0", "--versions": VERSIONS, "--model": str(tmp_path),
            "--output": str(tmp_path / "b.json")}  # fmt: skip
    for flag in args[::2]:
        base.pop(flag, None)
    argv = ["bisect", *args, *[x for pair in base.items() for x in pair]]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert names in result.output and "Traceback" not in result.output
    assert not (tmp_path / "b.json").exists() and not (tmp_path / "b-verdicts").exists()


_ENV = Environment(batchprobe_version="0", python="3", platform="linux")


def _report(status: Status, correct: bool | None, judged: int) -> Report:
    """A verdict whose judge counted ``judged`` answers (one cross-talk row)."""
    rows = [Judged(arm="sweep@4", step=4, shape="burst", check="cross_talk", judged=judged)]
    return Report(
        status=status, started_at="2026-12-01T00:00:00Z", run_id="r",
        config=RunConfig(base_url="http://127.0.0.1:1"), environment=_ENV,
        verdict=Verdict(correct=correct, reasons=["why"]), judged=rows,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("status", "correct", "judged", "criterion", "expected"),
    [
        (Status.OK, None, 5, Criterion.CORRECT, Judgement.SKIPPED),  # a tiny random model
        (Status.OK, None, 5, Criterion.NO_FAILURE, Judgement.GOOD),
        (Status.OK, None, 0, Criterion.NO_FAILURE, Judgement.SKIPPED),  # nothing was judged
        (Status.OK, True, 0, Criterion.CORRECT, Judgement.SKIPPED),
        (Status.OK, False, 5, Criterion.NO_FAILURE, Judgement.BAD),
        (Status.OK, True, 5, Criterion.NO_FAILURE, Judgement.GOOD),
        (Status.OK, False, 5, Criterion.CORRECT, Judgement.BAD),
        # A run that answered wrong and then died is bad; one that stopped first is not judged.
        (Status.ENGINE_DIED, False, 5, Criterion.CORRECT, Judgement.BAD),
        (Status.ENGINE_DIED, False, 5, Criterion.NO_FAILURE, Judgement.BAD),
        (Status.ENGINE_DIED, None, 5, Criterion.NO_FAILURE, Judgement.SKIPPED),
        (Status.ERROR, None, 0, Criterion.NO_FAILURE, Judgement.SKIPPED),
    ],
)
def test_judge_by_criterion(
    status: Status, correct: bool | None, judged: int, criterion: Criterion, expected: Judgement
) -> None:
    assert judge(_report(status, correct, judged), criterion)[0] is expected


def test_judged_counts_answer_checks_not_the_run_s_own() -> None:
    report = _report(Status.OK, None, 3)
    rows = [
        *report.judged,
        Judged(arm="sweep@4", step=4, shape="burst", check="count", judged=4),
        Judged(arm="sweep@4", step=4, shape="burst", check="errors", judged=9),
        Judged(arm="sweep@8", step=8, shape="params", check="stop", judged=2),
    ]
    assert judged_items(report.model_copy(update={"judged": rows})) == 4 + 2
    only_errors = [Judged(arm="serial", shape="burst", check="errors", judged=9)]
    assert judged_items(report.model_copy(update={"judged": only_errors})) == 0
