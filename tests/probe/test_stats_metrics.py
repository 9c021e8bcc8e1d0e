import pytest

from batchprobe.client.types import ErrorKind, RequestError
from batchprobe.probe.metrics import arm_metrics
from batchprobe.probe.stats import distribution, percentile, union_length
from batchprobe.results.models import SessionResult


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5
    with pytest.raises(ValueError):
        percentile([], 50)


def test_union_counts_overlap_once_and_gaps_not_at_all():
    assert union_length([(0, 1), (2, 3)]) == 2
    assert union_length([(0, 2), (1, 3)]) == 3
    assert union_length([(0, 5), (1, 2), (6, 7)]) == 6
    assert union_length([]) == 0


def test_distribution():
    d = distribution([3.0, 1.0, 2.0])
    assert d.n == 3 and d.p50 == 2.0 and d.max == 3.0
    assert distribution([]) is None


def _decode(session, start, first, last, tokens, **kw):
    return SessionResult(
        arm="a", workload="decode", session=session, request_id=f"r{session}",
        start_s=start, first_token_s=first, last_token_s=last, end_s=last,
        completion_tokens=tokens, chunk_ends=list(range(1, tokens + 1)), text="x" * tokens, **kw)


def test_serial_and_concurrent_rates_from_the_same_definition():
    serial = [_decode(0, 0, 0.1, 1.1, 11), _decode(1, 1.2, 1.3, 2.3, 11)]
    assert arm_metrics(serial, 2.3).decode_tokens_per_s == pytest.approx(20 / 2.0)
    concurrent = [_decode(0, 0, 0.1, 1.1, 11), _decode(1, 0, 0.1, 1.1, 11)]
    assert arm_metrics(concurrent, 1.1).decode_tokens_per_s == pytest.approx(20 / 1.0)


def test_buffered_session_timed_end_to_end():
    s = _decode(0, 0.0, 0.999, 1.0, 10, buffered=True)
    m = arm_metrics([s], 1.0)
    assert m.decode_tokens_per_s == pytest.approx(10 / 1.0)
    assert m.buffered_sessions == 1 and m.ttft_s is None


def test_errors_by_kind_and_recall_ignores_errors():
    err = RequestError(kind=ErrorKind.FINISH_REASON_ERROR, message="x")
    sessions = [
        SessionResult(arm="a", workload="recall", session=0, request_id="0", start_s=0, end_s=1,
                      hit=True, expected_code="1"),
        SessionResult(arm="a", workload="recall", session=1, request_id="1", start_s=0, end_s=1,
                      error=err, expected_code="2"),
    ]
    m = arm_metrics(sessions, 1)
    assert m.errors_by_kind == {ErrorKind.FINISH_REASON_ERROR: 1}
    assert m.recall == 1.0 and m.recall_sessions == 1
