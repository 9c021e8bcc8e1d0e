"""The judge through the default plan (no run options): each class of bug a faulty fake server
injects gives ``correct: false`` with the right sessions named, and every output says so;
every healthy mode of the fake is PASS."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe import plan_run, run_plan
from batchprobe.results import Outcome, Report
from batchprobe.results.findings import FindingKind

from .judgeprobe import FAST, assert_every_output_fails, default_run, gate


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("judge")


@pytest.fixture(scope="module")
def clean(folder: Path) -> Path:
    report, path = default_run(folder, "clean")
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    return path


def _hard(report: Report) -> set[tuple[str | None, FindingKind]]:
    return {(f.shape, f.kind) for f in report.findings if f.hard}


@pytest.mark.parametrize("mode", [
    {},
    {"prefix_cache": True},
    {"jitter_ms": 1.0, "seed": 3},
    {"batch_cap": 4},
    {"tokens_per_delta": 4},
], ids=["continuous", "prefix-cache", "jitter", "batch-cap", "coalesced-deltas"])
def test_every_healthy_mode_of_the_fake_passes(folder: Path, mode: dict[str, object]) -> None:
    report, _ = default_run(folder, "healthy-" + "-".join(map(str, mode)) or "plain", **mode)
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    assert report.verdict.correct is True and report.verdict.parallel is True
    assert not [f for f in report.findings if f.severity != "info"], report.findings
    assert "every self-check held" in report.verdict.reasons[0]
    # Every step is judged, on every shape it carries.
    assert report.envelope is not None
    assert all(s.correct is True for s in report.envelope.steps)
    ran = {s.shape for s in report.shapes if s.ran}
    judged = {j.shape for j in report.judged if j.judged and j.step and j.step > 1
              and j.check not in ("errors", "cross_talk")}
    assert ran == judged and {"burst", "ragged", "early", "repeat", "params"} <= ran


def test_a_fault_above_the_slo_depth_is_not_claimed_correct_beyond_it(
    folder: Path, clean: Path
) -> None:
    # Three slots: at N=4 the step's throughput phase (4 counting prompts of 128 tokens at
    # once) keeps one waiting for a slot for 128 x 6 ms, far above the 0.3 s SLO, which N <= 3
    # never waits for; so the SLO stops the sweep at 4, and the fault above 4 is not reached.
    report, _ = default_run(folder, "slo", {"slo_ttft_p99_s": 0.3}, batch_cap=3, itl_ms=6.0,
                            fault="corrupt", fault_when="above", fault_above=4)
    env = report.envelope
    assert env is not None and env.stop is not None and env.stop.rule.value == "slo"
    assert env.stop.at_n == 4 and max(s.n for s in env.steps) == 4
    v = report.verdict
    assert v.correct_up_to_n == 4 and v.correct is not False
    assert "correct up to N=4; stopped: slo at 4; not judged beyond it" in v.reasons[0]


def test_a_corrupting_server_fails_in_every_output(folder: Path, clean: Path) -> None:
    report, path = default_run(folder, "corrupt", fault="corrupt", fault_when="concurrent")
    assert report.verdict.correct is False
    assert (("burst", FindingKind.COUNT_BROKE)) in _hard(report)
    assert_every_output_fails(report, path, clean, "burst", "count")


# (fake settings, the shape and check that must fail, the finding kind). Each fake mode is one
# class of bug: a row that takes another row's end, max_tokens, stop strings, sampling, logit
# bias or usage, a re-send answered wrong every time.
BUGS = {
    "clean-stop-early": ({"fault": "clean_stop", "fault_when": "early"},
                         "early", "length", FindingKind.ENDED_EARLY),
    "max-tokens-leak": ({"fault": "max_tokens_leak", "fault_when": "concurrent"},
                        None, "length", FindingKind.ENDED_EARLY),
    "stop-leak": ({"fault": "stop_leak", "fault_when": "params"},
                  "params", None, None),
    # Every row run with the stop strings of the rows in flight beside it, its own kept (what
    # llama.cpp + Gemma 3 passed): the greedy neighbour is cut at the stop row's second string.
    "stop-shared": ({"fault": "stop_shared", "fault_when": "params"},
                    "params", "stop", FindingKind.STOP),
    # Another row's penalties: a neighbour's count breaks as penalties break one.
    "penalty-leak": ({"fault": "penalty_leak", "fault_when": "params"},
                     "params", "count", FindingKind.COUNT_BROKE),
    "sampling-leak-logprobs": ({"fault": "param_leak", "fault_when": "params"},
                               "params", "greedy", FindingKind.SAMPLED),
    "sampling-leak-no-logprobs": ({"fault": "param_leak", "fault_when": "params",
                                   "logprobs_format": "none"},
                                  "params", "greedy", FindingKind.SAMPLED_DIVERGENCE),
    # Any row in flight beside a biased one may take its bias: a count of the bias token.
    "bias-leak": ({"fault": "bias_leak", "fault_when": "params"}, None, None, None),
    "usage-leak": ({"fault": "usage_leak", "fault_when": "concurrent"},
                   None, "usage", FindingKind.USAGE),
    # A row in flight beside a constrained one decodes under its JSON schema or grammar.
    "constraint-leak": ({"fault": "constraint_leak", "fault_when": "params"},
                        "params", "constraint", FindingKind.CONSTRAINT),
    # Two requests asking for two choices each in one batch: one's second choice is the
    # other's answer (vLLM PR #16863), so the greedy count row's second choice is cross-talk.
    "n-override": ({"fault": "n_override", "fault_when": "params"},
                   "params", "cross_talk", FindingKind.CROSS_TALK),
    # Every concurrent request re-sends its serial reference's prompt: wrong everywhere.
    "wrong-resend": ({"fault": "wrong_resend"}, None, None, None),
    # Streams damaged under batching (vllm-mlx): deltas dropped while usage and finish stay
    # right (every other one: the text against its reference; every 8th: usage beyond what
    # the text holds), and a stream ended with no finish_reason and no [DONE].
    "drop-deltas": ({"fault": "drop_deltas", "fault_when": "above"},
                    None, "stream", FindingKind.STREAM),
    "drop-deltas-interval": ({"fault": "drop_deltas", "fault_when": "above",
                              "tokens_per_delta": 8}, None, "stream", FindingKind.STREAM),
    "cut-stream": ({"fault": "cut_stream", "fault_when": "above"},
                   None, "errors", FindingKind.ERROR),
}


@pytest.mark.parametrize("name", list(BUGS))
def test_each_class_of_bug_fails_the_default_run_in_every_output(
    folder: Path, clean: Path, name: str
) -> None:
    fake, shape, check, kind = BUGS[name]
    report, path = default_run(folder, name, **fake)
    v = report.verdict
    assert v.correct is False and v.outcome is Outcome.FAIL, v.reasons
    hard = [f for f in report.findings if f.hard]
    mine = [f for f in hard if (shape is None or f.shape == shape)
            and (check is None or f.check == check) and (kind is None or f.kind is kind)]
    assert mine, [(f.shape, f.kind.value, f.message[:80]) for f in hard]
    # The sessions are named: in the finding, in the reasons.
    assert all(f.sessions for f in mine if f.kind is not FindingKind.SAMPLED_DIVERGENCE)
    first = mine[0]
    assert any(f"session {first.sessions[0]}" in r or f"{first.sessions[0]}" in r
               for r in v.reasons)
    assert_every_output_fails(report, path, clean, first.shape or "", first.check)


def test_a_resend_wrong_in_every_replay_is_a_failure_with_its_count(folder: Path) -> None:
    report, _ = default_run(folder, "wrong-resend-replays", fault="wrong_resend")
    again = [f for f in report.findings if f.hard and f.replays]
    assert again and all(f.replays_failed == f.replays for f in again)
    assert any("wrong again in" in f.message for f in again)


def test_a_wrong_answer_that_never_comes_back_is_a_named_flip(folder: Path) -> None:
    # Beside other parameters: the throughput pairs, sent before the steps and never judged,
    # are all greedy alike, so the one flip of the server's life lands in a judged wave.
    report, _ = default_run(folder, "flip-once", fault="flip_once", fault_when="params")
    flips = [f for f in report.findings if f.kind is FindingKind.FLIP]
    assert len(flips) == 1 and flips[0].severity == "soft" and flips[0].sessions
    assert flips[0].replays and not flips[0].replays_failed and flips[0].evidence
    v = report.verdict
    assert v.correct is True, v.reasons
    assert not any("every self-check held" in r for r in v.reasons)
    assert any(r.startswith("soft:") and f"session {flips[0].sessions[0]}" in r
               and "numerics flip" in r for r in v.reasons)


def test_a_failed_warm_up_fails_the_default_run(folder: Path, clean: Path) -> None:
    report, path = default_run(folder, "warm-up", fault="http_500", fault_when="warmup")
    warm = [f for f in report.findings if f.kind is FindingKind.WARM_UP]
    assert warm and all(f.hard for f in warm)
    # The sweep's launch warmed up before its first step: an error of that step.
    assert any(f.arm == "sweep@1" for f in warm), [f.arm for f in warm]
    assert report.verdict.correct is False
    assert report.envelope is not None and report.envelope.steps[0].correct is False
    code, out = gate(clean, path)
    assert code == 1 and "warm_up failed" in out, out


def test_a_server_without_completions_gets_none_and_is_not_failed(folder: Path) -> None:
    # No options at all (the completion style): a refused 1-token probe, then chat only.
    output = folder / "chat-only.json"
    config = FakeServerConfig(serve_completions=False, **FAST)  # type: ignore[arg-type]
    with FakeServerThread(config) as server:
        report = run_plan(plan_run(base_url=server.base_url, output=output))
        requests = server.requests
    assert requests.get("completions", 0) == 1 and requests["chat"] > 0, requests
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    assert report.config.prompt_style == "chat"
    assert any("every request goes over chat" in w for w in report.warnings)
    paths = {s.situation.api for a in report.arms for s in a.sessions if s.situation}
    assert paths == {"chat"}
