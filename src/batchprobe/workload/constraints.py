"""Constrained decoding: a row whose output a JSON schema or a grammar fixes.

One schema and one grammar, both with exactly two answers (``yes`` or ``no``), so an answer
checks itself on any model: the engine's constraint, not the model, makes it valid. A row
beside one of them whose text turns into such an answer, while its reference does not, ran
under another row's constraint (vLLM PR #22896: plain requests decoding under a batch
neighbour's JSON schema).
"""

from __future__ import annotations

import json

from pydantic import JsonValue

from batchprobe.results.items import Constraint
from batchprobe.results.shapes import SelfCheck

CONSTRAINTS: tuple[Constraint, ...] = ("json_schema", "grammar")
ANSWERS = ("yes", "no")
KEY = "answer"
SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {KEY: {"type": "string", "enum": list(ANSWERS)}},
    "required": [KEY],
    "additionalProperties": False,
}
# llama.cpp's GBNF: one of the two words, nothing else.
GRAMMAR = 'root ::= "yes" | "no"'
# Enough for the JSON object with the whitespace a schema's grammar allows.
MAX_TOKENS = 24
_SHOW = 48


def prompt(head: str, chat: bool) -> str:
    """A yes-or-no question (``head``: the run and session it belongs to)."""
    question = f"[{head}] Question: is the number 7 odd? Answer yes or no."
    return question if chat else question + "\nAnswer:"


def request_fields(kind: Constraint) -> dict[str, JsonValue]:
    """The request body's fields for ``kind``: OpenAI's ``response_format`` with a JSON
    schema, or llama.cpp's ``grammar``."""
    if kind == "json_schema":
        return {"response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "strict": True, "schema": SCHEMA},
        }}
    return {"grammar": GRAMMAR}


def describe(kind: Constraint) -> str:
    return "a JSON schema (answer: yes or no)" if kind == "json_schema" else f"grammar {GRAMMAR!r}"


def fits(kind: Constraint, text: str) -> bool:
    """Whether ``text`` is an answer ``kind`` allows."""
    if kind == "grammar":
        return text in ANSWERS
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and list(value) == [KEY] and value[KEY] in ANSWERS


def looks_constrained(text: str) -> Constraint | None:
    """The constraint ``text`` (stripped) is an answer of, if any: a row that answers like a
    constrained one."""
    stripped = text.strip()
    return next((kind for kind in CONSTRAINTS if stripped and fits(kind, stripped)), None)


def check_constraint(kind: Constraint, text: str) -> SelfCheck:
    ok = fits(kind, text.strip())
    detail = None if ok else f"not an answer its {describe(kind)} allows ({text[:_SHOW]!r})"
    return SelfCheck(kind="constraint", passed=ok, detail=detail)
