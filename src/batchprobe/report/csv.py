"""CSV of the steps table (a sweep) or of the arms table: one row per step or arm.

Each row carries the run's id (CSVs of several runs concatenate). Values are the typed
report's own fields, unformatted (seconds, tokens per second, ratios), so a
spreadsheet or pandas reads numbers, not "42.2 / 48.8 ms" strings.
"""

from __future__ import annotations

import csv
import io

from batchprobe.results.models import ArmResult, Distribution, Report
from batchprobe.results.sweep import SweepStep

STEP_FIELDS = ("run_id", "n", "arm", "kind", "correct", "requests", "errors", "decode_tokens_per_s",
               "per_session_decode_tokens_per_s", "speedup", "scaling_efficiency",
               "mixed_speedup", "ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s",
               "server_running_max", "server_running_mean", "server_waiting_max",
               "client_overlap_max", "engine_rss_peak_mb", "within_slo", "wall_s", "first_reason")
ARM_FIELDS = ("run_id", "arm", "n", "role", "state", "sessions", "errors", "recall_hits", "recall_sessions",
              "cross_talk_sessions", "decode_tokens_per_s", "decode_speedup",
              "prefill_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s",
              "greedy_matches", "greedy_compared", "cached_prompt_tokens", "wall_s")

Value = str | int | float | bool | None


def _pcts(dist: Distribution | None) -> tuple[float | None, float | None]:
    return (None, None) if dist is None else (dist.p50, dist.p99)


def step_row(report: Report, step: SweepStep) -> dict[str, Value]:
    arm = report.arm(step.arm)
    m = arm.metrics if arm is not None else None
    load = step.server_load
    ttft = _pcts(m.ttft_s if m else None)
    itl = _pcts(m.itl_s if m else None)
    values: tuple[Value, ...] = (
        report.run_id, step.n, step.arm, step.kind, step.correct, step.requests, step.errors,
        step.decode_tokens_per_s, step.per_session_decode_tokens_per_s, step.speedup,
        step.scaling_efficiency, step.mixed_speedup, *ttft, *itl,
        load.running_max if load else None, load.running_mean if load else None,
        load.waiting_max if load else None, step.client_overlap_max, step.engine_rss_peak_mb,
        step.within_slo, step.wall_s, step.reasons[0] if step.reasons else None,
    )  # fmt: skip
    return dict(zip(STEP_FIELDS, values))


def arm_row(report: Report, arm: ArmResult) -> dict[str, Value]:
    m, c = arm.metrics, report.comparison(arm.spec.name)
    ttft = _pcts(m.ttft_s if m else None)
    itl = _pcts(m.itl_s if m else None)
    values: tuple[Value, ...] = (
        report.run_id, arm.spec.name, arm.spec.concurrency, arm.spec.role, arm.state,
        m.sessions if m else None, m.sessions - m.ok_sessions if m else None,
        m.recall_hits if m else None, m.recall_sessions if m else None,
        m.cross_talk_sessions if m else None, m.decode_tokens_per_s if m else None,
        c.decode_speedup if c else None, m.prefill_tokens_per_s if m else None, *ttft, *itl,
        c.greedy_matches if c else None, c.greedy_compared if c else None,
        m.cached_prompt_tokens if m else None, m.wall_s if m else None,
    )  # fmt: skip
    return dict(zip(ARM_FIELDS, values))


def table_rows(report: Report) -> tuple[tuple[str, ...], list[dict[str, Value]]]:
    """A sweep's steps (by N), or else every arm: the header and the rows."""
    env = report.envelope
    if env is not None and env.steps:
        return STEP_FIELDS, [step_row(report, s) for s in sorted(env.steps, key=lambda s: s.n)]
    return ARM_FIELDS, [arm_row(report, a) for a in report.arms]


def render_csv(report: Report) -> str:
    header, rows = table_rows(report)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    return out.getvalue()


class CsvRenderer:
    name = "csv"
    suffix = ".csv"

    def render(self, report: Report) -> str:
        return render_csv(report)


RENDERER = CsvRenderer()
