"""Which versions lie between two: ordering, pre-releases, bad input; the real index."""

from __future__ import annotations

import pytest

from batchprobe.bisect import between, index_versions
from batchprobe.errors import ConfigError

RELEASED = ["0.6.0", "0.5.0", "0.5.0rc1", "0.4.1", "0.4.0", "0.3.0", "0.2.9", "junk"]


def test_between_sorts_old_to_new_with_both_ends_whichever_is_good() -> None:
    assert between(RELEASED, "0.6.0", "0.3.0") == ["0.3.0", "0.4.0", "0.4.1", "0.5.0", "0.6.0"]
    assert between(RELEASED, "0.3.0", "0.4.1") == ["0.3.0", "0.4.0", "0.4.1"]


def test_pre_releases_only_when_an_end_is_one() -> None:
    assert "0.5.0rc1" not in between(RELEASED, "0.4.0", "0.6.0")
    assert between(RELEASED, "0.5.0rc1", "0.6.0") == ["0.5.0rc1", "0.5.0", "0.6.0"]


def test_an_end_missing_from_the_index_is_still_an_end() -> None:
    assert between(RELEASED, "0.4.0", "0.4.5") == ["0.4.0", "0.4.1", "0.4.5"]


@pytest.mark.parametrize(
    ("good", "bad", "field"), [("x.y", "0.3.0", "good"), ("0.3.0", "nope", "bad"),
                               ("0.3.0", "0.3.0", "bad")],
)  # fmt: skip
def test_bad_ends_name_their_option(good: str, bad: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        between(RELEASED, good, bad)
    assert caught.value.field == field


def test_the_package_index_lists_vllm_mlx_releases() -> None:
    released = index_versions("vllm-mlx")
    assert {"0.3.0", "0.4.0", "0.4.1", "0.5.0", "0.6.0"} <= set(released)
    assert between(released, "0.6.0", "0.3.0") == ["0.3.0", "0.4.0", "0.4.1", "0.5.0", "0.6.0"]
