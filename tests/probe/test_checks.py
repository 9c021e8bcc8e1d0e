"""Self-checks: counts, logit bias and stop strings judged from the item alone."""

from batchprobe.results.items import CountSpec, SamplingParams, Turn
from batchprobe.workload.checks import (
    check_bias,
    check_count,
    count_sources,
    count_window,
    self_check,
)
from batchprobe.workload.decode import count_owner, count_start, counting_item

COUNT = CountSpec(first=2004, leading_space=True)


def test_a_count_that_follows_its_numbers_passes_even_cut_mid_number():
    assert check_count(COUNT, " 2004, 2005, 20", [" 2004,", " 2005,", " 20"]).passed


def test_a_broken_count_names_the_chunk_and_shows_it_whole():
    pieces = [" 2004,", " 2005,", " 2006,", "!!!!", "!!!!"]
    result = check_count(COUNT, "".join(pieces), pieces)
    assert not result.passed and result.token == 3
    assert result.detail == "count broke at token 3 ('!!!!!!!!')"


def test_chat_counts_may_start_without_the_leading_space():
    chat = CountSpec(first=2004, leading_space=False)
    assert check_count(chat, "2004, 2005,", ["2004,", " 2005,"]).passed
    assert check_count(chat, " 2004, 2005,", [" 2004,", " 2005,"]).passed


def test_bias_must_show_in_every_token_not_only_the_first():
    assert check_bias(" apple", " apple apple apple", [" apple"] * 3).passed
    first_only = check_bias(" apple", " apple 2005, 2006,", [" apple", " 2005,", " 2006,"])
    assert not first_only.passed and first_only.token == 1


def test_a_stop_string_must_stop_the_text():
    item = counting_item(run_id="r", session=0, start=2000, max_tokens=16, shape="early",
                         params=SamplingParams(stop=[" 2007"]))
    assert self_check(item, " 2004, 2005, 2006,", [" 2004,", " 2005,", " 2006,"]).passed  # type: ignore[union-attr]
    ran_on = self_check(item, " 2004, 2005, 2006, 2007,", [" 2004,", " 2005,", " 2006,", " 2007,"])
    assert ran_on is not None and not ran_on.passed and ran_on.kind == "stop"


def test_sampled_rows_have_no_self_check():
    item = counting_item(run_id="r", session=0, start=2000, max_tokens=16, shape="params",
                         params=SamplingParams(temperature=1.0))
    assert self_check(item, "anything", ["anything"]) is None


def test_count_blocks_name_their_session():
    import random

    rng = random.Random(0)
    for session in (0, 7, 31):
        assert count_owner(count_start(rng, session)) == session
    windows = {0: range(2000, 2020), 3: range(5008, 5030), 4: range(6100, 6120)}
    assert count_sources(" 2004, 5012, 5013,", 0, windows) == [3]


def test_a_count_broken_into_stray_numbers_names_no_source():
    # What a 270M model's broken count looks like: digits doubled, a thousands digit flipped.
    windows = {0: range(2000, 2020), 3: range(5008, 5030), 4: range(6100, 6120)}
    assert count_sources(" 2004, 20055, 5012, 2006, 6107,", 0, windows) == []
    # One number of another's window is not a run of its count; its own never is.
    assert count_sources(" 2004, 2005, 5012,", 0, windows) == []
    assert count_sources(" 5012, 5013,", 3, windows) == []


def test_a_count_window_covers_every_turn_of_its_conversation():
    first = counting_item(run_id="r", session=5, start=7000, max_tokens=16, shape="conversation")
    assert count_window(first) == range(7000, 7020)
    third = first.model_copy(update={"session": 7, "turn": Turn(conversation=5, index=3)})
    assert count_window(third) == range(7000, 7052)
