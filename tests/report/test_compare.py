"""`batchprobe compare` and its gate on real fake-server verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.errors import NotComparable
from batchprobe.report import compare_reports, load_verdict

# The fake server's throughput moves with the shared machine's load: two healthy runs are
# compared with a wide throughput tolerance, the default 10% is exercised on one run.
NOISE = ["--max-throughput-drop", "0.5"]


def _compare(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["compare", *args])
    return result.exit_code, result.output


def test_two_healthy_runs_pass_the_gate(
    pass_verdict: Path, pass_verdict_again: Path, tmp_path: Path
) -> None:
    md, html = tmp_path / "c.md", tmp_path / "c.html"
    code, out = _compare(str(pass_verdict), str(pass_verdict_again), "--gate", *NOISE,
                         "--md", str(md), "--html", str(html))
    assert code == 0, out
    assert "no regression" in out and "concurrent decode tok/s" in out
    assert "no regression" in md.read_text() and "<table id=\"comparison\">" in html.read_text()


def test_a_run_against_itself_passes_the_default_gate(pass_verdict: Path) -> None:
    code, out = _compare(str(pass_verdict), str(pass_verdict), "--gate")
    assert code == 0, out


def test_cross_talk_run_regresses_against_a_healthy_one(
    pass_verdict: Path, cross_talk_verdict: Path
) -> None:
    code, out = _compare(str(pass_verdict), str(cross_talk_verdict), "--gate", *NOISE)
    assert code == 1, out
    assert "concurrent.burst.cross_talk failed" in out and "run.outcome failed" in out
    assert "did not run" not in out
    # Without --gate the comparison is only shown.
    code, out = _compare(str(pass_verdict), str(cross_talk_verdict), *NOISE)
    assert code == 0 and "regression" in out
    # The other way round the leak is fixed, not a regression.
    code, out = _compare(str(cross_talk_verdict), str(pass_verdict), "--gate", *NOISE)
    assert code == 0, out
    assert "concurrent.burst.cross_talk passes" in out


def test_throughput_drop_beyond_the_tolerance_is_a_regression(
    pass_verdict: Path, tmp_path: Path
) -> None:
    data = json.loads(pass_verdict.read_text())
    concurrent = data["arms"][1]["metrics"]
    concurrent["decode_tokens_per_s"] *= 0.8  # a 20% drop
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(data))
    code, out = _compare(str(pass_verdict), str(slower), "--gate")
    assert code == 1 and "decode throughput" in out and "-20%" in out
    code, out = _compare(str(pass_verdict), str(slower), "--gate", "--max-throughput-drop", "0.25")
    assert code == 0, out


def test_runs_of_different_items_are_not_comparable(
    pass_verdict: Path, other_items_verdict: Path
) -> None:
    code, out = _compare(str(pass_verdict), str(other_items_verdict), "--gate")
    assert code == 2, out
    assert "not comparable" in out and "config.haystack_tokens" in out
    assert "Traceback" not in out


def test_one_verdict_is_a_usage_error(pass_verdict: Path) -> None:
    code, out = _compare(str(pass_verdict))
    assert code == 2 and "at least two" in out


def test_not_comparable_lists_exactly_the_differing_fields(
    pass_verdict: Path, other_items_verdict: Path
) -> None:
    paths = [pass_verdict, other_items_verdict]
    with pytest.raises(NotComparable) as info:
        compare_reports([load_verdict(p) for p in paths], paths)
    assert info.value.fields == ["config.haystack_tokens"]
