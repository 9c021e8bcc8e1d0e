"""Binary search over released versions, replayed from what is already known.

``next_step`` is pure: given the versions (old to new, the two ends included), the judgements
known so far and the judgement of the oldest end, it names the next version to probe or
concludes. Replaying from the known judgements is what makes a bisect resumable: the same
inputs always lead down the same path, so a resumed bisect re-probes nothing it has judged.
Skipped versions (could not install, start or be judged) are stepped around, as in
``git bisect skip``; when they hide the change, the conclusion is ambiguous and names the
candidates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from batchprobe.results.bisect import BisectStatus, Judgement


@dataclass(frozen=True)
class Conclusion:
    status: BisectStatus
    last_unchanged: str
    first_changed: str | None
    candidates: list[str] = field(default_factory=list)


def next_step(
    versions: list[str], known: Mapping[str, Judgement], old: Judgement
) -> str | Conclusion:
    """The next version to probe, or the conclusion. ``old`` is the oldest end's judgement;
    the newest end is taken to have the other one."""
    lo, hi = 0, len(versions) - 1
    while True:
        inner = [i for i in range(lo + 1, hi) if known.get(versions[i]) is not Judgement.SKIPPED]
        if not inner:
            if hi - lo == 1:
                return Conclusion(BisectStatus.FOUND, versions[lo], versions[hi])
            return Conclusion(
                BisectStatus.AMBIGUOUS, versions[lo], None, versions[lo + 1 : hi + 1]
            )
        centre = (lo + hi) / 2
        mid = min(inner, key=lambda i: (abs(i - centre), i))
        judged = known.get(versions[mid])
        if judged is None:
            return versions[mid]
        if judged is old:
            lo = mid
        else:
            hi = mid


def most_probes(versions: list[str]) -> int:
    """Probes a binary search needs at most between the two ends (none skipped)."""
    inner = len(versions) - 2
    return math.ceil(math.log2(inner + 1)) if inner > 0 else 0
