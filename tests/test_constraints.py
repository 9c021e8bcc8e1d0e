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
