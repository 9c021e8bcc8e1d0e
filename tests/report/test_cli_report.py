"""`batchprobe report` and `batchprobe run --report`: the files, and the step summary."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.fake import FakeServerConfig, FakeServerThread


def test_report_writes_each_format_and_appends_the_step_summary(
    cross_talk_verdict: Path, tmp_path: Path
) -> None:
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    html, md, junit = tmp_path / "r.html", tmp_path / "r.md", tmp_path / "r.xml"
    result = CliRunner().invoke(
        main, ["report", str(cross_talk_verdict), "--html", str(html), "--md", str(md),
               "--junit", str(junit)],
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert result.exit_code == 0, result.output
    assert "FAIL parallel=True correct=False" in result.output
    assert html.read_text().startswith("<!DOCTYPE html>")
    assert md.read_text().startswith("## ❌ batchprobe: FAIL")
    assert "<testsuites" in junit.read_text()
    appended = summary.read_text()
    assert appended.startswith("earlier step\n") and md.read_text() in appended


def test_report_without_step_summary_writes_nothing_else(
    pass_verdict: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(main, ["report", str(pass_verdict)], env={"GITHUB_STEP_SUMMARY": ""})
    assert result.exit_code == 0 and "PASS" in result.output
    assert list(tmp_path.iterdir()) == []


def test_run_writes_reports_beside_the_verdict(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    summary = tmp_path / "summary.md"
    fake = FakeServerConfig(ttft_ms=5, itl_ms=4, batching="continuous", slowdown=0.05)
    with FakeServerThread(fake) as server:
        result = CliRunner().invoke(
            main,
            ["run", "--base-url", server.base_url, "--sessions", "4", "--haystack-tokens", "200",
             "--max-tokens", "16", "--output", str(out), "--report", "html,md,junit"],
            env={"GITHUB_STEP_SUMMARY": str(summary)},
        )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["verdict"]["outcome"] == "PASS"
    for name in ("v.html", "v.md", "v.junit.xml"):
        assert (tmp_path / name).stat().st_size > 0, name
    # The closing summary is the same table and verdict lines as before reports existed.
    run_id = json.loads(out.read_text())["run_id"]
    assert f"batchprobe run {run_id}" in result.output and "decode tok/s" in result.output
    assert "PASS parallel=True correct=True (status ok)" in result.output
    assert "verdict written to" in result.output and "v.html" in result.output
    assert summary.read_text() == (tmp_path / "v.md").read_text() + "\n"


def test_run_rejects_an_unknown_report_format_before_probing(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--base-url", "http://127.0.0.1:9", "--report",
                                       "html,pdf", "--output", str(tmp_path / "v.json")])
    assert result.exit_code == 2
    assert "--report" in result.output and "pdf" in result.output and "junit" in result.output
    assert not (tmp_path / "v.json").exists()
