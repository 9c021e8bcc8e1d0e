"""The params wave's rows are built so another row's parameter leaves a mark, and the marks
are read from the text alone: a stop string a row never asked for, another row's forced
word, a count broken as penalties break one."""

from __future__ import annotations

import pytest

from batchprobe.workload.checks import (
    count_ideal,
    count_window,
    penalty_break,
    self_check,
    shows_bias,
    stop_sources,
)
from batchprobe.workload.shapes import BiasToken, ShapeContext
from batchprobe.workload.shapes.params import NEIGHBOUR_STOP_AT, PENALTY, SHAPE


def _plan(sessions: int) -> list:  # type: ignore[type-arg]
    ctx = ShapeContext(run_id="ab12cd34", seed=3, sessions=sessions, haystack_tokens=200,
                       max_tokens=32, recall_max_tokens=16, prompt_style="completion",
                       chars_per_token=4.0, bias_tokens=[BiasToken(" apple", 7)])
    return SHAPE.build(ctx).items


@pytest.mark.parametrize("sessions", [2, 14, 30])
def test_each_stop_row_also_stops_at_a_number_early_in_a_greedy_neighbours_count(
    sessions: int,
) -> None:
    items = _plan(sessions)
    stops = [i for i in items if i.role == "stop"]
    greedy = {i.count.first: i for i in items if i.role == "greedy" and i.count}
    assert stops and greedy
    for row in stops:
        assert row.params.stop is not None and len(row.params.stop) == 2
        own, theirs = row.params.stop
        aimed = int(theirs.strip(" ,")) - NEIGHBOUR_STOP_AT
        assert aimed in greedy and theirs.endswith(",")
        # Never met in its own count, so it still stops only where planned ...
        window = count_window(row)
        assert window is not None
        own_text = "".join(f" {n}," for n in window)
        assert theirs not in own_text and own.strip() in own_text
        # ... and met early in the neighbour's.
        neighbour = greedy[aimed].count
        assert neighbour is not None
        assert theirs in neighbour.ideal(NEIGHBOUR_STOP_AT + 1)


def test_the_penalty_row_is_strong_and_not_judged_as_a_count() -> None:
    (row,) = [i for i in _plan(14) if i.role == "penalty"]
    assert row.params.presence_penalty == PENALTY and row.params.frequency_penalty == PENALTY
    assert row.count is not None
    # Strong penalties break a count on a real model: its own text is not determined.
    assert self_check(row, " 9004, 9005, x", [" 9004,", " 9005,", " x"]) is None


def test_a_text_cut_at_another_rows_stop_string_names_that_row() -> None:
    others = {6: [" 8070", " 4006,"], 9: [" 11050"]}
    # Cut where " 4006," comes: session 6's; its own stop would not have cut it there.
    assert stop_sources(" 4006, 4007,", [], others) == [6]
    assert stop_sources(" 4006, 4007,", [" 4006"], others) == []  # its own explains it
    assert stop_sources(" 4010,", [], others) == []


def test_another_rows_forced_word_is_a_mark_only_where_no_healthy_text_has_it() -> None:
    assert shows_bias(" apple apple apple", " apple", None)
    assert shows_bias(" 4004, 4005, apple", " apple", 12)  # where its count broke
    # One word in an open-ended story is no mark.
    assert not shows_bias(" she ate an apple and left", " apple", None)


def test_a_count_broken_as_penalties_break_one_is_told_from_other_breaks() -> None:
    ideal = count_ideal(" 4004, 4005, 4006,")
    assert ideal is not None and ideal.startswith(" 4004, 4005, 4006, 4007,")
    # The needed '4' came many times; '!' never: a penalty's mark.
    assert penalty_break(" 4004, 4005, !!!!", ideal, stopped=False) is not None
    # Ended where a count goes on: an end-of-sequence token, never seen, as a penalty makes.
    assert penalty_break(" 4004, 4005,", ideal, stopped=True) is not None
    # Needed a token seldom seen and wrote a frequent one: a penalty pushes the other way.
    assert penalty_break(" 4004, 4005, 4000", ideal, stopped=False) is None
    # An intact count, or one that ran to its length.
    assert penalty_break(" 4004, 4005,", ideal, stopped=False) is None
