"""The binary search: every boundary found within a binary search's probes, skips stepped
around, ambiguity named, and the same path replayed from what is known."""

from __future__ import annotations

import pytest

from batchprobe.bisect import Conclusion, most_probes, next_step
from batchprobe.results.bisect import BisectStatus, Judgement

G, B, S = Judgement.GOOD, Judgement.BAD, Judgement.SKIPPED


def _versions(n: int) -> list[str]:
    return [f"1.{i}.0" for i in range(n)]


def _search(
    versions: list[str], truth: dict[str, Judgement], old: Judgement
) -> tuple[Conclusion, list[str]]:
    """Run the search against an oracle; the conclusion and the versions it probed."""
    known = {versions[0]: old, versions[-1]: G if old is B else B}
    probed: list[str] = []
    while True:
        step = next_step(versions, known, old)
        if isinstance(step, Conclusion):
            return step, probed
        assert step not in known and step not in (versions[0], versions[-1])
        probed.append(step)
        known[step] = truth[step]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13, 33])
@pytest.mark.parametrize("old", [G, B])
def test_every_boundary_is_found_within_a_binary_search(n: int, old: Judgement) -> None:
    versions = _versions(n)
    new = G if old is B else B
    for boundary in range(1, n):  # versions[boundary] is the first with the new judgement
        truth = {v: (old if i < boundary else new) for i, v in enumerate(versions)}
        found, probed = _search(versions, truth, old)
        assert found.status is BisectStatus.FOUND
        assert (found.last_unchanged, found.first_changed) == (
            versions[boundary - 1],
            versions[boundary],
        )
        assert len(probed) <= most_probes(versions), (boundary, probed)


def test_the_vllm_mlx_fix_takes_two_probes() -> None:
    versions = ["0.3.0", "0.4.0", "0.4.1", "0.5.0", "0.6.0"]
    truth = {"0.4.0": G, "0.4.1": G, "0.5.0": G}
    found, probed = _search(versions, truth, B)
    assert found.first_changed == "0.4.0" and found.last_unchanged == "0.3.0"
    assert probed == ["0.4.1", "0.4.0"] and most_probes(versions) == 2


def test_a_skipped_version_is_stepped_around() -> None:
    versions = _versions(6)
    truth = {versions[1]: G, versions[2]: S, versions[3]: B, versions[4]: B}
    found, probed = _search(versions, truth, G)
    assert found.status is BisectStatus.AMBIGUOUS and found.first_changed is None
    # The change is at 2 (skipped) or 3: both are named.
    assert found.candidates == [versions[2], versions[3]]
    assert versions[2] in probed


def test_a_skip_away_from_the_boundary_does_not_hide_it() -> None:
    versions = _versions(7)
    truth = {v: (G if i < 5 else B) for i, v in enumerate(versions)}
    truth[versions[3]] = S
    found, _ = _search(versions, truth, G)
    assert found.status is BisectStatus.FOUND and found.first_changed == versions[5]


def test_the_next_step_depends_only_on_what_is_known() -> None:
    versions = _versions(9)
    known = {versions[0]: G, versions[-1]: B, versions[4]: B}
    assert next_step(versions, known, G) == next_step(versions, dict(known), G) == versions[2]
