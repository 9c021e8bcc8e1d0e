"""`batchprobe report` at 80 columns shows every number whole; CSV and JSONL round-trip."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from batchprobe.cli import main
from batchprobe.report._cells import ARM_COLUMNS, arm_cells
from batchprobe.report._envelope import CONSOLE_COLUMNS, PAIR_COLUMNS, console_cells, pair_cells
from batchprobe.report.csv import STEP_FIELDS, render_csv
from batchprobe.report.jsonl import read_jsonl, render_jsonl

from .conftest import load


def _tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each box table of the output: its header's cells and its rows' cells."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    header: list[str] | None = None
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("┃") and header is None:
            header = [c.strip() for c in line.strip("┃").split("┃")]
        elif line.startswith("│") and header is not None:
            cells = [c.strip() for c in line.strip("│").split("│")]
            if rows and not cells[0]:  # a wrapped text cell's next line
                rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells)]
            else:
                rows.append(cells)
        elif line.startswith("└") and header is not None:
            tables.append((header, rows))
            header, rows = None, []
    return tables


@pytest.mark.parametrize("which", ["failing_sweep", "healthy_sweep"])
def test_report_at_80_columns_shows_every_number_whole(
        which: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(which)
    report = load(path)
    result = CliRunner().invoke(main, ["report", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert all(cell_len(line) <= 80 for line in out.splitlines()), out
    assert out.splitlines()[0].startswith(report.verdict.outcome.value), "the answer first"
    assert "Parallel:" in out.splitlines()[0]
    arms, steps, pairs = _tables(out)
    assert "…" not in out.split("parallel=")[0], "a cut cell"
    # Every cell shown is the whole value the renderer gives for it.
    header, rows = arms
    assert header[:3] == list(ARM_COLUMNS[:3]) and len(rows) == len(report.arms)
    for row, arm in zip(rows, report.arms):
        full = dict(zip(ARM_COLUMNS, arm_cells(report, arm)))
        assert row == [full[c] for c in header], (row, full)
    header, rows = steps
    env = report.envelope
    assert env is not None and len(rows) == len(env.steps)
    assert "agg tok/s" in header and "speedup" in header
    for row, step in zip(rows, sorted(env.steps, key=lambda s: s.n)):
        full = dict(zip(CONSOLE_COLUMNS, console_cells(report, step)))
        for column, shown in zip(header, row):
            if column != "correct":
                assert shown == full[column], (column, shown, full[column])
    # The throughput pairs parallel was decided on: the interval whole, as the verdict's.
    header, rows = pairs
    assert header[:4] == list(PAIR_COLUMNS[:4]) and len(rows) == len(env.throughput)
    for row, measured in zip(rows, env.throughput):
        full = dict(zip(PAIR_COLUMNS, pair_cells(measured)))
        assert row == [full[c] for c in header], (row, full)


def test_csv_has_the_steps_tables_values(failing_sweep: Path) -> None:
    report = load(failing_sweep)
    env = report.envelope
    assert env is not None
    rows = list(csv.DictReader(io.StringIO(render_csv(report))))
    assert list(rows[0]) == list(STEP_FIELDS)
    assert [int(r["n"]) for r in rows] == sorted(s.n for s in env.steps)
    for row in rows:
        step = env.step(int(row["n"]))
        assert step is not None and row["arm"] == step.arm and row["kind"] == step.kind
        assert row["correct"] == str(step.correct)
        assert float(row["decode_tokens_per_s"]) == step.decode_tokens_per_s
        assert float(row["wall_s"]) == step.wall_s and int(row["requests"]) == step.requests
        arm = report.arm(step.arm)
        assert arm is not None and arm.metrics is not None and arm.metrics.ttft_s is not None
        assert float(row["ttft_p99_s"]) == arm.metrics.ttft_s.p99
    assert any(r["correct"] == "False" and r["first_reason"] for r in rows)


def test_jsonl_has_one_valid_record_per_request(failing_sweep: Path, tmp_path: Path) -> None:
    report = load(failing_sweep)
    out = tmp_path / "requests.jsonl"
    result = CliRunner().invoke(main, ["report", str(failing_sweep), "--jsonl", str(out),
                                       "--csv", str(tmp_path / "steps.csv")])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert text == render_jsonl(report)
    lines = text.splitlines()
    every = [(a.spec.name, s.request_id) for a in report.arms for s in a.sessions]
    assert len(lines) == len(every) and all(isinstance(json.loads(line), dict) for line in lines)
    records = read_jsonl(text)
    assert [(r.arm, r.request_id) for r in records] == every
    named = {(f.arm, s) for f in report.findings for s in f.sessions}
    with_findings = {(r.arm, r.session) for r in records if r.findings}
    assert with_findings == named and named
    first = records[0]
    assert first.situation is not None and first.e2e_s >= 0 and first.chunks > 0
    assert (tmp_path / "steps.csv").read_text(encoding="utf-8") == render_csv(report)
