"""The shrink's reductions on a synthetic failure (no server): ddmin keeps the failing request
and ends 1-minimal, the passes after it shorten what they may and keep only what still
fails, and the time budget stops it at the smallest case so far; the report names the
bisect's first fixed version."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from batchprobe.repro.case import Kept, ReproCase, ReproRequest, Target
from batchprobe.repro.shrink import Shrinker, drop_requests, shrink
from batchprobe.repro.write import _bisect_lines
from batchprobe.results.bisect import BisectReport, BisectStatus, Criterion
from batchprobe.results.findings import FindingKind
from batchprobe.results.items import Planted, SamplingParams, Sending, WorkItem
from batchprobe.results.thresholds import Thresholds


def _case(n: int) -> ReproCase:
    requests = [
        ReproRequest(
            session=i,
            item=WorkItem(workload="decode", session=i, prompt=f"[run r session {i}] go",
                          max_tokens=64, params=SamplingParams(temperature=0.5 if i % 2 else 0.0)),
            offset_s=0.01 * i,
        )
        for i in range(n)
    ]
    return ReproCase(run_id="r", target=Target(base_url="http://x"),
                     kept=Kept(kind=FindingKind.COUNT_BROKE, session=5, arm="sweep@8", message="m"),
                     concurrency=8, prompt_style="completion", sending=Sending(),
                     requests=requests, planted=Planted(), thresholds=Thresholds())


def _shrinker(case: ReproCase, fails: Callable[[list[ReproRequest]], bool],
              budget_s: float = 60.0) -> tuple[Shrinker, list[int]]:
    calls: list[int] = []

    async def trial(requests: list[ReproRequest]) -> int:
        calls.append(len(requests))
        return 3 if fails(requests) else 0

    return Shrinker(case, trial, 3, 2, time.monotonic() + budget_s, lambda line: None), calls


def test_ddmin_keeps_the_failing_request_and_ends_one_minimal() -> None:
    # Fails while sessions 5, 2 and 11 are all sent: exactly those three remain.
    case = _case(16)
    need = {2, 5, 11}
    s, calls = _shrinker(case, lambda rs: need <= {r.session for r in rs})
    kept = asyncio.run(drop_requests(s, list(case.requests)))
    assert sorted(r.session for r in kept) == [2, 5, 11]
    assert calls[0] == 1, "the failing request alone is tried first"
    # ddmin's bound: quadratic in the requests at worst, never the 2^15 subsets.
    assert len(calls) <= len(case.requests) ** 2 and all(st.failed == 3 for st in s.history)


def test_a_failure_of_one_request_alone_is_one_request() -> None:
    case = _case(8)
    s, calls = _shrinker(case, lambda rs: any(r.session == 5 for r in rs))
    assert [r.session for r in asyncio.run(drop_requests(s, list(case.requests)))] == [5]
    assert calls == [1]


def test_the_passes_shorten_and_plain_only_what_still_fails() -> None:
    # Needs session 3 sampled beside 5 and session 5 at 16 tokens or more.
    case = _case(8)

    def fails(rs: list[ReproRequest]) -> bool:
        by = {r.session: r for r in rs}
        return (5 in by and 3 in by and by[5].item.max_tokens >= 16
                and not by[3].item.params.greedy)

    s, _ = _shrinker(case, fails)
    result = {r.session: r for r in asyncio.run(shrink(s))}
    assert sorted(result) == [3, 5]
    assert result[5].item.max_tokens == 16 and result[3].item.max_tokens == 8
    assert not result[3].item.params.greedy, "its sampling is what the failure needs"
    assert all(r.offset_s == 0.0 for r in result.values())


def test_the_time_budget_stops_at_the_smallest_case_so_far() -> None:
    case = _case(8)
    s, calls = _shrinker(case, lambda rs: True, budget_s=0.0)
    assert len(asyncio.run(drop_requests(s, list(case.requests)))) == 8 and not calls


def test_the_report_names_the_first_fixed_version() -> None:
    found = BisectReport(engine="vllm-mlx", good="0.6.0", bad="0.2.8", direction="fix",
                         criterion=Criterion.CORRECT, check_ends=False, probe_options={},
                         versions=["0.2.8", "0.2.9", "0.6.0"], status=BisectStatus.FOUND,
                         first_changed="0.2.9", last_unchanged="0.2.8")
    lines = " ".join(_bisect_lines(found))
    assert "first fixed version: **0.2.9**" in lines and "last broken: 0.2.8" in lines
