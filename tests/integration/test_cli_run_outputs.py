"""`batchprobe run` at outputs that cannot be written: one line naming the path and the reason,
exit 2, and the results kept in the verdict wherever its folder can hold it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import batchprobe.cli.run as cli_run
from batchprobe.cli import main
from batchprobe.fake import FakeServerConfig, FakeServerThread
from mounts import full_disk, read_only_folder


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with FakeServerThread(FakeServerConfig(ttft_ms=5, itl_ms=4)) as server:
        yield server.base_url


def _run(url: str, output: Path, *extra: str, summary: str = "") -> Result:
    args = ["run", "--base-url", url, "--quick", "--sessions", "2", "--haystack-tokens", "200",
            "--max-tokens", "8", "--workloads", "decode", "--shapes", "burst",
            "--progress", "off", "--output", str(output), "--report", "html,md", *extra]
    return CliRunner().invoke(main, args, env={"GITHUB_STEP_SUMMARY": summary})


def _clean(result: Result) -> None:
    assert "Traceback" not in result.output and "internal error" not in result.output


def test_a_missing_output_folder_is_one_line_and_exit_2(server_url: str, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "v.json"
    result = _run(server_url, out)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"batchprobe run: --output: {out.parent} does not exist; create the folder first"]
    _clean(result)


def test_a_read_only_output_folder_is_one_line_and_exit_2(
    server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with read_only_folder(tmp_path, monkeypatch) as folder:
        result = _run(server_url, folder / "v.json")
        assert result.exit_code == 2, result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and "Read-only file system" in lines[0], result.stderr
        assert lines[0].startswith(f"batchprobe run: --output: cannot write in {folder}")
        _clean(result)


def test_a_full_disk_from_the_start_is_one_line_and_exit_2(
    server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with full_disk(tmp_path, monkeypatch) as disk:
        out = disk.path / "v.json"
        result = _run(server_url, out)
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [
            f"batchprobe run: cannot write {out}: No space left on device"], result.stderr
        _clean(result)
        assert not [p for p in disk.path.iterdir() if p.name.startswith(".v.json.")]


def test_a_report_that_cannot_be_written_keeps_the_verdict_and_exits_2(
    server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills up after the verdict is written: the report fails, the verdict stays."""
    real = cli_run.write_rendered
    with full_disk(tmp_path, monkeypatch, filled=False) as disk:
        def fill_first(*args: object) -> Path:
            disk.fill()
            return real(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(cli_run, "write_rendered", fill_first)
        out = disk.path / "v.json"
        result = _run(server_url, out)
        assert result.exit_code == 2, result.output  # a PASS, but a file asked for is missing
        html = disk.path / "v.html"
        assert result.stderr.splitlines() == [
            f"batchprobe run: cannot write {html}: No space left on device"], result.stderr
        _clean(result)
        data = json.loads(out.read_text())
        assert data["status"] == "ok" and data["verdict"]["outcome"] == "PASS"
        assert data["arms"] and all(arm["sessions"] for arm in data["arms"])
        assert "PASS parallel=True" in result.stdout
        assert not html.exists() and not (disk.path / "v.md").exists()
        assert not [p for p in disk.path.iterdir() if p.name.endswith(".tmp")]


def test_a_bad_step_summary_warns_and_a_pass_still_exits_0(
    server_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "v.json"
    summary = tmp_path / "no-such-folder" / "summary.md"
    result = _run(server_url, out, summary=str(summary))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        (f"batchprobe run: warning: $GITHUB_STEP_SUMMARY: cannot append to {summary}: No such "
        "file or directory; the summary is left out")]
    _clean(result)
    assert json.loads(out.read_text())["verdict"]["outcome"] == "PASS"
    assert (tmp_path / "v.html").stat().st_size > 0 and (tmp_path / "v.md").stat().st_size > 0
