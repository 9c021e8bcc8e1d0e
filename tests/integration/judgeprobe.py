"""The default plan (no run options) against a fast fake, and what every output says of it."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner
from junitparser import Failure, JUnitXml

from batchprobe.cli import main
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.judge import final_pass
from batchprobe.probe import plan_run, run_plan
from batchprobe.report import render_html, render_junit
from batchprobe.results import Outcome, Report, read_report

# Fast enough that the default plan (sessions 8, a sweep to 16, every shape) takes seconds.
FAST = {"ttft_ms": 2.0, "itl_ms": 2.0}


def default_run(folder: Path, name: str, run: dict[str, object] | None = None,
                **fake: object) -> tuple[Report, Path]:
    """``batchprobe run --base-url FAKE`` with no options (``run``: options where a case needs
    one, e.g. an SLO); the verdict and its path. Every one is judged again from its file
    alone, with the server gone, and must say the same."""
    output = folder / f"{name}.json"
    config = FakeServerConfig(**{**FAST, **fake})  # type: ignore[arg-type]
    with FakeServerThread(config) as server:
        run_plan(plan_run(base_url=server.base_url, output=output, **(run or {})))  # type: ignore[arg-type]
    report = read_report(output)
    assert_judged_alike(report, output)
    return report, output


def judgement(report: Report) -> tuple[object, ...]:
    """What a judgement says: the outcome, each finding (arm, shape, kind, severity,
    sessions, sources), the verdict's reasons, each step's record."""
    v = report.verdict
    findings = sorted(
        (f.arm, f.shape or "", f.kind.value, f.severity, tuple(f.sessions), tuple(f.sources))
        for f in report.findings
    )
    steps = report.envelope.steps if report.envelope is not None else []
    return (v.outcome, v.correct, v.parallel, v.correct_up_to_n, findings, v.reasons, steps)


def assert_judged_alike(report: Report, path: Path) -> None:
    """The file judged again with no server (the final pass ``batchprobe judge`` runs, on a
    fresh read of it) gives the run's own judgement."""
    again = read_report(path)
    final_pass(again)
    assert judgement(again) == judgement(report)


def assert_judge_cli_alike(report: Report, path: Path) -> None:
    """``batchprobe judge PATH --output NEW`` (no server): the run's judgement and exit code."""
    again = path.with_name(path.stem + ".judged.json")
    result = CliRunner().invoke(main, ["judge", str(path), "--output", str(again)])
    expected = {Outcome.PASS: 0, Outcome.FAIL: 1}.get(report.verdict.outcome, 2)
    assert result.exit_code == expected, result.output
    assert judgement(read_report(again)) == judgement(report)


def junit_failures(report: Report, folder: Path) -> dict[str, str]:
    """Failing JUnit test cases (classname.name) and their messages."""
    path = folder / f"{report.run_id}.junit.xml"
    path.write_text(render_junit(report), encoding="utf-8")
    failed = {}
    for suite in JUnitXml.fromfile(str(path)):
        for case in suite:
            for result in case.result:
                if isinstance(result, Failure):
                    failed[f"{case.classname}.{case.name}"] = result.message or ""
    return failed


def gate(clean: Path, other: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["compare", str(clean), str(other), "--gate"])
    return result.exit_code, " ".join(result.output.split())


def assert_every_output_fails(report: Report, path: Path, clean: Path, shape: str,
                              kind: str) -> None:
    """JUnit has a failure naming the shape and the check, the gate exits 1 naming it, and
    the HTML has no green for a failing step."""
    failed = junit_failures(report, path.parent)
    named = [n for n in failed if f".{shape}." in n and n.endswith(f".{kind}")]
    assert named, sorted(failed)
    assert "batchprobe.run.correct" in failed and "batchprobe.run.outcome" in failed
    code, out = gate(clean, path)
    assert code == 1, out
    assert f"{shape}.{kind} failed" in out, out
    html = render_html(report)
    failing = {f.arm for f in report.findings if f.hard}
    steps = {s.arm: s.correct for s in (report.envelope.steps if report.envelope else [])}
    for arm in failing:
        if arm not in steps:
            # Not a step (the pressure wave): its failures are listed and linked.
            assert f'href="#failures-{arm}"' in html, arm
            continue
        # The step's row in the steps table is marked wrong, never correct.
        for row in re.findall(rf'<tr class="step-(\w+)[^"]*"[^>]*>\s*<td[^>]*>{arm.split("@")[-1]}\b',
                              html):
            assert row == "wrong", (arm, row)
    assert all(steps.get(arm) is not True for arm in failing if arm in steps)
