"""Scoring an answer against its own request and every needle and count planted on the run.

A pure function of the verdict file: the request as sent (``Report.items``), the answer
(``SessionResult``) and the planted table (``Report.planted``). The run scores each answer
as it arrives (the progress shows hits as they come) and the final pass scores them all
again with the same function, so ``batchprobe judge`` on the file says what the run said.
"""

from __future__ import annotations

from collections.abc import Iterable

from batchprobe.results.items import Planted, WorkItem
from batchprobe.results.models import Report
from batchprobe.results.sessions import SessionResult
from batchprobe.workload.checks import count_sources, count_window, self_check
from batchprobe.workload.scoring import score_recall


def _count_key(item: WorkItem) -> int:
    """Whose count an item continues: a conversation's turns all carry its first turn's."""
    return item.session if item.turn is None else item.turn.conversation


def plant(planted: Planted, items: Iterable[WorkItem]) -> None:
    """Add ``items``' needles and count windows to the run's table (a conversation's turns
    share one window: their counts continue each other)."""
    for item in items:
        if item.expected_code is not None:
            planted.codes[item.session] = item.expected_code
        window = count_window(item)
        if window is None:
            continue
        key = _count_key(item)
        known = planted.windows.get(key)
        start, stop = window.start, window.stop
        if known is not None:
            start, stop = min(known[0], start), max(known[1], stop)
        planted.windows[key] = (start, stop)


def _windows(planted: Planted) -> dict[int, range]:
    return {key: range(start, stop) for key, (start, stop) in planted.windows.items()}


def _others_codes(item: WorkItem, planted: Planted) -> dict[int, str]:
    """Every code planted on the run but those this request was itself sent (a
    conversation turn's prompt holds its other turns' codes): only a code it could not have
    read is another session's content."""
    sent = item.prompt + "".join(m.content for m in item.history)
    return {s: c for s, c in planted.codes.items() if s == item.session or c not in sent}


def score(s: SessionResult, item: WorkItem, planted: Planted) -> None:
    """Set ``s``'s hit, cross-talk sources and self-check from its text and its request."""
    s.hit, s.cross_talk_from, s.check = None, [], None
    if s.hung_up:
        return  # cut by its own client on purpose: a part of an answer, not scored
    windows = _windows(planted)
    key = _count_key(item)
    if item.workload == "recall" and item.expected_code is not None:
        # An error is an error, not a miss: only answers are scored (cross-talk still counts).
        found = score_recall(s.text, item.session, _others_codes(item, planted))
        s.hit = found.hit if s.error is None else None
        s.cross_talk_from = found.cross_talk_from
    if s.error is not None:
        return
    s.check = check = self_check(item, s.text, s.pieces, s.choices)
    if item.workload != "decode":
        return
    if check is not None and not check.passed:
        # A count that broke into another session's numbers: cross-talk, with its source.
        broken = sum(len(p) for p in s.pieces[: check.token or 0])
        s.cross_talk_from = count_sources(s.text[broken:], key, windows)
    elif check is None or check.kind == "choices":
        # A row with no count of its own to follow (open-ended, sampled, penalised): another
        # session's count anywhere in it is cross-talk.
        s.cross_talk_from = count_sources(s.text, key, windows)
    if s.choices:
        # A further choice holding another session's count: cross-talk, with its source.
        sources = {x for c in s.choices for x in count_sources(c.text, key, windows)}
        s.cross_talk_from = sorted(sources.union(s.cross_talk_from))


def rescore(report: Report) -> None:
    """Score every answer of the report again from its saved request."""
    for arm in report.arms:
        for s in [*arm.sessions, *arm.replays, *arm.serial_replays]:
            if s.item is not None:
                score(s, report.items[s.item], report.planted)
