import random

from batchprobe.workload.decode import build_decode_items
from batchprobe.workload.needle import find_needle_code, make_codes
from batchprobe.workload.recall import build_recall_items
from batchprobe.workload.scoring import score_recall


def _recall(**kw):
    args = {"run_id": "ab12", "sessions": 8, "haystack_tokens": 500, "prompt_style": "completion",
                "max_tokens": 16, "seed": 3}
    args.update(kw)
    return build_recall_items(**args)


def test_codes_are_unique_and_never_substrings_of_each_other():
    codes = make_codes(random.Random(1), 500)
    assert len(set(codes)) == 500
    assert not any(a in b for a in codes for b in codes if a != b)


def test_recall_items_plant_their_own_needle_with_run_nonce():
    items = _recall()
    assert [i.session for i in items] == list(range(8))
    assert len({i.expected_code for i in items}) == 8
    for item in items:
        assert find_needle_code(item.prompt) == item.expected_code
        assert item.prompt.startswith("[run ab12 session")
        assert item.prompt.endswith("ACCESS_CODE=")
        assert 0.1 <= item.depth <= 0.9
        # ~500 tokens at 3.2 chars per token
        assert 1400 < len(item.prompt) < 1900


def test_recall_items_are_seeded_and_depend_on_run():
    assert _recall() == _recall()
    assert _recall()[0].expected_code != _recall(run_id="ff00")[0].expected_code
    assert _recall(chars_per_token=6.4)[0].prompt.__len__() > 2 * 1400


def test_chat_style_asks_for_the_code_only():
    item = _recall(prompt_style="chat")[0]
    assert item.prompt.endswith("Reply with the digits only.")


def test_decode_items_are_distinct_short_prompts():
    items = build_decode_items(run_id="ab12", sessions=4, max_tokens=128,
                               prompt_style="completion", seed=0)
    assert len({i.prompt for i in items}) == 4
    assert all(i.max_tokens == 128 and len(i.prompt) < 120 for i in items)
    assert all(find_needle_code(i.prompt) is None for i in items)


def test_scoring_hit_miss_and_cross_talk_names_source():
    codes = {0: "1234567", 1: "7654321", 2: "5555555"}
    assert score_recall(" 1234567\n", 0, codes).hit
    assert score_recall("1 234-567", 0, codes).hit
    miss = score_recall("no idea", 0, codes)
    assert not miss.hit and miss.cross_talk_from == []
    leak = score_recall(" 7654321", 0, codes)
    assert not leak.hit and leak.cross_talk_from == [1]
