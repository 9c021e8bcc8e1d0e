"""Small statistics: percentiles and the union length of time intervals."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from batchprobe.results.models import Distribution


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values, ``q`` in [0, 100]."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    frac = pos - low
    return sorted_values[low] * (1 - frac) + sorted_values[high] * frac


def distribution(values: Iterable[float]) -> Distribution | None:
    data = sorted(values)
    if not data:
        return None
    return Distribution(
        n=len(data),
        mean=sum(data) / len(data),
        p50=percentile(data, 50),
        p90=percentile(data, 90),
        p99=percentile(data, 99),
        max=data[-1],
    )


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total time covered by at least one interval.

    Serial sessions' decode windows add up; concurrent ones overlap and count once, so
    tokens / union is the aggregate rate in both cases without counting idle gaps.
    """
    total = 0.0
    current_start: float | None = None
    current_end = 0.0
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if current_start is None or start > current_end:
            if current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_start is not None:
        total += current_end - current_start
    return total
