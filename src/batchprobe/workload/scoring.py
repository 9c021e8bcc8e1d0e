"""Recall scoring: hit, miss, and cross-talk attributed to its source session."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

_SEPARATORS = re.compile(r"[\s\-_.,'\"`]")


class RecallScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hit: bool
    cross_talk_from: list[int]


def normalise_answer(text: str) -> str:
    """Drop separators so '7 412 093' or '7-412-093' still match '7412093'."""
    return _SEPARATORS.sub("", text)


def score_recall(answer: str, own_session: int, codes: dict[int, str]) -> RecallScore:
    """``codes`` maps every session of the run to its code."""
    flat = normalise_answer(answer)
    others = sorted(s for s, code in codes.items() if s != own_session and code in flat)
    return RecallScore(hit=codes[own_session] in flat, cross_talk_from=others)
