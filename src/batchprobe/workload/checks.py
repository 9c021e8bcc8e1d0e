"""Self-checks: what an item's answer must be, judged from the item alone.

A count must follow its own numbers, a biased request must emit its biased token every time,
a stop string must stop the text. Corrupted text then fails on any engine, batch-invariant or
not; greedy equality with the serial run stays the softer signal beside it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import accumulate

from batchprobe.client.types import ChoiceText
from batchprobe.results.items import CountSpec, WorkItem
from batchprobe.results.shapes import SelfCheck
from batchprobe.workload.constraints import check_constraint
from batchprobe.workload.decode import SHOWN
from batchprobe.workload.scoring import normalise_answer

_NUMBER = re.compile(r"\d+")
_SHOW = 24


def token_at(pieces: list[str], char_pos: int) -> int:
    """Index of the chunk holding character ``char_pos`` of the joined text."""
    for index, end in enumerate(accumulate(len(p) for p in pieces)):
        if char_pos < end:
            return index
    return max(len(pieces) - 1, 0)


def _broke(kind: str, what: str, pieces: list[str], text: str, pos: int) -> SelfCheck:
    token = token_at(pieces, pos)
    # Shown from the start of the chunk that broke, so a half number reads whole.
    begin = sum(len(p) for p in pieces[:token]) if pieces else pos
    shown = text[begin : begin + _SHOW]
    return SelfCheck(
        kind=kind,  # type: ignore[arg-type]
        passed=False,
        token=token,
        detail=f"{what} at token {token} ({shown!r})",
    )


def _mismatch(text: str, ideal: str) -> int | None:
    """First position where ``text`` stops being a prefix of ``ideal``; None if it is one."""
    for pos, (a, b) in enumerate(zip(text, ideal)):
        if a != b:
            return pos
    return None if len(text) <= len(ideal) else len(ideal)


def check_count(count: CountSpec, text: str, pieces: list[str]) -> SelfCheck:
    lead = 0 if count.leading_space else len(text) - len(text.lstrip())
    body = text[lead:]
    if not body.strip():
        # A prefix of the count, but no number: an empty answer does not count.
        return SelfCheck(kind="count", passed=False, token=0, detail=f"no number generated ({text!r})")
    # A continuation's prompt holds the count's first ``skip`` characters already.
    ideal = count.ideal((count.skip + len(body)) // 2 + 2)[count.skip :]
    if not count.leading_space:
        ideal = ideal.lstrip()
    pos = _mismatch(body, ideal)
    if pos is None:
        return SelfCheck(kind="count", passed=True)
    return _broke("count", "count broke", pieces, text, lead + pos)


def check_bias(bias_text: str, text: str, pieces: list[str]) -> SelfCheck:
    if not text:
        return SelfCheck(kind="bias", passed=False, token=0, detail="no token generated")
    pos = 0
    while text.startswith(bias_text, pos):
        pos += len(bias_text)
    if pos == len(text):
        return SelfCheck(kind="bias", passed=True)
    return _broke("bias", f"logit bias toward {bias_text!r} not honoured", pieces, text, pos)


def check_stop(stops: list[str], text: str, pieces: list[str]) -> SelfCheck | None:
    found = [pos for s in stops if (pos := text.find(s)) >= 0]
    if not found:
        return None
    return _broke("stop", "stop string not honoured", pieces, text, min(found))


def self_check(
    item: WorkItem, text: str, pieces: list[str], choices: Sequence[ChoiceText] = ()
) -> SelfCheck | None:
    """The item's verdict on its own answer (``text``, and a row asking for several choices
    its further ``choices``); None when nothing about it is determined."""
    own = _own_check(item, text, pieces)
    if item.params.n is None or (own is not None and not own.passed):
        return own
    further = check_choices(item, choices)
    return SelfCheck(kind="choices", passed=True) if further is None else further


def check_choices(item: WorkItem, choices: Sequence[ChoiceText]) -> SelfCheck | None:
    """A row that asked for ``n`` choices: indices 1 to n-1 beside index 0 (the answer's
    text), each once and ended with a finish reason; under greedy each one its count as
    well. None when the row asked for one, or nothing is wrong with the others."""
    n = item.params.n or 1
    got = [c.index for c in choices]
    if got != list(range(1, n)):
        return SelfCheck(kind="choices", passed=False,
                         detail=f"asked for {n} choices; got indices {[0, *got]}")
    for choice in choices:
        if choice.finish_reason is None or not (choice.text or choice.finish_reason == "stop"):
            return SelfCheck(kind="choices", passed=False, detail=(
                f"choice {choice.index} ended with no text or no finish reason "
                f"(finish {choice.finish_reason!r}, text {choice.text[:_SHOW]!r})"))
        if item.count is None or not item.params.greedy or item.params.penalised:
            continue
        counted = check_count(item.count, choice.text, [choice.text])
        if not counted.passed:
            return SelfCheck(kind="count", passed=False,
                             detail=f"choice {choice.index}: {counted.detail}")
    return None


def _own_check(item: WorkItem, text: str, pieces: list[str]) -> SelfCheck | None:
    if item.workload == "recall":
        if item.expected_code is None:
            return None
        hit = item.expected_code in normalise_answer(text)
        return SelfCheck(
            kind="recall", passed=hit, detail=None if hit else f"missed its needle ({text[:_SHOW]!r})"
        )
    params = item.params
    if params.constraint is not None:
        return check_constraint(params.constraint, text)
    if params.bias_text is not None:
        return check_bias(params.bias_text, text, pieces)
    if params.stop:
        stopped = check_stop(params.stop, text, pieces)
        if stopped is not None:
            return stopped
    if item.count is None or not params.greedy or params.penalised:
        return None
    return check_count(item.count, text, pieces)


def count_sources(text: str, own_session: int, windows: Mapping[int, range]) -> list[int]:
    """Other sessions whose count shows up in ``text`` (cross-talk on a decode item).

    A session is a source only where two or more distinct numbers of ``text`` fall in the
    numbers its own count covers (``windows``: from its prompt's first shown number to as far
    as its ``max_tokens`` could reach). Another session's count continued here brings a run of
    them; a small model's own broken count (a digit dropped or doubled, a thousands digit
    flipped) lands anywhere in the blocks, and seldom twice in one session's window.
    """
    numbers = {int(n) for n in _NUMBER.findall(text) if len(n) >= 4}
    return sorted(
        s
        for s, window in windows.items()
        if s != own_session and sum(n in window for n in numbers) >= 2
    )


def count_window(item: WorkItem) -> range | None:
    """The numbers a counting item's prompt and answer can hold (None: not a count). A
    conversation's k-th count turn continues the k-1 answers before it: its numbers reach as
    far as k answers of ``max_tokens`` could."""
    if item.count is None:
        return None
    answers = item.turn.index if item.turn is not None else 1
    return range(item.count.first - SHOWN, item.count.first + answers * item.max_tokens)


# Another row's parameter applied to this one (a batching bug) leaves its own mark on a count:
# the functions below read it from the text; the judge names the row whose parameter it is.


def count_ideal(text: str) -> str | None:
    """The count ``text`` should be, from its first number on, written as ``text`` writes it
    (None: no number). Long enough to run past the end of ``text``."""
    first = _NUMBER.search(text)
    if first is None:
        return None
    start = int(first.group())
    numbers = range(start, start + len(text) // 2 + 2)
    return text[: first.start()] + ", ".join(map(str, numbers)) + ","


def shown_before(ideal: str) -> str:
    """The numbers a counting prompt shows before the count ``ideal`` begins (llama.cpp
    counts the prompt's tokens into its penalties too)."""
    first = _NUMBER.search(ideal)
    if first is None:
        return ""
    start = int(first.group())
    return " " + ", ".join(str(n) for n in range(start - SHOWN, start)) + ","


def stop_sources(continuation: str, own: list[str], others: Mapping[int, list[str]]) -> list[int]:
    """The other rows (``others``: session -> its stop strings) with a stop string that
    ``continuation`` (what the text would have gone on with) begins with, where none of the
    row's ``own`` does: a text cut there stopped at a string it never asked for."""
    if any(continuation.startswith(stop) for stop in own):
        return []
    return sorted(
        session
        for session, stops in others.items()
        if any(continuation.startswith(stop) and stop not in own for stop in stops)
    )


def shows_bias(text: str, bias_text: str, broke_at: int | None) -> bool:
    """Whether ``text`` emits ``bias_text`` as a forcing bias makes a row do: twice in a row
    anywhere (no healthy row repeats a word so), or once where a count broke (a count
    never writes a word)."""
    if not bias_text.strip():
        return False
    return bias_text * 2 in text or (broke_at is not None and bias_text in text[broke_at:])


# How often the token a count needed must have come before (prompt and text) for a break away
# from it, to a token seen less often or an end, to read as a penalty's: the tokens a count
# repeats (its space, comma, leading digits) come back with every number.
PENALTY_SEEN = 3


def penalty_break(text: str, ideal: str, stopped: bool) -> str | None:
    """Where ``text`` leaves its count ``ideal`` as penalties push a count off, in words:
    the character it needed had come before at least ``PENALTY_SEEN`` times (the prompt's
    shown numbers included) and it wrote one seen less often instead, or ended (``stopped``,
    an end-of-sequence token that never came before). None: not a penalty's mark."""
    pos = _mismatch(text, ideal)
    if pos is None:
        if not stopped or len(text) >= len(ideal):
            return None
        pos, emitted = len(text), None
    else:
        emitted = text[pos]
    needed = ideal[pos]
    before = shown_before(ideal) + text[:pos]
    seen = before.count(needed)
    if seen < PENALTY_SEEN or (emitted is not None and before.count(emitted) >= seen):
        return None
    wrote = "ended" if emitted is None else f"wrote {emitted!r} (seen {before.count(emitted)} times)"
    return f"at character {pos} it needed {needed!r} (seen {seen} times before) and {wrote}"
