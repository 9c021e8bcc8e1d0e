"""The README's library example, run as written against the fake server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.results import read_report

README = Path(__file__).parents[2] / "README.md"
EXAMPLE_URL = "http://127.0.0.1:8099"


def _library_example() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- library-example -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, "README.md has no python block after <!-- library-example -->"
    return match.group(1)


def test_the_readme_library_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _library_example()
    assert EXAMPLE_URL in code and len(code.strip().splitlines()) <= 8
    monkeypatch.chdir(tmp_path)
    with FakeServerThread(FakeServerConfig(ttft_ms=5, itl_ms=1)) as server:
        exec(compile(code.replace(EXAMPLE_URL, server.base_url), str(README), "exec"), {})  # noqa: S102 - the README example, run as written
    printed = capsys.readouterr().out
    report = read_report(tmp_path / "verdict.json")
    assert report.status.value == "ok"
    assert printed.startswith(report.verdict.outcome.value), printed
