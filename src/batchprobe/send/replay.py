"""A failing wave sent again as its run sent it (``results.repro``'s requests): each shape's
requests in their phases, a joiner after its trigger, the rest at their offsets; a
conversation's later turn built from the turn before as this replay answers it.
``batchprobe repro`` replays it while it shrinks a case; ``batchprobe run --replay`` sends it
as an arm."""

from __future__ import annotations

from batchprobe.results.items import WorkItem
from batchprobe.results.repro import ReproRequest
from batchprobe.results.shapes import SentAfter
from batchprobe.workload.shapes import (
    AfterFinish,
    AfterStart,
    AfterTokens,
    Send,
    ShapePlan,
    Trigger,
)


def _sent(r: ReproRequest, sessions: set[int]) -> WorkItem:
    """What ``r`` sends: a later turn whose turn before is sent too is built from that one's
    answer in this replay, as the run built it; any other goes out exactly as it did."""
    turn = r.item.turn
    if r.planned is not None and turn is not None and turn.continues in sessions:
        return r.planned
    if turn is None or turn.continues is None:
        return r.item
    return r.item.model_copy(update={"turn": turn.model_copy(update={"continues": None})})


def sent_after(trigger: Trigger | None) -> SentAfter | None:
    """A trigger as the verdict file keeps it (``_trigger`` reads it back)."""
    if isinstance(trigger, AfterTokens):
        return SentAfter(kind="tokens", sessions=list(trigger.sessions), tokens=trigger.tokens)
    if isinstance(trigger, AfterFinish):
        return SentAfter(kind="finish", sessions=[trigger.session])
    if isinstance(trigger, AfterStart):
        return SentAfter(kind="start", sessions=[trigger.session])
    return None


def _trigger(after: SentAfter | None, firsts: set[int]) -> Trigger | None:
    """The join trigger as recorded, on the sessions it names whose first send is sent too
    and not after it (None when none is: the request then goes at its offset)."""
    kept = [s for s in (after.sessions if after is not None else []) if s in firsts]
    if after is None or not kept:
        return None
    if after.kind == "tokens":
        return AfterTokens(tuple(kept), after.tokens or 1)
    return AfterFinish(kept[0]) if after.kind == "finish" else AfterStart(kept[0])


def _send(r: ReproRequest, sessions: set[int], firsts: set[int], first_phase: int) -> Send:
    """As its shape sent it: after its trigger, in its phase (a conversation's later turn
    built from the turn before: with no trigger of the run's kept, once that one ended); else
    at its offset after the start."""
    item = _sent(r, sessions)
    trigger = _trigger(r.after, firsts)
    if trigger is None and item is r.planned and item.turn is not None \
            and item.turn.continues is not None:
        # No recorded trigger to keep (the run's, e.g. a dropped turn's end, holds where that
        # request is replayed too): once the turn it continues ended.
        return Send(item, copy_index=r.copy_index, phase=r.phase,
                    after=AfterFinish(item.turn.continues))
    if trigger is not None or r.phase > first_phase:
        return Send(item, copy_index=r.copy_index, phase=r.phase, after=trigger,
                    delay_s=r.delay_s)
    return Send(item, copy_index=r.copy_index, phase=r.phase, delay_s=r.offset_s)


def plans_for(requests: list[ReproRequest]) -> list[ShapePlan]:
    """One plan per shape and cache, as the wave sent them: a shape's phases and triggers
    hold among its own requests (triggers across shapes too: the wave is one). A trigger
    waits only on first sends that can go out before it: in another plan, or in its own
    at an earlier or the same phase."""
    sessions = {r.session for r in requests}
    groups: dict[tuple[str, bool], list[ReproRequest]] = {}
    for r in requests:
        groups.setdefault((r.item.shape, r.prefix_cache), []).append(r)
    firsts = {r.session: (key, r.phase) for key, mine in groups.items() for r in mine
              if not r.copy_index}
    plans = []
    for key, mine in groups.items():
        first_phase = min(r.phase for r in mine)
        sends = []
        for r in mine:
            before = {s for s, (k, phase) in firsts.items() if k != key or phase <= r.phase}
            sends.append(_send(r, sessions, before, first_phase))
        items = [x.item for x in sends if not x.copy_index]
        plans.append(ShapePlan(key[0], items, sends, prefix_cache=key[1]))
    return plans
