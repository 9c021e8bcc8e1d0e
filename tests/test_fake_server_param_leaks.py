"""The fake's leaks of stop strings and penalties act as an engine's would on the text it
generates: a leaked stop string cuts a neighbour where it occurs (finish "stop"), leaked
penalties break a neighbour's count."""

from __future__ import annotations

from batchprobe.fake import FakeServerThread
from batchprobe.fake._tokens import CORRUPT_PIECE
from test_fake_server_bugs import alone, count_of, counting, fake, together


def test_stop_shared_cuts_a_neighbour_at_a_stop_string_it_never_asked_for() -> None:
    greedy = counting(0, 2000, 12)
    stopper = counting(1, 3000, 12, stop=[" 3010", " 2006,"])
    with FakeServerThread(fake(fault="stop_shared", fault_when="concurrent")) as server:
        lone = alone(server.base_url, greedy)
        cut, own = together(server.base_url, [greedy, stopper])
    assert lone.text == count_of(greedy, 12) and lone.finish_reason == "length"
    assert cut.text == " 2004, 2005," and cut.finish_reason == "stop"
    # The stop row keeps its own stop strings: it stops where it planned.
    assert own.text == " 3004, 3005, 3006, 3007, 3008, 3009," and own.finish_reason == "stop"


def test_penalty_leak_breaks_a_neighbours_count_and_strong_penalties_break_one_alone() -> None:
    greedy = counting(0, 2000, 12)
    penalised = counting(1, 3000, 12, presence_penalty=2.0, frequency_penalty=2.0)
    with FakeServerThread(fake(fault="penalty_leak", fault_when="concurrent")) as server:
        lone, own_alone = alone(server.base_url, greedy), alone(server.base_url, penalised)
        broken, _ = together(server.base_url, [greedy, penalised])
    assert lone.text == count_of(greedy, 12)
    # Alone, its own penalties break its count (the space and the comma come back each
    # number), after a few numbers; mild penalties would not.
    assert CORRUPT_PIECE in own_alone.text and own_alone.text.startswith(" 3004, 3005,")
    assert broken.text.startswith(" 2004, 2005,") and CORRUPT_PIECE in broken.text
    assert broken.finish_reason == "length"
