"""The constrained rows' own check, and what marks a row that ran under another's constraint."""

from __future__ import annotations

import pytest

from batchprobe.workload.constraints import (
    check_constraint,
    fits,
    looks_constrained,
    request_fields,
)


@pytest.mark.parametrize(("kind", "text", "ok"), [
    ("json_schema", '{"answer": "yes"}', True),
    ("json_schema", '{ "answer" : "no" }', True),
    ("json_schema", '{"answer": "maybe"}', False),
    ("json_schema", '{"answer": "yes", "why": "odd"}', False),
    ("json_schema", '{"answer": "yes"', False),
    ("json_schema", "yes", False),
    ("grammar", "yes", True),
    ("grammar", "no", True),
    ("grammar", "yes.", False),
    ("grammar", '{"answer": "yes"}', False),
])
def test_an_answer_fits_its_constraint_or_not(kind: str, text: str, ok: bool) -> None:
    assert fits(kind, text) is ok  # type: ignore[arg-type]
    check = check_constraint(kind, f" {text}\n")  # type: ignore[arg-type]
    assert check.kind == "constraint" and check.passed is ok
    assert (check.detail is None) is ok


def test_a_count_or_prose_does_not_look_constrained() -> None:
    assert looks_constrained(" 2024, 2025, 2026,") is None
    assert looks_constrained("The old lighthouse keeper") is None
    assert looks_constrained("") is None
    assert looks_constrained(' {"answer": "no"}') == "json_schema"
    assert looks_constrained("yes\n") == "grammar"


def test_the_request_fields_are_openais_and_llama_cpps() -> None:
    schema = request_fields("json_schema")["response_format"]
    assert isinstance(schema, dict) and schema["type"] == "json_schema"
    assert request_fields("grammar") == {"grammar": 'root ::= "yes" | "no"'}


def test_a_constrained_row_in_other_token_cuts_of_its_references_text_is_not_wrong() -> None:
    # llama.cpp's grammar sampler took `"answer"` whole in one run and in four pieces in
    # another (13 and 17 tokens for the same text, serial runs included): the text decides.
    from batchprobe.judge.answers import ended_early, usage_mismatch
    from batchprobe.results.sessions import SessionResult
    from batchprobe.results.shapes import Situation

    text = '{\n    "answer": "yes"\n}'

    def row(tokens: int, constraint: str | None) -> SessionResult:
        sit = Situation(shape="params", api="chat", arrival_s=0.0, in_flight_at_arrival=6,
                        decoding_at_arrival=6, max_tokens=24, params="greedy",
                        prefix_cache=False, constraint=constraint)  # type: ignore[arg-type]
        return SessionResult(arm="sweep@8", workload="decode", session=143, request_id="r",
                             start_s=0.0, end_s=1.0, text=text, completion_tokens=tokens,
                             finish_reason="stop", prompt_digest="d", situation=sit,
                             chunk_ends=list(range(1, 12)))

    ref = row(17, "json_schema")
    assert ended_early(row(13, "json_schema"), ref, 2) is None
    assert usage_mismatch(row(13, "json_schema"), ref, 2) is None
    # Unconstrained, the same text is the same tokens: other counts are still usage that is
    # not this reply's.
    assert usage_mismatch(row(13, None), row(17, None), 2) is not None


def test_a_constrained_row_that_fits_needs_no_reference_for_ending_early() -> None:
    # It ends where its constraint does, far short of its max_tokens: a fitting answer is
    # complete; one that does not fit is wrong and gets its reference.
    from batchprobe.judge.references import needs_reference, stopped_short
    from batchprobe.results.sessions import SessionResult
    from batchprobe.results.shapes import Situation

    def row(text: str) -> SessionResult:
        sit = Situation(shape="params", api="completions", arrival_s=0.0, in_flight_at_arrival=3,
                        decoding_at_arrival=3, max_tokens=24, params="greedy",
                        prefix_cache=False, constraint="grammar")
        return SessionResult(arm="sweep@4", workload="decode", session=7, request_id="r",
                             start_s=0.0, end_s=1.0, text=text, completion_tokens=2,
                             finish_reason="stop", situation=sit, chunk_ends=[len(text)],
                             check=check_constraint("grammar", text))

    assert not stopped_short(row("yes"), 2) and not needs_reference(row("yes"), 2)
    assert needs_reference(row("yes and"), 2)
