"""`batchprobe repro` against the fake: a default-plan FAIL shrunk to the requests that set
the fault off, its standalone reproducer run under `python3 -I` against the faulty and the
healthy fake, a fault that comes back one replay in three reported as flaky, and bad input
refused with one line and nothing written; `batchprobe run --replay` sending the minimal case
(FAIL on the fault, PASS on health) and a whole wave with its join triggers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.repro import ReproCase, case_from
from batchprobe.results import Outcome, read_report

from .judgeprobe import FAST, assert_judged_alike, default_run

# Fires only while at least 3 requests are in flight and their prompts span more than 2x
# in length: the minimal case is the failing request, a longer one and one more.
CROWD = {"fault": "corrupt", "fault_when": "crowd"}
# The fault above with a slower first token: a replay's (or the script's) requests are all in
# flight before it, however loaded the machine (the fault needs 3 at once; at the fake's 2 ms a
# thread started late on a busy machine can miss the others).
CROWD_SLOW = {**CROWD, "ttft_ms": 150.0}


@pytest.fixture(scope="module")
def crowd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    report, path = default_run(tmp_path_factory.mktemp("crowd"), "crowd", **CROWD)
    assert report.verdict.outcome is Outcome.FAIL, report.verdict.reasons
    return path


def _repro(verdict: Path, out: Path, fake: dict[str, object], *args: str) -> tuple[int, str, str]:
    with FakeServerThread(FakeServerConfig(**{**FAST, **fake})) as server:  # type: ignore[arg-type]
        result = CliRunner().invoke(main, ["repro", str(verdict), "--base-url", server.base_url,
                                           "--output", str(out), *args])
    return result.exit_code, result.stdout, result.stderr


def _script(folder: Path, fake: dict[str, object]) -> subprocess.CompletedProcess[str]:
    with FakeServerThread(FakeServerConfig(**{**FAST, **fake})) as server:  # type: ignore[arg-type]
        return subprocess.run(
            [sys.executable, "-I", str(folder / "repro.py"), "--base-url", server.base_url],
            capture_output=True, text=True, timeout=120, check=False,
        )


def test_a_crowd_fault_shrinks_to_three_requests_and_its_script_tells_bug_from_ok(
    crowd: Path, tmp_path: Path
) -> None:
    out = tmp_path / "repro"
    code, stdout, stderr = _repro(crowd, out, CROWD, "--tries", "3")
    assert code == 0, (stdout, stderr)
    case = ReproCase.model_validate_json((out / "repro.json").read_text())
    assert len(case.requests) == 3, [(r.session, len(r.item.prompt)) for r in case.requests]
    assert case.kept.session in {r.session for r in case.requests}
    lengths = sorted(len(r.item.prompt) + sum(len(m.content) for m in r.item.history)
                     for r in case.requests)
    assert lengths[-1] > 2 * lengths[0], "a longer prompt is kept: the fault needs it"
    assert "reproduced" in stdout and "candidate" in stderr
    report = (out / "REPORT.md").read_text()
    assert "python3 -I repro.py" in report and "Shrink history" in report
    assert f"session {case.kept.session}" in report
    # The script: standard library only, isolated; BUG against the fault, OK against health.
    bug = _script(out, CROWD_SLOW)
    assert bug.returncode == 1 and bug.stdout.startswith("BUG: "), (bug.stdout, bug.stderr)
    ok = _script(out, {})
    assert ok.returncode == 0 and ok.stdout.startswith("OK"), (ok.stdout, ok.stderr)
    assert "import batchprobe" not in (out / "repro.py").read_text()


def test_a_fault_that_comes_back_one_replay_in_three_is_flaky(crowd: Path, tmp_path: Path) -> None:
    out = tmp_path / "flaky"
    # The third replay sets the fault off only with its requests in flight together.
    code, stdout, stderr = _repro(crowd, out, {**CROWD_SLOW, "fault_every": 3}, "--tries", "3")
    assert code == 1, (stdout, stderr)
    assert "flaky" in stdout and "1/3" in stdout
    assert "**Flaky**" in (out / "REPORT.md").read_text()
    case = ReproCase.model_validate_json((out / "repro.json").read_text())
    whole = json.loads(crowd.read_text())
    step = next(a for a in whole["arms"] if a["spec"]["name"] == case.kept.arm)
    assert len(case.requests) > 3 and len(case.requests) <= len(step["sessions"]), "not shrunk"


def test_bad_input_is_one_line_and_writes_nothing(crowd: Path, tmp_path: Path) -> None:
    healthy_report, healthy = default_run(tmp_path, "healthy")
    assert healthy_report.verdict.outcome is Outcome.PASS
    older = tmp_path / "older.json"
    older.write_text(json.dumps({**json.loads(crowd.read_text()), "schema_version": "3.5"}))
    cases = [
        (healthy, [], "no hard failure"),
        (older, [], "older than the 4.0"),
        (crowd, ["--time-budget", "0.001"], "time_budget"),
    ]
    for verdict, args, says in cases:
        out = tmp_path / f"out-{len(args)}-{verdict.stem}"
        code, stdout, stderr = _repro(verdict, out, CROWD, "--tries", "1", *args)
        assert code == 2 and says in stderr, (verdict, stdout, stderr)
        assert "Traceback" not in stderr and not out.exists()
    out = tmp_path / "unreachable"
    result = CliRunner().invoke(main, ["repro", str(crowd), "--base-url", "http://127.0.0.1:9",
                                       "--output", str(out)])
    assert result.exit_code == 2 and "127.0.0.1:9" in result.stderr, result.stderr
    assert not out.exists()


def _run_replay(case: Path, out: Path, fake: dict[str, object] | None,
                *args: str) -> tuple[int, str, str]:
    """``batchprobe run --replay CASE`` against a fake (None: no --base-url given)."""
    argv = ["run", "--replay", str(case), "--output", str(out), "--progress", "off", *args]
    if fake is None:
        result = CliRunner().invoke(main, argv)
    else:
        with FakeServerThread(FakeServerConfig(**{**FAST, **fake})) as server:  # type: ignore[arg-type]
            result = CliRunner().invoke(main, [*argv, "--base-url", server.base_url])
    return result.exit_code, result.stdout, result.stderr


def test_run_replay_sends_the_minimal_case_as_an_arm_fail_on_the_fault_pass_on_health(
    crowd: Path, tmp_path: Path
) -> None:
    out = tmp_path / "repro"
    code, stdout, stderr = _repro(crowd, out, CROWD, "--tries", "2")
    assert code == 0, (stdout, stderr)
    case = ReproCase.model_validate_json((out / "repro.json").read_text())
    code, stdout, stderr = _run_replay(out / "repro.json", tmp_path / "bad.json", CROWD_SLOW)
    assert code == 1, (stdout, stderr)
    bad = read_report(tmp_path / "bad.json")
    assert bad.config.replay == str(out / "repro.json")
    replay_arm = next(a for a in bad.arms if a.spec.role == "replay")
    assert sorted(s.session for s in replay_arm.sessions) == sorted(
        r.session for r in case.requests)
    assert bad.arms[0].spec.role == "reference" and len(bad.arms[0].sessions) == len(case.requests)
    kept = [f for f in bad.findings if f.hard and case.kept.session in f.sessions]
    assert kept and kept[0].arm == replay_arm.spec.name, bad.findings
    assert bad.verdict.correct is False and bad.verdict.parallel is None
    assert_judged_alike(bad, tmp_path / "bad.json")
    code, stdout, stderr = _run_replay(out / "repro.json", tmp_path / "good.json", {})
    assert code == 0, (stdout, stderr)
    good = read_report(tmp_path / "good.json")
    assert good.verdict.outcome is Outcome.PASS and good.verdict.correct is True
    assert "parallelism not measured" in good.verdict.parallel_reason


def test_run_replay_sends_a_whole_wave_with_its_join_triggers(crowd: Path, tmp_path: Path) -> None:
    """The whole failing step as a case: each joiner waits for its trigger again (it joins
    streams that are decoding), not for its old offset; against the healthy fake: PASS."""
    whole = case_from(read_report(crowd))
    # A trigger on a stream its client hung up (not replayed) goes at its offset instead.
    firsts = {r.session for r in whole.requests if not r.copy_index}
    joined = {(r.session, r.copy_index): r.after for r in whole.requests
              if r.after is not None and set(r.after.sessions) <= firsts}
    assert any(a.kind == "tokens" for a in joined.values()), "the step has joiners"
    path = tmp_path / "whole.json"
    path.write_text(whole.model_dump_json())
    code, stdout, stderr = _run_replay(path, tmp_path / "whole-verdict.json", {})
    assert code == 0, (stdout, stderr)
    report = read_report(tmp_path / "whole-verdict.json")
    arm = next(a for a in report.arms if a.spec.role == "replay")
    assert arm.spec.concurrency == whole.concurrency
    sent = {(s.session, s.situation.copy_index): s.situation
            for s in arm.sessions if s.situation is not None}
    for key, after in joined.items():
        sit = sent[key]
        assert sit.after == after, (key, sit, after)
        if after.kind == "tokens" and key[0] not in after.sessions:
            assert sit.decoding_at_arrival >= 1, (key, sit)


def test_run_replay_bad_input_is_one_line(crowd: Path, tmp_path: Path) -> None:
    case = case_from(read_report(crowd))
    path = tmp_path / "case.json"
    path.write_text(case.model_dump_json())
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": "0.9"}))
    nowhere = case.model_copy(update={"target": case.target.model_copy(update={"base_url": None})})
    unnamed = tmp_path / "unnamed.json"
    unnamed.write_text(nowhere.model_dump_json())
    cases = [
        (tmp_path / "missing.json", [], "cannot read it"),
        (crowd, [], "not a repro.json"),
        (other, [], "schema_version"),
        (unnamed, [], "names no server"),
        (path, ["--arms", "serial@1,concurrent@4"], "its case's own requests"),
        (path, ["--sessions", "4"], "its case's own requests"),
    ]
    for given, args, says in cases:
        out = tmp_path / f"v-{given.stem}-{len(args)}.json"
        code, _, stderr = _run_replay(given, out, None, *args)
        assert code == 2 and "replay" in stderr and says in stderr, (given, args, stderr)
        assert "Traceback" not in stderr and not out.exists()
