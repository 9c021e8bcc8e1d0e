"""Greedy rows beside sampled rows, against greedy rows beside greedy ones.

Where the server returns no logprobs, a greedy row that was sampled (it took a neighbour's
temperature) still shows: it diverges from its serial reference far more often than the
greedy rows that ran beside greedy traffic only, in the same step. One-sided Fisher exact
test on the two rates; pooled over every step of the run too, since one step has few rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

from batchprobe.results.arms import ArmResult
from batchprobe.results.findings import Finding, FindingKind
from batchprobe.results.sessions import SessionResult
from batchprobe.results.thresholds import Thresholds

BESIDE_SAMPLED = "open"  # the params shape's greedy open-ended rows sent with sampled rows
BESIDE_GREEDY = "control"  # the same kind of rows, sent in a later phase beside greedy ones


def fisher_greater(a: int, n1: int, c: int, n2: int) -> float:
    """P(at least ``a`` of the ``a + c`` diverged rows fall in the first group of ``n1``),
    both groups drawn alike: the one-sided Fisher exact p-value."""
    total, diverged = n1 + n2, a + c
    if not n1 or not n2 or not diverged:
        return 1.0
    den = comb(total, diverged)
    top = min(n1, diverged)
    return sum(comb(n1, k) * comb(n2, diverged - k) for k in range(a, top + 1)) / den


def _rows(arm: ArmResult, role: str, refs: dict[int, SessionResult]) -> list[tuple[SessionResult, bool]]:
    """(row, diverged from its reference) for the rows of ``role`` with a comparable reference."""
    rows = []
    for s in arm.sessions:
        ref = refs.get(s.session)
        sit = s.situation
        if sit is None or sit.role != role or s.error is not None or ref is None:
            continue
        if s.top_logprobs:
            continue  # the top-1 check judges it directly
        if s.prompt_digest is not None and s.prompt_digest != ref.prompt_digest:
            continue
        rows.append((s, s.text != ref.text))
    return rows


def _test(
    name: str, step: int | None,
    beside: list[tuple[SessionResult, bool]], control: list[tuple[SessionResult, bool]],
    t: Thresholds,
) -> Finding | None:
    a = sum(d for _, d in beside)
    c = sum(d for _, d in control)
    p = fisher_greater(a, len(beside), c, len(control))
    if p > t.divergence_p:
        return None
    sessions = sorted(s.session for s, d in beside if d)
    return Finding(
        arm=name,
        step=step,
        shape="params",
        kind=FindingKind.SAMPLED_DIVERGENCE,
        sessions=sessions,
        evidence=f"{a}/{len(beside)} beside sampled vs {c}/{len(control)} beside greedy",
        message=(
            f"greedy rows beside sampled rows diverged from serial in {a}/{len(beside)}, greedy "
            f"rows beside greedy ones in {c}/{len(control)} (one-sided Fisher p={p:.4f}): the "
            f"greedy rows {', '.join(map(str, sessions))} were sampled with a neighbour's "
            "parameters"
        ),
    )


def sampled_divergence(
    arms: Sequence[ArmResult], refs: dict[int, SessionResult], t: Thresholds
) -> list[Finding]:
    found: list[Finding] = []
    pooled_beside: list[tuple[SessionResult, bool]] = []
    pooled_control: list[tuple[SessionResult, bool]] = []
    tested = False
    for arm in arms[1:]:
        beside, control = _rows(arm, BESIDE_SAMPLED, refs), _rows(arm, BESIDE_GREEDY, refs)
        if not beside or not control:
            continue
        step = arm.spec.depth
        finding = _test(arm.spec.name, step, beside, control, t)
        if finding is not None:
            found.append(finding)
        pooled_beside += beside
        pooled_control += control
        tested = True
    if not found and tested:
        pooled = _test("run", None, pooled_beside, pooled_control, t)
        if pooled is not None:
            found.append(pooled.model_copy(update={"message": "every step pooled: " + pooled.message}))
    return found
