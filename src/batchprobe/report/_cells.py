"""The arms table's cells as text, shared by the console, markdown and HTML renderers."""

from __future__ import annotations

from batchprobe.results.models import ArmResult, Report

ARM_COLUMNS = ("arm", "N", "errors", "recall", "x-talk", "decode tok/s", "speedup",
               "prefill tok/s", "TTFT p50", "greedy =", "cached tok")


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def arm_cells(report: Report, arm: ArmResult) -> list[str]:
    """One row of the arms table (``ARM_COLUMNS``)."""
    m, c = arm.metrics, report.comparison(arm.spec.name)
    if m is None:
        return [arm.spec.name, str(arm.spec.concurrency), arm.state, *["-"] * 8]
    return [
        arm.spec.name,
        str(arm.spec.concurrency),
        str(m.sessions - m.ok_sessions),
        "-" if m.recall is None else f"{m.recall_hits}/{m.recall_sessions}",
        str(m.cross_talk_sessions),
        _fmt(m.decode_tokens_per_s, ".1f"),
        _fmt(c.decode_speedup if c else None, ".2f", "x"),
        _fmt(m.prefill_tokens_per_s, ".0f"),
        _fmt(m.ttft_s.p50 * 1000 if m.ttft_s else None, ".0f", " ms"),
        "-" if c is None or not c.greedy_compared else f"{c.greedy_matches}/{c.greedy_compared}",
        _fmt(m.cached_prompt_tokens, "d"),
    ]


def headline(report: Report) -> str:
    """``FAIL parallel=None correct=False (status ok)``."""
    v = report.verdict
    return (f"{v.outcome.value} parallel={v.parallel} correct={v.correct} "
            f"(status {report.status.value})")


def subject(report: Report) -> str:
    """What was probed: engine (or URL) and model."""
    what = report.config.engine or report.config.base_url or "server"
    model = report.config.model or report.environment.served_model
    return f"{what} · {model}" if model else what
