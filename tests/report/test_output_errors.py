"""`report` and `compare` at outputs that cannot be written, and at inputs that used to end in a
traceback: one line naming the path and the reason, exit 2, nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from batchprobe.cli import main
from batchprobe.report import compare_reports, load_verdict, render_comparison_html
from mounts import full_disk, read_only_folder


def _invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={"GITHUB_STEP_SUMMARY": "", **(env or {})})


def _one_line_error(result: Result, command: str, path: Path, reason: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines == [f"batchprobe {command}: cannot write {path}: {reason}"], result.stderr
    assert "Traceback" not in result.output and "internal error" not in result.output


def _no_temp_left(folder: Path) -> None:
    if folder.is_dir():
        assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("command", ["report", "compare"])
def test_an_output_in_a_missing_folder_is_one_line_and_exit_2(
    command: str, pass_verdict: Path, tmp_path: Path
) -> None:
    target = tmp_path / "no-such-folder" / "out.html"
    verdicts = [str(pass_verdict)] * (1 if command == "report" else 2)
    result = _invoke(command, *verdicts, "--html", str(target))
    _one_line_error(result, command, target, "No such file or directory")
    assert not target.parent.exists(), "an output's folder is never created on the way"


@pytest.mark.parametrize("command", ["report", "compare"])
def test_an_output_in_a_read_only_folder_is_one_line_and_exit_2(
    command: str, pass_verdict: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdicts = [str(pass_verdict)] * (1 if command == "report" else 2)
    with read_only_folder(tmp_path, monkeypatch) as folder:
        target = folder / "out.md"
        result = _invoke(command, *verdicts, "--md", str(target))
        _one_line_error(result, command, target, "Read-only file system")
        assert not target.exists()


@pytest.mark.parametrize("command", ["report", "compare"])
def test_an_output_on_a_full_disk_is_one_line_exit_2_and_keeps_the_old_file(
    command: str, pass_verdict: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdicts = [str(pass_verdict)] * (1 if command == "report" else 2)
    with full_disk(tmp_path, monkeypatch, filled=False) as disk:
        target = disk.path / "out.html"
        target.write_text("the old report, whole\n")
        disk.fill()
        result = _invoke(command, *verdicts, "--html", str(target))
        _one_line_error(result, command, target, "No space left on device")
        assert target.read_text() == "the old report, whole\n"
        _no_temp_left(disk.path)


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("bad", ["missing-folder", "a-folder", "read-only"])
def test_a_bad_step_summary_warns_in_one_line_and_keeps_the_exit_code(
    command: str, bad: str, pass_verdict: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdicts = [str(pass_verdict)] * (1 if command == "report" else 2)
    md = tmp_path / "out.md"

    def go(summary: Path) -> Result:
        return _invoke(command, *verdicts, "--md", str(md),
                       env={"GITHUB_STEP_SUMMARY": str(summary)})

    if bad == "read-only":
        with read_only_folder(tmp_path, monkeypatch) as folder:
            summary = folder / "summary.md"
            result = go(summary)
    else:
        summary = tmp_path / "gone" / "summary.md" if bad == "missing-folder" else tmp_path
        result = go(summary)
    assert result.exit_code == 0, result.output  # the summary is an extra: PASS stays 0
    lines = result.stderr.splitlines()
    warnings = [line for line in lines if "GITHUB_STEP_SUMMARY" in line]
    assert len(warnings) == 1 and str(summary) in warnings[0], result.stderr
    assert warnings[0].startswith(f"batchprobe {command}: warning: ")
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert md.read_text().startswith("## "), "the files asked for are still written"
    assert "PASS" in result.stdout


def test_deeply_nested_json_is_not_a_verdict_file(tmp_path: Path) -> None:
    for name, text in (("list.json", "[" * 100_000),
                       ("inside.json", '{"schema_version": "1", "config": ' + "[" * 100_000)):
        path = tmp_path / name
        path.write_text(text)
        result = _invoke("report", str(path))
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [
            (f"batchprobe report: {path}: not a valid verdict file: its JSON is nested too "
            "deeply to read (a verdict nests only a few levels)")
        ]
        compared = _invoke("compare", str(path), str(path))
        assert compared.exit_code == 2 and "nested too deeply" in compared.stderr
        assert "Traceback" not in result.output + compared.output


def test_a_dollar_label_is_literal_text_in_the_overlay_plot(
    healthy_sweep: Path, failing_sweep: Path, tmp_path: Path
) -> None:
    html = tmp_path / "compare.html"
    result = _invoke("compare", str(healthy_sweep), str(failing_sweep), "--html", str(html),
                     "--label", "$x$", "--label", r"a $\frac{1}{0$ b")
    assert result.exit_code == 0, result.output
    page = html.read_text()
    assert "Throughput per N, every run" in page
    svg = page[page.index("plot-overlay"):]
    assert "$x$" in svg and r"a $\frac{1}{0$ b" in svg, "the labels are drawn as typed"
    # The library call renders the same way.
    reports = [load_verdict(healthy_sweep), load_verdict(failing_sweep)]
    comp = compare_reports(reports, [healthy_sweep, failing_sweep], labels=["$y$"])
    assert "$y$" in render_comparison_html(comp)


def test_outputs_are_written_whole_and_leave_no_temp(pass_verdict: Path, tmp_path: Path) -> None:
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    html.write_text("old")
    result = _invoke("report", str(pass_verdict), "--html", str(html), "--md", str(md))
    assert result.exit_code == 0, result.output
    assert html.read_text().startswith("<!DOCTYPE html>") and md.read_text().startswith("## ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.md"]
    assert json.loads(pass_verdict.read_text())["verdict"]["outcome"] == "PASS"
