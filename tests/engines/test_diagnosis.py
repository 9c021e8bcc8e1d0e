"""Diagnosis from real vllm-mlx output (captured from the engines themselves) and synthetic logs.

data/vllm-mlx-0.3.0-batching-gemma4.log: `vllm-mlx serve` 0.3.0 with --continuous-batching on
the tiny gemma-4, two concurrent /v1/completions (both came back 200 with finish_reason
"error"). data/vllm-mlx-0.6.0-simple-503.json: the body of the 503 that 0.6.0's simple engine
returned to the second of two overlapping requests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from batchprobe.engines import diagnose, diagnose_findings, last_traceback
from batchprobe.engines._known import KnownIssue

DATA = Path(__file__).with_name("data")
SHARED_KV_LOG = (DATA / "vllm-mlx-0.3.0-batching-gemma4.log").read_text()
BUSY_BODY = (DATA / "vllm-mlx-0.6.0-simple-503.json").read_text()


def test_shared_kv_known_issue_on_the_real_0_3_0_log() -> None:
    found = diagnose("vllm-mlx", "0.3.0", SHARED_KV_LOG, [])
    assert [d.issue_id for d in found] == ["vllm-mlx-gemma4-shared-kv"]
    issue = found[0]
    assert issue.known and issue.is_bug
    assert issue.fixed_in == "0.4.0" and issue.patch == "gemma4-attention"
    assert any("unexpected keyword argument 'shared_kv'" in line for line in issue.evidence)
    assert len(issue.evidence) == len(set(issue.evidence)) <= 5


def test_shared_kv_is_not_claimed_for_fixed_versions() -> None:
    found = diagnose("vllm-mlx", "0.6.0", SHARED_KV_LOG, [])
    assert [d.issue_id for d in found] == ["unknown"]
    assert found[0].evidence[-1].startswith("TypeError:")


def test_busy_503_is_by_design_not_a_bug() -> None:
    found = diagnose("vllm-mlx", "0.6.0", "", [BUSY_BODY])
    assert [d.issue_id for d in found] == ["vllm-mlx-simple-busy-503"]
    assert found[0].is_bug is False and found[0].known
    assert "text_generation_busy" in found[0].evidence[0]


def test_unknown_failure_takes_the_last_traceback() -> None:
    log = (
        "INFO starting\n"
        "Traceback (most recent call last):\n"
        '  File "a.py", line 1, in <module>\n'
        "ValueError: first\n"
        "INFO retrying\n"
        "Traceback (most recent call last):\n"
        '  File "b.py", line 2, in load\n'
        "    raise OSError('no such model')\n"
        "OSError: no such model\n"
        "INFO shutting down\n"
    )
    found = diagnose("mlx-lm", "0.32.2", log, [])
    assert len(found) == 1 and not found[0].known and found[0].issue_id == "unknown"
    assert found[0].evidence[0] == "Traceback (most recent call last):"
    assert found[0].evidence[-1] == "OSError: no such model"
    assert "ValueError: first" not in found[0].evidence


def test_unknown_failure_without_traceback_uses_error_lines() -> None:
    log = "load: ok\nsrv  load_model: failed to load model '/nope.gguf'\nmain: exiting due to model loading error\n"
    found = diagnose("llama.cpp", None, log, [])
    assert found[0].issue_id == "unknown"
    assert found[0].evidence == [
        "srv  load_model: failed to load model '/nope.gguf'",
        "main: exiting due to model loading error",
    ]


def test_clean_log_gives_no_diagnosis() -> None:
    assert diagnose("llama.cpp", "0.3.36", "INFO all good\nINFO served 8 requests\n", []) == []


def test_long_tracebacks_are_trimmed() -> None:
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "f{i}.py", line {i}, in g' for i in range(40)] + ["KeyError: 'x'"]
    block = last_traceback(lines)
    assert (
        len(block) == 12
        and block[0] == lines[0]
        and block[1] == "  ..."
        and block[-1] == "KeyError: 'x'"
    )


@pytest.mark.parametrize(
    ("version", "log"),
    [
        ("0.31.2", ('  File "mlx_lm/generate.py", line 1638, in insert_segments\n'
                    "    if len(seq[-1]) != 1:\n           ~~~^^^^\n"
                    "IndexError: list index out of range\n")),
        ("0.32.2", "ERROR - mlx_lm.server generation thread died: Sequence 1 has an empty prompt.\n"),
    ],
)  # fmt: skip
def test_mlx_lm_exact_cache_hit_is_named_with_its_patch(version: str, log: str) -> None:
    found = diagnose("mlx-lm", version, log, [])
    assert [d.issue_id for d in found] == ["mlx-lm-exact-cache-hit"]
    assert found[0].known and found[0].patch == "mlx-lm-exact-cache-hit"


# A hard finding of mlx-lm 0.31.0's repeat wave (the corpus case, measured 2026-12-05).
CHECKPOINT_FINDING = (
    "cross_talk: session 5 (its copy 2; joined while 6 were decoding (client's view); after "
    "session 6 left at its token 255 (5 still in flight); 281 prompt tokens cached; max_tokens "
    "256, 282 prompt tokens, chat) answered with the code of session(s) 2 (cross-talk): '4726575'"
)


def test_a_bug_without_a_trace_is_known_by_its_symptom_on_an_affected_version() -> None:
    found = diagnose_findings("mlx-lm", "0.31.0", [CHECKPOINT_FINDING])
    assert [d.issue_id for d in found] == ["mlx-lm-checkpoint-last-row"]
    assert found[0].fixed_in == "0.31.1" and found[0].evidence == [CHECKPOINT_FINDING]
    # Not on the fixed version; not without a cache hit; not over completions; never from a log.
    assert diagnose_findings("mlx-lm", "0.31.1", [CHECKPOINT_FINDING]) == []
    uncached = CHECKPOINT_FINDING.replace("281 prompt tokens cached; ", "")
    assert diagnose_findings("mlx-lm", "0.31.0", [uncached]) == []
    assert diagnose_findings("mlx-lm", "0.31.0", [CHECKPOINT_FINDING.replace("chat)", "completions)")]) == []
    assert diagnose("mlx-lm", "0.31.0", CHECKPOINT_FINDING, [CHECKPOINT_FINDING]) == []


# vllm-mlx 0.4.1's conversation wave on the constructed tiny gemma-3 (window 128): the third
# turn served whole from the prefix cache (measured 2026-12-05).
WINDOW_FINDING = (
    "count_broke: session 8 (max_tokens 32, 133 prompt tokens, completions) count broke at "
    "token 0 (', 8734, 8735, 8736, 8737'); wrong again in 1/1 replays of its wave"
)
WINDOW_LOG = (
    "INFO:vllm_mlx.scheduler:[cache_fetch] request=523634c8-c0e HIT prompt_tokens=529 "
    "cached=286 remaining=243 time=0.000s\n"
    "INFO:vllm_mlx.scheduler:[cache_fetch] request=eafff608-816 HIT prompt_tokens=263 "
    "cached=263 remaining=0 time=0.000s\n"
    "INFO:vllm_mlx.scheduler:[cache_fetch] request=0b1e3c55-2a4 HIT prompt_tokens=133 "
    "cached=133 remaining=0 time=0.000s\n"
)


def test_a_silent_bug_that_needs_a_log_line_is_named_only_with_it() -> None:
    found = diagnose_findings("vllm-mlx", "0.4.1", [WINDOW_FINDING], WINDOW_LOG)
    assert [d.issue_id for d in found] == ["vllm-mlx-sliding-window-cache-hit"]
    # The hit of that request's size, not the whole-prompt hit of another one before it.
    whole_hit = WINDOW_LOG.splitlines()[2].strip()
    assert found[0].evidence == [WINDOW_FINDING, whole_hit] and found[0].fixed_in == "0.5.0"
    # Not without a hit that served the whole prompt of a request that size; not on the fixed
    # version; not for a finding of another kind; never from the log alone.
    for log in WINDOW_LOG.splitlines()[:2]:
        assert diagnose_findings("vllm-mlx", "0.4.1", [WINDOW_FINDING], log) == []
    assert diagnose_findings("vllm-mlx", "0.4.1", [WINDOW_FINDING]) == []
    assert diagnose_findings("vllm-mlx", "0.6.0", [WINDOW_FINDING], WINDOW_LOG) == []
    error = "error: session 8 (max_tokens 32, 133 prompt tokens, completions) failed"
    assert diagnose_findings("vllm-mlx", "0.4.1", [error], WINDOW_LOG) == []
    assert diagnose("vllm-mlx", "0.4.1", WINDOW_LOG + WINDOW_FINDING, []) == []


def test_log_patterns_only_corroborate_a_finding_issue() -> None:
    with pytest.raises(ValidationError, match="only with where='finding'"):
        KnownIssue(issue_id="x", title="t", patterns=("a",), log_patterns=("b",), where="log",
                   explanation="e", remedy="r")


# vllm-mlx 0.2.8's burst at 8 on tiny-gemma4-wide, chat (measured 2026-12-06): batch-mates
# answer the count of the session whose partial prefix-cache hit wrote into the stored entry.
LEAK_FINDING = (
    "cross_talk: session 10 (sent with 2 in flight (client's view); max_tokens 96, 100 prompt "
    "tokens, chat) answered with the content of session(s) 15 (cross-talk): '17707, 17708, "
    "17709, 17710, 17711, 17712, 17713,'"
)
LEAK_LOG = "INFO:vllm_mlx.mllm_batch_generator:MLLMBatchGenerator: KV prefix cache enabled\n"


def test_the_prefix_leak_is_named_from_cross_talk_on_the_multimodal_prefix_cache() -> None:
    found = diagnose_findings("vllm-mlx", "0.2.8", [LEAK_FINDING], LEAK_LOG)
    assert [d.issue_id for d in found] == ["vllm-mlx-prefix-lcp-leak"]
    assert found[0].evidence == [LEAK_FINDING, LEAK_LOG.strip()] and found[0].fixed_in == "0.2.9"
    # Not on the fixed version; not without the multimodal prefix cache; not for another kind.
    assert diagnose_findings("vllm-mlx", "0.2.9", [LEAK_FINDING], LEAK_LOG) == []
    assert diagnose_findings("vllm-mlx", "0.2.8", [LEAK_FINDING]) == []
    broke = "count_broke: session 10 (max_tokens 96, 100 prompt tokens, chat) count broke"
    assert diagnose_findings("vllm-mlx", "0.2.8", [broke], LEAK_LOG) == []
