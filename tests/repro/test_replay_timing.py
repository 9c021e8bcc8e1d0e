"""When a replay sends each request (no server): a joiner waits for its recorded trigger on
the requests of the case that can go out before it, else goes at its offset; a shape's later
phase waits for its earlier one; the standalone script gets the same schedule and its wave
keeps it (a request waiting on tokens goes once they streamed, on a start once it went out)."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path
from types import ModuleType

from batchprobe.repro.case import ReproRequest
from batchprobe.repro.write import _schedule
from batchprobe.results.items import Turn, WorkItem
from batchprobe.results.shapes import SentAfter
from batchprobe.send.replay import plans_for
from batchprobe.workload.shapes import AfterFinish, AfterTokens

STANDALONE = Path(__file__).parents[2] / "src" / "batchprobe" / "repro" / "_standalone.py"


def _request(session: int, shape: str = "join", copy_index: int = 0, phase: int = 0,
             after: SentAfter | None = None, offset_s: float = 0.5,
             delay_s: float = 0.0) -> ReproRequest:
    item = WorkItem(workload="decode", session=session, prompt=f"s{session}", shape=shape,
                    max_tokens=16)
    return ReproRequest(session=session, copy_index=copy_index, item=item, offset_s=offset_s,
                        phase=phase, after=after, delay_s=delay_s)


def _sends(requests: list[ReproRequest]) -> dict[tuple[int, int], object]:
    return {(x.item.session, x.copy_index): x for p in plans_for(requests) for x in p.sends}


def test_a_joiner_waits_on_the_sent_sessions_of_its_trigger_else_goes_at_its_offset() -> None:
    tokens = SentAfter(kind="tokens", sessions=[1, 2], tokens=8)
    sends = _sends([_request(1), _request(3, after=tokens, offset_s=0.7, delay_s=0.01),
                    _request(4, after=SentAfter(kind="finish", sessions=[9]), offset_s=0.9)])
    joiner = sends[(3, 0)]
    assert joiner.after == AfterTokens((1,), 8) and joiner.delay_s == 0.01  # type: ignore[attr-defined]
    alone = sends[(4, 0)]
    assert alone.after is None and alone.delay_s == 0.9  # type: ignore[attr-defined]


def test_a_resend_whose_first_copy_is_not_in_the_case_goes_at_its_offset() -> None:
    # A stream its client hung up is left out of a case; its retry waited for it to end.
    retry = _request(5, shape="aborts", copy_index=1, after=SentAfter(kind="finish", sessions=[5]),
                     offset_s=0.3)
    sends = _sends([_request(6, shape="aborts"), retry])
    assert sends[(5, 1)].after is None and sends[(5, 1)].delay_s == 0.3  # type: ignore[attr-defined]


def test_phases_hold_within_a_shape_and_a_trigger_never_waits_on_a_later_phase() -> None:
    later = _request(2, shape="burst", phase=1, offset_s=0.4, delay_s=0.0)
    early = _request(3, shape="burst", after=SentAfter(kind="start", sessions=[2]), offset_s=0.2)
    lone = _request(4, shape="params", phase=1, offset_s=0.6)
    sends = _sends([_request(1, shape="burst"), later, early, lone])
    assert sends[(2, 0)].phase == 1 and sends[(2, 0)].delay_s == 0.0  # type: ignore[attr-defined]
    # Session 2 goes in a later phase of the same shape: waiting on it would never end.
    assert sends[(3, 0)].after is None and sends[(3, 0)].delay_s == 0.2  # type: ignore[attr-defined]
    # The only request of its shape: nothing before it, so its offset.
    assert sends[(4, 0)].delay_s == 0.6  # type: ignore[attr-defined]


def test_a_conversation_turn_is_built_after_the_turn_before() -> None:
    first = _request(1, shape="conversation")
    second = _request(2, shape="conversation", phase=1, offset_s=1.0)
    turn = second.item.model_copy(update={"turn": Turn(conversation=1, index=2, continues=1)})
    second = second.model_copy(update={"item": turn, "planned": turn})
    sends = _sends([first, second])
    assert sends[(2, 0)].after == AfterFinish(1)  # type: ignore[attr-defined]


def test_a_later_turn_keeps_the_trigger_the_run_sent_it_on_where_that_request_is_replayed() -> None:
    # The aborts conversation: turn 3 continues turn 1 and went once the dropped turn 2 ended;
    # a turn 2 that finished before its client could hang up is in the case, and waited for.
    first = _request(1, shape="aborts")
    dropped = _request(2, shape="aborts", phase=1)
    turn = _request(3, shape="aborts", phase=1, after=SentAfter(kind="finish", sessions=[2]))
    planned = turn.item.model_copy(update={"turn": Turn(conversation=1, index=2, continues=1)})
    turn = turn.model_copy(update={"item": planned, "planned": planned})
    assert _sends([first, dropped, turn])[(3, 0)].after == AfterFinish(2)  # type: ignore[attr-defined]
    # Turn 2 hung up and left out: once turn 1 ended.
    assert _sends([first, turn])[(3, 0)].after == AfterFinish(1)  # type: ignore[attr-defined]


def _standalone() -> ModuleType:
    spec = importlib.util.spec_from_file_location("standalone", STANDALONE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_gets_the_replay_schedule_and_its_wave_keeps_it() -> None:
    requests = [_request(1), _request(2, after=SentAfter(kind="tokens", sessions=[1], tokens=2),
                                      delay_s=0.05),
                _request(3, shape="burst"), _request(4, shape="burst", phase=1)]
    when = _schedule(requests)
    assert when[1] == {"phase_after": [], "after": {"kind": "tokens", "requests": [0],
                                                    "tokens": 2}, "delay_s": 0.05}
    assert when[3]["phase_after"] == [2] and when[0]["delay_s"] == 0.5
    wave = _standalone()._Wave(len(requests))
    released: list[float] = []
    waiter = threading.Thread(target=lambda: (wave.wait(when[1]), released.append(time.monotonic())))
    waiter.start()
    wave.mark("started", 0)
    wave.mark("chunk", 0)
    time.sleep(0.05)
    assert not released, "one chunk of two: still waiting"
    wave.mark("chunk", 0)
    waiter.join(timeout=5)
    assert released, "released once request 0 streamed 2 chunks"
    # A later phase waits for the phase before it to end.
    assert not wave._met(when[3])
    wave.mark("done", 2)
    assert wave._met(when[3])
