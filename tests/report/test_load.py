"""Unreadable verdict files given to `report` and `compare`: exit 2, the file and the problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.version import Version

from batchprobe.cli import main
from batchprobe.errors import ReportError
from batchprobe.report import load_verdict
from batchprobe.results import SCHEMA_VERSION


def _variants(verdict: Path, folder: Path) -> dict[str, tuple[Path, str]]:
    """Broken copies of a real verdict: name -> (path, what the error must say)."""
    text = verdict.read_text()
    data = json.loads(text)
    out: dict[str, tuple[Path, str]] = {}

    def write(name: str, content: str, says: str) -> None:
        path = folder / f"{name}.json"
        path.write_text(content)
        out[name] = (path, says)

    write("truncated", text[: len(text) // 2], "truncated")
    middle = len(text) // 3
    write("corrupt", text[:middle] + "\x00#garbage#" + text[middle:], "corrupt")
    newer = dict(data, schema_version=f"{Version(SCHEMA_VERSION).major + 1}.0")
    write("newer", json.dumps(newer), "newer than")
    write("not-a-verdict", json.dumps({"hello": "world"}), "no schema_version")
    broken = dict(data)
    del broken["run_id"]
    write("missing-field", json.dumps(broken), "run_id")
    write("a-list", "[1, 2]", "JSON object")
    out["missing-file"] = (folder / "nope.json", "cannot read")
    return out


def test_load_verdict_names_file_and_problem(pass_verdict: Path, tmp_path: Path) -> None:
    assert load_verdict(pass_verdict).run_id
    for name, (path, says) in _variants(pass_verdict, tmp_path).items():
        with pytest.raises(ReportError) as info:
            load_verdict(path)
        assert str(path) in str(info.value) and says in str(info.value), name


@pytest.mark.parametrize("command", ["report", "compare"])
def test_cli_exits_2_with_one_clear_line(
    command: str, pass_verdict: Path, tmp_path: Path
) -> None:
    for name, (path, says) in _variants(pass_verdict, tmp_path).items():
        args = [command, str(path)] if command == "report" else [command, str(pass_verdict),
                                                                   str(path)]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (name, result.output)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"batchprobe {command}: "), (name, lines)
        assert str(path) in lines[0] and says in lines[0], name
        assert "Traceback" not in result.output
