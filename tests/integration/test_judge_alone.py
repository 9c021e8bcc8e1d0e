"""The judge needs only the verdict file: the default plan against the fake, healthy and in
every fault mode, judged again by ``batchprobe judge`` with no server running, says what the
run said (the outcome, every finding's kind, severity, sessions and sources, every step).

Most modes are checked where their own default-plan test runs them (``default_run`` judges
every verdict it makes again); the rest run here. A new fault mode must be placed in one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.fake import FAULT_MODES
from batchprobe.results import Outcome, read_report

from .judgeprobe import assert_judge_cli_alike, default_run
from .test_client_procs import _mode

# Fault modes whose default-plan run lives in another test (and is judged again there).
ELSEWHERE = {
    "none", "http_500", "corrupt", "wrong_resend", "flip_once", "drop_deltas", "cut_stream",
    "param_leak", "bias_leak", "max_tokens_leak", "stop_leak", "stop_shared", "penalty_leak",
    "constraint_leak", "n_override", "usage_leak", "clean_stop",  # test_judge_default_plan
    "abort_leak", "abort_wedge", "abort_ignored", "abort_held",  # test_aborts
    "pool_error", "preempt_repeat", "oversize_hang",  # test_kv_pressure
}
HERE = [m for m in FAULT_MODES if m not in ELSEWHERE]


def test_every_fault_mode_is_judged_again_somewhere() -> None:
    assert ELSEWHERE <= set(FAULT_MODES) and HERE


@pytest.mark.parametrize("fault", HERE)
def test_a_verdict_judged_alone_says_what_the_run_said(tmp_path: Path, fault: str) -> None:
    fake, overrides = _mode(fault)
    settings = fake.model_dump(exclude_defaults=True)
    # default_run asserts the judgement again from the file (``assert_judged_alike``); here
    # through the command too, with its exit code.
    report, path = default_run(tmp_path, fault, {**overrides, "sessions": 4}, **settings)
    assert_judge_cli_alike(report, path)
    if fault != "buffered":
        assert report.verdict.outcome is not Outcome.PASS, report.verdict.reasons


def test_the_judge_scores_answers_from_the_file_not_from_the_run(tmp_path: Path) -> None:
    # A healthy run whose saved answer is edited to hold another session's needle: judged
    # again, it is cross-talk naming that session, whatever the run scored.
    report, path = default_run(tmp_path, "healthy")
    assert report.verdict.outcome is Outcome.PASS
    data = json.loads(path.read_text())
    steps = [a for a in data["arms"] if a["spec"]["role"] == "step"]
    recall = {s["session"]: s for s in steps[-1]["sessions"]
              if s["workload"] == "recall" and s["hit"] and not s["hung_up"]
              and s["situation"]["conversation"] is None and not s["situation"]["copy_index"]}
    victim, source = list(recall.values())[:2]
    victim["text"] = f"The code is {source['expected_code']}."
    victim["chunk_ends"] = [len(victim["text"])]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    again = tmp_path / "edited.judged.json"
    result = CliRunner().invoke(main, ["judge", str(edited), "--output", str(again)])
    assert result.exit_code == 1, result.output
    judged = read_report(again)
    talk = [f for f in judged.findings if f.kind.value == "cross_talk" and f.hard]
    assert [(f.sessions, f.sources) for f in talk] == [([victim["session"]], [source["session"]])]
    assert judged.verdict.correct is False and report.verdict.correct is True


def test_a_file_the_judge_cannot_read_is_one_clear_error(tmp_path: Path) -> None:
    _, path = default_run(tmp_path, "healthy")
    data = json.loads(path.read_text())
    older = tmp_path / "older.json"
    older.write_text(json.dumps({**data, "schema_version": "3.5"}))
    lost = tmp_path / "lost.json"
    data["items"].pop(data["arms"][0]["sessions"][0]["item"])
    lost.write_text(json.dumps(data))
    for bad, says in ((older, "older than the 4.0"), (lost, "its request is not in the file"),
                      (tmp_path / "none.json", "cannot read")):
        out = tmp_path / f"{bad.stem}.out.json"
        result = CliRunner().invoke(main, ["judge", str(bad), "--output", str(out)])
        assert result.exit_code == 2, result.output
        assert says in result.stderr and str(bad) in result.stderr, result.stderr
        assert "Traceback" not in result.output and not out.exists()
