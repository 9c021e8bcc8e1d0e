"""The default plan against the fake's bug modes: the evidence a judge reads is in the
verdict's data (roles, top logprobs, usage, finish), in the concurrent steps only."""

from __future__ import annotations

from pathlib import Path

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe import plan_run, run_plan
from batchprobe.results import Report, SessionResult

FAST: dict[str, object] = {"ttft_ms": 20.0, "itl_ms": 0.5}


def default_run(tmp_path: Path, sweep: str | None = None, **fake: object) -> Report:
    """The default plan (or one sweep of it) against the fake in the mode ``fake`` says."""
    tmp_path.mkdir(exist_ok=True)
    with FakeServerThread(FakeServerConfig(**{**FAST, **fake})) as server:  # type: ignore[arg-type]
        # Every item's serial reference: the tests read the data beside each row's own.
        plan = plan_run(base_url=server.base_url, output=tmp_path / "v.json", sweep=sweep,
                        references="every")
        return run_plan(plan)


# A failing step stops the sweep; at depth 2 whether an open row shares the server with a
# sampled one at its first token is up to scheduling, at 4 (the first params rows together) not.
LEAK_SWEEP = "1,4"
# The leak fires only between rows in flight together: a first token 150 ms out keeps the
# wave's four rows together even when a loaded machine sends them tens of ms apart.
TOGETHER: dict[str, object] = {"ttft_ms": 150.0}


def _rows(report: Report, role: str) -> tuple[list[SessionResult], list[SessionResult]]:
    """(serial references, concurrent rows) of ``role``."""
    serial, concurrent = [], []
    for arm in report.arms:
        rows = [s for s in arm.sessions if s.situation and s.situation.role == role]
        (serial if arm.spec.concurrency == 1 else concurrent).extend(rows)
    return serial, concurrent


def _off_top(rows: list[SessionResult]) -> list[SessionResult]:
    return [s for s in rows if any(not t.top1 for t in s.top_logprobs or [])]


def test_a_healthy_fake_keeps_every_open_row_top1_and_every_role_answered(tmp_path: Path) -> None:
    report = default_run(tmp_path)
    serial, concurrent = _rows(report, "open")
    assert serial and concurrent
    assert all(s.top_logprobs for s in serial + concurrent)
    assert _off_top(serial + concurrent) == []
    roles = {s.situation.role for a in report.arms for s in a.sessions
             if s.shape == "params" and s.situation}  # fmt: skip
    assert roles == {"greedy", "open", "control", "sampled", "bias", "stop", "penalty",
                     "json_schema", "grammar", "choices"}
    # Only open rows asked for top logprobs under concurrency; every serial reference did
    # (its near ties).
    asked = {s.situation.role for a in report.arms for s in a.sessions
             if s.top_logprobs is not None and s.situation and a.spec.concurrency > 1}  # fmt: skip
    assert asked == {"open"}
    references = [s for a in report.arms if a.spec.concurrency == 1 for s in a.sessions
                  if s.error is None and not s.hung_up]  # fmt: skip
    assert references and all(s.top_logprobs for s in references)


def test_param_leak_shows_in_open_rows_logprobs_and_text(tmp_path: Path) -> None:
    report = default_run(tmp_path, LEAK_SWEEP, fault="param_leak", fault_when="params",
                         **TOGETHER)
    serial, concurrent = _rows(report, "open")
    assert _off_top(serial) == []
    leaked = _off_top(concurrent)
    assert leaked
    reference = {s.session: s.text for s in serial}
    assert all(s.text != reference[s.session] for s in leaked)
    # Control rows run beside greedy traffic only: untouched (in the steps that ran).
    control_serial, control = _rows(report, "control")
    control_reference = {s.session: s.text for s in control_serial}
    assert control and all(s.text == control_reference[s.session] for s in control)


def test_without_logprobs_only_the_divergence_is_left(tmp_path: Path) -> None:
    report = default_run(
        tmp_path, LEAK_SWEEP, fault="param_leak", fault_when="params", logprobs_format="none",
        **TOGETHER,
    )
    serial, concurrent = _rows(report, "open")
    assert all(s.top_logprobs == [] for s in serial + concurrent)
    reference = {s.session: s.text for s in serial}
    diverged = [s for s in concurrent if s.text != reference[s.session]]
    control_serial, control = _rows(report, "control")
    control_reference = {s.session: s.text for s in control_serial}
    assert diverged
    assert all(s.text == control_reference[s.session] for s in control)


def test_usage_leak_and_clean_stop_leave_their_evidence(tmp_path: Path) -> None:
    report = default_run(tmp_path / "usage", fault="usage_leak", fault_when="concurrent")
    streamed = [s for a in report.arms[1:] for s in a.sessions
                if s.ok and s.streamed and s.completion_tokens != len(s.pieces)]  # fmt: skip
    assert streamed
    assert all(s.completion_tokens == len(s.pieces) for s in report.arms[0].sessions if s.ok)
    report = default_run(tmp_path / "stop", fault="clean_stop", fault_when="early")
    reference = {s.session: s for s in report.arms[0].sessions}
    cut = [s for a in report.arms[1:] for s in a.sessions
           if s.session in reference and s.finish_reason == "stop"
           and reference[s.session].finish_reason == "length"]  # fmt: skip
    assert cut and all(len(s.pieces) < len(reference[s.session].pieces) for s in cut)
