"""Decision thresholds, with the reasoning behind each default."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_speedup: float = Field(
        default=1.5,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Aggregate decode speedup over the baseline arm needed to call batching parallel. "
            "A serial engine that time-slices shows ~1.0x; measured continuous batching on a 2-core "
            "CPU reaches ~2x at 8 streams and GPUs far more, so 1.5x separates them with margin "
            "for noise."
        ),
    )
    recall_floor: float = Field(
        default=0.75,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "Baseline recall below this makes recall uninformative (the model cannot do the task "
            "even alone): the verdict is INCONCLUSIVE on recall and suggests a shorter haystack."
        ),
    )
    max_recall_drop: float = Field(
        default=0.15,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "Largest tolerated drop of recall against the baseline. Engines that are not "
            "batch-invariant flip an occasional answer token under concurrency; 0.15 tolerates one "
            "flip in 8 sessions and fails two."
        ),
    )
    strict_greedy: bool = Field(
        default=False,
        description=(
            "Fail when greedy outputs differ between arms. Off by default: divergence is expected "
            "numerics on engines that are not batch-invariant, so it is reported as a soft signal."
        ),
    )
    client_lag_ms: float = Field(
        default=2.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "A client process whose event loop's busy lag p99 is above this (its own work "
            "delaying a ready callback) timestamps tokens late by as much: the arm gets a warning "
            "and a sweep step's TTFT/ITL are not judged against the SLOs. One loop-iteration's "
            "worth of tokens at 256 streams costs about 1 ms; 2 ms is well below a GPU's ITL."
        ),
    )
    buffered_span_ms: float = Field(
        default=2.0,
        ge=0,
        allow_inf_nan=False,
        description=(
            "A stream whose tokens (4 or more) all arrive within this span was buffered by the "
            "server or a proxy; its session is timed end to end instead of per token."
        ),
    )
