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


# Two-sided 95% Student-t quantiles by degrees of freedom (1..30); beyond, the normal's.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


def t95(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom."""
    return _T95[df - 1] if df <= len(_T95) else 1.960


def ratio_interval(ratios: Sequence[float], resolution: float) -> tuple[float, float, float]:
    """(median, low, high) of positive ratios: a 95% t-interval over their logs, widened to
    hold the median and never narrower than ``resolution`` (relative) either side of it."""
    if not ratios or min(ratios) <= 0:
        raise ValueError("ratio_interval needs positive ratios")
    median = percentile(sorted(ratios), 50)
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / len(logs)
    if len(logs) > 1:
        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
        half = t95(len(logs) - 1) * sd / math.sqrt(len(logs))
    else:
        half = math.inf
    low = min(math.exp(mean - half), median / (1 + resolution))
    high = max(math.exp(mean + half), median * (1 + resolution))
    return median, low, high
